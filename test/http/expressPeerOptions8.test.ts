/**
 * express-rate-limit 8's options that `tokenlease/express` (without a `limiter`) did not take,
 * found in the third operator trial by sending the same requests to express-rate-limit 8.7.5 and
 * to tokenlease: `identifier` and `ipv6Subnet` as functions of `(req, res)` threw a `ConfigError`
 * at start-up (naming `rules[0].name` for the identifier), `retryAfter` (8's override of the
 * `Retry-After` value) was warned about as unknown and ignored, and the deprecated `headers`
 * (express-rate-limit's old name of `legacyHeaders`, which 8 still reads) was ignored. The values
 * expected below are express-rate-limit 8.7.5's answers to the same requests.
 */
import express, { type Request } from 'express';
import request from 'supertest';
import { describe, expect, it } from 'vitest';
import rateLimit from '../../src/http/express.js';
import { Limiter } from '../../src/index.js';

function appWith(options: Parameters<typeof rateLimit>[0]) {
  const app = express();
  app.set('trust proxy', 1);
  app.use(rateLimit({ validate: false, ...options }));
  app.get('/:name', (req, res) => {
    res.send(req.params.name);
  });
  return app;
}

describe('express-rate-limit 8 options without a limiter', () => {
  it('identifier as a function names the draft-8 quota per request', async () => {
    const app = appWith({
      limit: 2,
      standardHeaders: 'draft-8',
      identifier: (req: Request) => `q-${req.path.slice(1)}`,
    });
    const res = await request(app).get('/reports');
    expect(res.status).toBe(200);
    expect(res.headers.ratelimit).toBe('"q-reports"; r=1; t=60');
    expect(res.headers['ratelimit-policy']).toMatch(/^"q-reports"; q=2; w=60; pk=:[A-Za-z0-9+/=]+:$/);
  });

  it('an async identifier is awaited, on refusals too', async () => {
    const app = appWith({ limit: 1, standardHeaders: 'draft-8', identifier: async () => 'daily' });
    await request(app).get('/a');
    const res = await request(app).get('/a');
    expect(res.status).toBe(429);
    expect(res.headers.ratelimit).toBe('"daily"; r=0; t=60');
  });

  it('retryAfter sets the Retry-After of a refusal, as a number or an (async) function', async () => {
    for (const retryAfter of [7, async () => 7]) {
      const app = appWith({ limit: 1, retryAfter });
      expect(
        (await request(app).get('/a')).headers['retry-after'],
        'not on an admitted request',
      ).toBeUndefined();
      const res = await request(app).get('/a');
      expect(res.status).toBe(429);
      expect(res.headers['retry-after']).toBe('7');
      expect(res.headers['x-ratelimit-reset'], 'the window still resets as it does').toBeDefined();
    }
  });

  it('retryAfter sends nothing when no headers are on, as Retry-After without it', async () => {
    const app = appWith({ limit: 1, retryAfter: 7, legacyHeaders: false });
    await request(app).get('/a');
    const res = await request(app).get('/a');
    expect(res.status).toBe(429);
    expect(res.headers['retry-after']).toBeUndefined();
  });

  it('ipv6Subnet as a function of the request groups IPv6 clients by its result', async () => {
    const app = appWith({ limit: 1, ipv6Subnet: async () => 64 });
    const from = (ip: string) => request(app).get('/a').set('X-Forwarded-For', ip);
    expect((await from('2001:db8::1')).status).toBe(200);
    expect((await from('2001:db8::2')).status, 'same /64').toBe(429);
    expect((await from('2001:db8:0:0:1::2')).status, 'same /64').toBe(429);
    expect((await from('2001:db8:0:1::2')).status, 'another /64').toBe(200);
    expect((await from('192.0.2.1')).status, 'IPv4 is not asked about').toBe(200);
  });

  it('headers: false (the old name of legacyHeaders) turns the X-RateLimit headers off', async () => {
    const app = appWith({ limit: 1, headers: false });
    const ok = await request(app).get('/a');
    expect(ok.headers['x-ratelimit-limit']).toBeUndefined();
    const refused = await request(app).get('/a');
    expect(refused.status).toBe(429);
    expect(refused.headers['x-ratelimit-limit']).toBeUndefined();
    expect(refused.headers['retry-after'], 'no header is on').toBeUndefined();
    const both = appWith({ limit: 1, headers: false, legacyHeaders: true });
    expect((await request(both).get('/a')).headers['x-ratelimit-limit'], 'legacyHeaders wins').toBe('1');
  });

  it('with a limiter, an ipv6Subnet function is a ConfigError naming it (the IP part has no request)', () => {
    const limiter = new Limiter({ policies: { p: { algorithm: 'token-bucket', rate: 10 } } });
    expect(() => rateLimit({ limiter, rules: [{ policy: 'p', by: 'ip' }], ipv6Subnet: () => 64 })).toThrow(
      expect.objectContaining({ code: 'ERR_TOKENLEASE_CONFIG', field: 'ipv6Subnet' }),
    );
  });

  it('an identifier or retryAfter of another type is a ConfigError naming it', () => {
    for (const [field, value] of [
      ['identifier', 5],
      ['retryAfter', '7'],
      ['retryAfter', -1],
    ] as const) {
      expect(() => rateLimit({ [field]: value } as never), `${field}: ${value}`).toThrow(
        expect.objectContaining({ code: 'ERR_TOKENLEASE_CONFIG', field }),
      );
    }
  });
});

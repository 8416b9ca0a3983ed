/**
 * express-rate-limit's options on one tokenlease store shared by two middlewares (a per-minute and
 * a per-hour limit, as docs/migrating.md's stacked limiters): each must count in its own window.
 * Found in the operator trial: the built policy is named after `limit` alone (`limit-3`,
 * `refused-3`), so two limits of 3 with different `windowMs` read and write one key. The hourly
 * limiter refused its first request (express-rate-limit admits it) and sent a reset of
 * 105974497054 s. The policy names now carry the window (src/http/express.ts).
 */
import express from 'express';
import request from 'supertest';
import { afterAll, describe, expect, it } from 'vitest';
import rateLimit from '../../src/http/express.js';
import { closeAllClients } from '../support/clients.js';
import { FRESH_STORES } from '../support/stores.js';

afterAll(closeAllClients);

describe.each(Object.keys(FRESH_STORES))('two express-rate-limit middlewares on one %s', (kind) => {
  it('a per-minute and a per-hour limit of 3 each count in their own window', async () => {
    const store = await FRESH_STORES[kind]!('erl-shared');
    const headers = { standardHeaders: 'draft-8', legacyHeaders: false } as const;
    const app = express();
    app.use(rateLimit({ windowMs: 60_000, limit: 3, store, ...headers }));
    app.use('/login', rateLimit({ windowMs: 3_600_000, limit: 3, store, ...headers }));
    app.get('/', (_req, res) => {
      res.send('hi');
    });
    app.get('/login', (_req, res) => {
      res.send('login');
    });
    const statuses: number[] = [];
    let last = '';
    for (const path of ['/', '/', '/login']) {
      const res = await request(app).get(path);
      statuses.push(res.status);
      last = String(res.headers.ratelimit);
    }
    await store.close();
    // The third request is the minute's third and the hour's first: express-rate-limit admits it.
    expect(statuses, 'each limiter admits its own 3').toEqual([200, 200, 200]);
    expect(last, "the hour's entry: 2 left, reset within the hour").toMatch(/"3-in-1hr"; r=2; t=3600\b/);
  });
});

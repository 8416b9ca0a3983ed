/**
 * A `limit` (express-rate-limit) or `max` (@fastify/rate-limit) function whose value changes from
 * one request of a client to the next. Both peers keep one count per client and compare it with
 * the limit of the request at hand (express-rate-limit 8.7.5 and @fastify/rate-limit 11.2.0
 * answered 200, 200, 429, 429 to these requests in the fourth operator trial). tokenlease's shims
 * keep one fixed-window policy per limit value, so each value counts apart: a client whose
 * requests alternate between two limits gets both (200, 200, 200, 200 here). Not there yet
 * (docs/migrating.md): an expected failure, so that the day it passes the difference is looked at.
 */
import express from 'express';
import Fastify from 'fastify';
import request from 'supertest';
import { describe, expect, it } from 'vitest';
import expressRateLimit from '../../src/http/express.js';
import fastifyRateLimit from '../../src/http/fastify.js';

/** Two requests at the higher limit (3), then one at the lower (1), then one at the higher. */
const urls = ['/?vip=1', '/?vip=1', '/', '/?vip=1'];
const peersAnswer = [200, 200, 429, 429];

describe('a limit function whose value changes between requests of one client', () => {
  it.fails('express: one count per client, compared with each request limit', async () => {
    const app = express();
    app.use(expressRateLimit({ validate: false, limit: (req) => (req.query.vip ? 3 : 1) }));
    app.get('/', (_req, res) => {
      res.send('ok');
    });
    const statuses: number[] = [];
    for (const url of urls) statuses.push((await request(app).get(url)).status);
    expect(statuses).toEqual(peersAnswer);
  });

  it.fails('fastify: one count per client, compared with each request max', async () => {
    const app = Fastify();
    await app.register(fastifyRateLimit, {
      max: (req) => ((req.query as { vip?: string }).vip ? 3 : 1),
      timeWindow: 60_000,
    });
    app.get('/', async () => 'ok');
    const statuses: number[] = [];
    for (const url of urls) statuses.push((await app.inject(url)).statusCode);
    await app.close();
    expect(statuses).toEqual(peersAnswer);
  });
});

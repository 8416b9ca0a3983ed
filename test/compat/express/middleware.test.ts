// Ported from express-rate-limit 3828a5b61c90e3134451ab32e88e61072dbf19f5,
// test/library/middleware-test.ts: the original assertions, run through ./mapping.ts.
// Tests the rate limiting middleware

import type { NextFunction, Request, Response } from 'express';
import { agent as request } from 'supertest';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { deliberatelyDifferent, notApplicable } from '../notApplicable.js';
import { createServer } from './helpers/create-server.js';
import { rateLimit } from './mapping.js';

describe('middleware test', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
    vi.restoreAllMocks();
  });

  it('should not modify the options object passed', () => {
    const options = {};
    rateLimit(options);
    expect(options).toStrictEqual({});
  });

  notApplicable(
    'should call `init` even if no requests have come in',
    "express-rate-limit's Store.init(); tokenlease stores are built by the user",
  );

  // Upstream's describe('async store init'), which holds only not-applicable tests (an empty describe
  // fails under vitest).
  notApplicable(
    'should handle resolving async init',
    "express-rate-limit's Store.init(); tokenlease stores are built by the user",
  );
  notApplicable(
    'should handle rejecting async init and log error',
    "express-rate-limit's Store.init(); tokenlease stores are built by the user",
  );
  notApplicable(
    'should catch synchronous errors thrown from store.init()',
    "express-rate-limit's Store.init(); tokenlease stores are built by the user",
  );

  it('should let the first request through', async () => {
    const app = createServer(rateLimit({ limit: 1 }));

    await request(app).get('/').expect(200).expect('Hi there!');
  });

  it('should refuse additional connections once IP has reached the max', async () => {
    const app = createServer(
      rateLimit({
        limit: 2,
      }),
    );

    await request(app).get('/').expect(200);
    await request(app).get('/').expect(200);
    await request(app).get('/').expect(429);
  });

  it('should (eventually) accept new connections from a blocked IP', async () => {
    const app = createServer(
      rateLimit({
        limit: 2,
        windowMs: 50,
      }),
    );

    await request(app).get('/').expect(200);
    await request(app).get('/').expect(200);
    await request(app).get('/').expect(429);
    vi.advanceTimersByTime(60);
    await request(app).get('/').expect(200);
  });

  it('should work repeatedly', async () => {
    const app = createServer(
      rateLimit({
        limit: 2,
        windowMs: 50,
      }),
    );

    await request(app).get('/').expect(200);
    await request(app).get('/').expect(200);
    await request(app).get('/').expect(429);
    vi.advanceTimersByTime(60);
    await request(app).get('/').expect(200);
    await request(app).get('/').expect(200);
    await request(app).get('/').expect(429);
    vi.advanceTimersByTime(60);
    await request(app).get('/').expect(200);
  });

  it('should block all requests if max is set to 0', async () => {
    const app = createServer(rateLimit({ max: 0, validate: { limit: false } }));

    await request(app).get('/').expect(429);
  });

  it('should show the provided message instead of the default message when max connections are reached', async () => {
    const message = 'Enhance your calm';
    const app = createServer(
      rateLimit({
        windowMs: 1000,
        limit: 2,
        message,
      }),
    );

    await request(app).get('/').expect(200);
    await request(app).get('/').expect(200);
    await request(app).get('/').expect(429).expect(message);
  });

  it('should allow the error status code to be customized', async () => {
    const statusCode = 420;
    const app = createServer(
      rateLimit({
        limit: 1,
        statusCode,
      }),
    );
    await request(app).get('/').expect(200);
    await request(app).get('/').expect(statusCode);
  });

  it('should allow responding with a JSON message', async () => {
    const message = {
      error: {
        code: 'too-many-requests',
        message: 'Too many requests were attempted in a short span of time.',
      },
    };
    const app = createServer(
      rateLimit({
        message,
        limit: 1,
      }),
    );

    await request(app).get('/').expect(200, 'Hi there!');
    await request(app).get('/').expect(429, message);
  });

  it('should allow message to be a function', async () => {
    const app = createServer(
      rateLimit({
        message: () => 'Too many requests.',
        limit: 1,
      }),
    );

    await request(app).get('/').expect(200, 'Hi there!');
    await request(app).get('/').expect(429, 'Too many requests.');
  });

  it('should allow message to be a function that returns a promise', async () => {
    const app = createServer(
      rateLimit({
        message: async () => 'Too many requests.',
        limit: 1,
      }),
    );

    await request(app).get('/').expect(200, 'Hi there!');
    await request(app).get('/').expect(429, 'Too many requests.');
  });

  it('should use a custom handler when specified', async () => {
    const app = createServer(
      rateLimit({
        limit: 1,
        handler(_request, response) {
          response.status(420).end('Enhance your calm');
        },
      }),
    );

    await request(app).get('/').expect(200);
    await request(app).get('/').expect(420, 'Enhance your calm');
  });

  it('should allow custom key generators', async () => {
    const app = createServer(
      rateLimit({
        limit: 2,
        keyGenerator: (request, _response) => request.query.key as string,
      }),
    );

    await request(app).get('/').query({ key: 1 }).expect(200);
    await request(app).get('/').query({ key: 1 }).expect(200);

    await request(app).get('/').query({ key: 2 }).expect(200);

    await request(app).get('/').query({ key: 1 }).expect(429);

    await request(app).get('/').query({ key: 2 }).expect(200);
    await request(app).get('/').query({ key: 2 }).expect(429);
  });

  it('should allow custom skip function', async () => {
    const app = createServer(
      rateLimit({
        limit: 2,
        skip: () => true,
      }),
    );

    await request(app).get('/').query({ key: 1 }).expect(200);
    await request(app).get('/').query({ key: 1 }).expect(200);

    await request(app).get('/').query({ key: 1 }).expect(200);
  });

  it('should allow custom skip function that returns a promise', async () => {
    const limiter = rateLimit({
      limit: 2,
      skip: async () => true,
    });

    const app = createServer(limiter);
    await request(app).get('/').query({ key: 1 }).expect(200);
    await request(app).get('/').query({ key: 1 }).expect(200);

    await request(app).get('/').query({ key: 1 }).expect(200);
  });

  it('should allow max to be a function', async () => {
    const app = createServer(
      rateLimit({
        limit: () => 2,
      }),
    );

    await request(app).get('/').expect(200);
    await request(app).get('/').expect(200);
    await request(app).get('/').expect(429);
  });

  it('should allow max to be a function that returns a promise', async () => {
    const app = createServer(
      rateLimit({
        limit: async () => 2,
      }),
    );

    await request(app).get('/').expect(200);
    await request(app).get('/').expect(200);
    await request(app).get('/').expect(429);
  });

  it('should calculate the remaining hits', async () => {
    const app = createServer(
      rateLimit({
        limit: async () => 2,
      }),
    );

    await request(app)
      .get('/')
      .expect(200)
      .expect('x-ratelimit-limit', '2')
      .expect('x-ratelimit-remaining', '1')
      .expect((response) => {
        if ('retry-after' in response.headers) {
          throw new Error(`Expected no retry-after header, got ${response.headers['retry-after']}`);
        }
      })
      .expect(200, 'Hi there!');
  });

  notApplicable(
    'should call `increment` on the store (modern store)',
    "asserts calls on a mock of express-rate-limit's Store interface (tokenlease counts in its own stores); behaviour.test.ts checks the behaviour",
  );
  notApplicable(
    'should call `increment` on the store (legacy store)',
    "express-rate-limit's legacy/compat Store interfaces do not exist in tokenlease",
  );
  notApplicable(
    'should call `increment` on the store (compat store)',
    "express-rate-limit's legacy/compat Store interfaces do not exist in tokenlease",
  );

  notApplicable(
    'should call `resetKey` on the store (modern store)',
    "asserts calls on a mock of express-rate-limit's Store interface (tokenlease counts in its own stores); behaviour.test.ts checks the behaviour",
  );
  notApplicable(
    'should call `resetKey` on the store (legacy store)',
    "express-rate-limit's legacy/compat Store interfaces do not exist in tokenlease",
  );
  notApplicable(
    'should call `resetKey` on the store (compat store)',
    "express-rate-limit's legacy/compat Store interfaces do not exist in tokenlease",
  );

  notApplicable(
    'should call `get` on the store (modern store)',
    "asserts calls on a mock of express-rate-limit's Store interface (tokenlease counts in its own stores); behaviour.test.ts checks the behaviour",
  );
  notApplicable(
    'should call `get` on the store (compat store)',
    "express-rate-limit's legacy/compat Store interfaces do not exist in tokenlease",
  );

  notApplicable(
    'should throw an error if `get` does not exist on the store (legacy store)',
    "express-rate-limit's legacy/compat Store interfaces do not exist in tokenlease",
  );

  notApplicable(
    'should decrement hits when requests succeed and `skipSuccessfulRequests` is set to true (modern store)',
    "asserts calls on a mock of express-rate-limit's Store interface (tokenlease counts in its own stores); behaviour.test.ts checks the behaviour",
  );
  notApplicable(
    'should decrement hits when requests succeed and `skipSuccessfulRequests` is set to true (legacy store)',
    "express-rate-limit's legacy/compat Store interfaces do not exist in tokenlease",
  );
  notApplicable(
    'should decrement hits when requests succeed and `skipSuccessfulRequests` is set to true (compat store)',
    "express-rate-limit's legacy/compat Store interfaces do not exist in tokenlease",
  );

  notApplicable(
    'should decrement hits when request finishes before `resetTime` with `skipSuccessfulRequests`',
    "asserts calls on a mock of express-rate-limit's Store interface (tokenlease counts in its own stores); behaviour.test.ts checks the behaviour",
  );

  notApplicable(
    'should not decrement hits when request finishes after `resetTime` with `skipSuccessfulRequests`',
    "asserts calls on a mock of express-rate-limit's Store interface (tokenlease counts in its own stores); behaviour.test.ts checks the behaviour",
  );

  notApplicable(
    'should not decrement hits when requests fail and `skipSuccessfulRequests` is set to true (modern store)',
    "asserts calls on a mock of express-rate-limit's Store interface (tokenlease counts in its own stores); behaviour.test.ts checks the behaviour",
  );
  notApplicable(
    'should not decrement hits when requests fail and `skipSuccessfulRequests` is set to true (legacy store)',
    "express-rate-limit's legacy/compat Store interfaces do not exist in tokenlease",
  );
  notApplicable(
    'should not decrement hits when requests fail and `skipSuccessfulRequests` is set to true (compat store)',
    "express-rate-limit's legacy/compat Store interfaces do not exist in tokenlease",
  );

  notApplicable(
    'should decrement hits when requests succeed, `skipSuccessfulRequests` is set to true and a custom `requestWasSuccessful` method used (modern store)',
    "asserts calls on a mock of express-rate-limit's Store interface (tokenlease counts in its own stores); behaviour.test.ts checks the behaviour",
  );
  notApplicable(
    'should decrement hits when requests succeed, `skipSuccessfulRequests` is set to true and a custom `requestWasSuccessful` method used (legacy store)',
    "express-rate-limit's legacy/compat Store interfaces do not exist in tokenlease",
  );
  notApplicable(
    'should decrement hits when requests succeed, `skipSuccessfulRequests` is set to true and a custom `requestWasSuccessful` method used (compat store)',
    "express-rate-limit's legacy/compat Store interfaces do not exist in tokenlease",
  );

  notApplicable(
    'should not decrement hits when requests fail, `skipSuccessfulRequests` is set to true and a custom `requestWasSuccessful` method used (modern store)',
    "asserts calls on a mock of express-rate-limit's Store interface (tokenlease counts in its own stores); behaviour.test.ts checks the behaviour",
  );
  notApplicable(
    'should not decrement hits when requests fail, `skipSuccessfulRequests` is set to true and a custom `requestWasSuccessful` method used (legacy store)',
    "express-rate-limit's legacy/compat Store interfaces do not exist in tokenlease",
  );
  notApplicable(
    'should not decrement hits when requests fail, `skipSuccessfulRequests` is set to true and a custom `requestWasSuccessful` method used (compat store)',
    "express-rate-limit's legacy/compat Store interfaces do not exist in tokenlease",
  );

  notApplicable(
    'should decrement hits when requests succeed, `skipSuccessfulRequests` is set to true and a custom `requestWasSuccessful` method used (modern store)',
    "asserts calls on a mock of express-rate-limit's Store interface (tokenlease counts in its own stores); behaviour.test.ts checks the behaviour",
  );
  notApplicable(
    'should decrement hits when requests succeed, `skipSuccessfulRequests` is set to true and a custom `requestWasSuccessful` method used (legacy store)',
    "express-rate-limit's legacy/compat Store interfaces do not exist in tokenlease",
  );
  notApplicable(
    'should decrement hits when requests succeed, `skipSuccessfulRequests` is set to true and a custom `requestWasSuccessful` method used (compat store)',
    "express-rate-limit's legacy/compat Store interfaces do not exist in tokenlease",
  );

  notApplicable(
    'should not decrement hits when requests fail, `skipSuccessfulRequests` is set to true and a custom `requestWasSuccessful` method used (modern store)',
    "asserts calls on a mock of express-rate-limit's Store interface (tokenlease counts in its own stores); behaviour.test.ts checks the behaviour",
  );
  notApplicable(
    'should not decrement hits when requests fail, `skipSuccessfulRequests` is set to true and a custom `requestWasSuccessful` method used (legacy store)',
    "express-rate-limit's legacy/compat Store interfaces do not exist in tokenlease",
  );
  notApplicable(
    'should not decrement hits when requests fail, `skipSuccessfulRequests` is set to true and a custom `requestWasSuccessful` method used (compat store)',
    "express-rate-limit's legacy/compat Store interfaces do not exist in tokenlease",
  );

  notApplicable(
    'should decrement hits when requests fail and `skipFailedRequests` is set to true (modern store)',
    "asserts calls on a mock of express-rate-limit's Store interface (tokenlease counts in its own stores); behaviour.test.ts checks the behaviour",
  );
  notApplicable(
    'should decrement hits when requests fail and `skipFailedRequests` is set to true (legacy store)',
    "express-rate-limit's legacy/compat Store interfaces do not exist in tokenlease",
  );
  notApplicable(
    'should decrement hits when requests fail and `skipFailedRequests` is set to true (compat store)',
    "express-rate-limit's legacy/compat Store interfaces do not exist in tokenlease",
  );

  notApplicable(
    'should not decrement hits when requests succeed and `skipFailedRequests` is set to true (modern store)',
    "asserts calls on a mock of express-rate-limit's Store interface (tokenlease counts in its own stores); behaviour.test.ts checks the behaviour",
  );
  notApplicable(
    'should not decrement hits when requests succeed and `skipFailedRequests` is set to true (legacy store)',
    "express-rate-limit's legacy/compat Store interfaces do not exist in tokenlease",
  );
  notApplicable(
    'should not decrement hits when requests succeed and `skipFailedRequests` is set to true (compat store)',
    "express-rate-limit's legacy/compat Store interfaces do not exist in tokenlease",
  );

  notApplicable(
    'should decrement hits when requests fail, `skipFailedRequests` is set to true and a custom `requestWasSuccessful` method used that returns a promise (modern store)',
    "asserts calls on a mock of express-rate-limit's Store interface (tokenlease counts in its own stores); behaviour.test.ts checks the behaviour",
  );
  notApplicable(
    'should decrement hits when requests fail, `skipFailedRequests` is set to true and a custom `requestWasSuccessful` method used that returns a promise (legacy store)',
    "express-rate-limit's legacy/compat Store interfaces do not exist in tokenlease",
  );
  notApplicable(
    'should decrement hits when requests fail, `skipFailedRequests` is set to true and a custom `requestWasSuccessful` method used that returns a promise (compat store)',
    "express-rate-limit's legacy/compat Store interfaces do not exist in tokenlease",
  );

  notApplicable(
    'should decrement hits when response closes and `skipFailedRequests` is set to true (modern store) (server)',
    "asserts calls on a mock of express-rate-limit's Store interface (tokenlease counts in its own stores); behaviour.test.ts checks the behaviour",
  );
  notApplicable(
    'should decrement hits when response closes and `skipFailedRequests` is set to true (legacy store) (server)',
    "express-rate-limit's legacy/compat Store interfaces do not exist in tokenlease",
  );
  notApplicable(
    'should decrement hits when response closes and `skipFailedRequests` is set to true (compat store) (server)',
    "express-rate-limit's legacy/compat Store interfaces do not exist in tokenlease",
  );

  notApplicable(
    'should decrement hits when response closes and `skipFailedRequests` is set to true (modern store)',
    "asserts calls on a mock of express-rate-limit's Store interface (tokenlease counts in its own stores); behaviour.test.ts checks the behaviour",
  );
  notApplicable(
    'should decrement hits when response closes and `skipFailedRequests` is set to true (legacy store)',
    "express-rate-limit's legacy/compat Store interfaces do not exist in tokenlease",
  );
  notApplicable(
    'should decrement hits when response closes and `skipFailedRequests` is set to true (compat store)',
    "express-rate-limit's legacy/compat Store interfaces do not exist in tokenlease",
  );

  notApplicable(
    'should decrement hits when response emits an error and `skipFailedRequests` is set to true (modern store)',
    "asserts calls on a mock of express-rate-limit's Store interface (tokenlease counts in its own stores); behaviour.test.ts checks the behaviour",
  );
  notApplicable(
    'should decrement hits when response emits an error and `skipFailedRequests` is set to true (legacy store)',
    "express-rate-limit's legacy/compat Store interfaces do not exist in tokenlease",
  );
  notApplicable(
    'should decrement hits when response emits an error and `skipFailedRequests` is set to true (compat store)',
    "express-rate-limit's legacy/compat Store interfaces do not exist in tokenlease",
  );

  notApplicable(
    'should decrement hits when rate limit is reached and `skipFailedRequests` is set to true (modern store)',
    "asserts calls on a mock of express-rate-limit's Store interface (tokenlease counts in its own stores); behaviour.test.ts checks the behaviour",
  );
  notApplicable(
    'should decrement hits when rate limit is reached and `skipFailedRequests` is set to true (legacy store)',
    "express-rate-limit's legacy/compat Store interfaces do not exist in tokenlease",
  );
  notApplicable(
    'should decrement hits when rate limit is reached and `skipFailedRequests` is set to true (compat store)',
    "express-rate-limit's legacy/compat Store interfaces do not exist in tokenlease",
  );

  it('should forward errors in the handler using `next()` (modern store)', async () => {
    let errorCaught = false;

    const app = createServer(
      rateLimit({
        limit: 1,
        handler() {
          const exception = new Error('420: Enhance your calm');
          throw exception;
        },
      }),
    );

    app.use((error: Error, _request: Request, response: Response, _next: NextFunction) => {
      errorCaught = true;
      response.status(500).send(error.message);
    });

    await request(app).get('/').expect(200);
    await request(app).get('/').expect(500);

    expect(errorCaught).toEqual(true);
  });
  notApplicable(
    'should forward errors in the handler using `next()` (legacy store)',
    "express-rate-limit's legacy/compat Store interfaces do not exist in tokenlease",
  );
  notApplicable(
    'should forward errors in the handler using `next()` (compat store)',
    "express-rate-limit's legacy/compat Store interfaces do not exist in tokenlease",
  );

  it('should forward errors in `skip()` using `next()` (modern store)', async () => {
    let errorCaught = false;

    const app = createServer(
      rateLimit({
        limit: 1,
        skip() {
          const exception = new Error('420: Enhance your calm');
          throw exception;
        },
      }),
    );

    app.use((error: Error, _request: Request, response: Response, _next: NextFunction) => {
      errorCaught = true;
      response.status(500).send(error.message);
    });

    await request(app).get('/').expect(500);

    expect(errorCaught).toEqual(true);
  });
  notApplicable(
    'should forward errors in `skip()` using `next()` (legacy store)',
    "express-rate-limit's legacy/compat Store interfaces do not exist in tokenlease",
  );
  notApplicable(
    'should forward errors in `skip()` using `next()` (compat store)',
    "express-rate-limit's legacy/compat Store interfaces do not exist in tokenlease",
  );

  it('should pass the number of hits and the limit to the next request handler in the `request.rateLimit` property', async () => {
    let savedRequestObject: any;
    const saveRequestObject = (request: Request, _response: Response, next: NextFunction) => {
      savedRequestObject = request;

      next();
    };

    const app = createServer([
      saveRequestObject,
      rateLimit({
        legacyHeaders: false,
        limit: 6,
      }),
    ]);

    await request(app).get('/').expect(200);
    expect(savedRequestObject?.rateLimit).toMatchObject({
      limit: 6,
      used: 1,
      remaining: 5,
      resetTime: expect.any(Date),
    });

    // Make sure the hidden property is also set.
    expect(savedRequestObject?.rateLimit.current).toBe(1);

    savedRequestObject = undefined;
    await request(app).get('/').expect(200);
    expect(savedRequestObject?.rateLimit).toMatchObject({
      limit: 6,
      used: 2,
      remaining: 4,
      resetTime: expect.any(Date),
    });
    expect(savedRequestObject?.rateLimit.current).toBe(2);
  });

  it('should pass the number of hits and the limit to the next request handler with a custom property', async () => {
    let savedRequestObject: any;
    const saveRequestObject = (request: Request, _response: Response, next: NextFunction) => {
      savedRequestObject = request;

      next();
    };

    const app = createServer([
      saveRequestObject,
      rateLimit({
        legacyHeaders: false,
        requestPropertyName: 'rateLimitInfo',
      }),
    ]);

    await request(app).get('/').expect(200);
    expect(savedRequestObject?.rateLimitInfo).toMatchObject({
      limit: 5,
      used: 1,
      remaining: 4,
      resetTime: expect.any(Date),
    });
    expect(savedRequestObject?.rateLimitInfo.current).toBe(1);

    savedRequestObject = undefined;
    await request(app).get('/').expect(200);
    expect(savedRequestObject?.rateLimitInfo).toMatchObject({
      limit: 5,
      used: 2,
      remaining: 3,
      resetTime: expect.any(Date),
    });
    expect(savedRequestObject?.rateLimitInfo.current).toBe(2);
  });

  it('should handle two rate-limiters with different `requestPropertyNames` operating independently', async () => {
    const keyLimiter = rateLimit({
      limit: 2,
      requestPropertyName: 'rateLimitKey',
      keyGenerator: (request) => request.query.key as string,
      handler(_request, response) {
        response.status(420).end('Enhance your calm');
      },
    });
    const globalLimiter = rateLimit({
      limit: 5,
      requestPropertyName: 'rateLimitGlobal',
      keyGenerator: () => 'global',
      handler(_request, response) {
        response.status(429).end('Too many requests');
      },
    });

    let savedRequestObject: any;
    const saveRequestObject = (request: Request, _response: Response, next: NextFunction) => {
      savedRequestObject = request;
      next();
    };

    const app = createServer([saveRequestObject, keyLimiter, globalLimiter]);

    await request(app).get('/').query({ key: 1 }).expect(200);
    expect(savedRequestObject).toBeTruthy();
    expect(savedRequestObject.rateLimit).toBeUndefined();

    expect(savedRequestObject.rateLimitKey).toBeTruthy();
    expect(savedRequestObject.rateLimitKey.limit).toEqual(2);
    expect(savedRequestObject.rateLimitKey.remaining).toEqual(1);

    expect(savedRequestObject.rateLimitGlobal).toBeTruthy();
    expect(savedRequestObject.rateLimitGlobal.limit).toEqual(5);
    expect(savedRequestObject.rateLimitGlobal.remaining).toEqual(4);

    savedRequestObject = undefined;
    await request(app).get('/').query({ key: 2 }).expect(200);
    expect(savedRequestObject.rateLimitKey.remaining).toEqual(1);
    expect(savedRequestObject.rateLimitGlobal.remaining).toEqual(3);

    savedRequestObject = undefined;
    await request(app).get('/').query({ key: 1 }).expect(200);
    expect(savedRequestObject.rateLimitKey.remaining).toEqual(0);
    expect(savedRequestObject.rateLimitGlobal.remaining).toEqual(2);

    savedRequestObject = undefined;
    await request(app).get('/').query({ key: 2 }).expect(200);
    expect(savedRequestObject.rateLimitKey.remaining).toEqual(0);
    expect(savedRequestObject.rateLimitGlobal.remaining).toEqual(1);

    savedRequestObject = undefined;
    await request(app).get('/').query({ key: 1 }).expect(420, 'Enhance your calm');
    expect(savedRequestObject.rateLimitKey.remaining).toEqual(0);

    savedRequestObject = undefined;
    await request(app).get('/').query({ key: 3 }).expect(200);
    await request(app).get('/').query({ key: 3 }).expect(429, 'Too many requests');
    expect(savedRequestObject.rateLimitKey.remaining).toEqual(0);
    expect(savedRequestObject.rateLimitGlobal.remaining).toEqual(0);
  });

  notApplicable(
    'should not pass if the store throws an error by default',
    "a mock of express-rate-limit's Store interface that throws; a store failure is decided by the policy's fail mode (default 'local': this instance's share of the limit), never a 500, and is reported to onError",
  );

  notApplicable(
    'should pass if the store throws an error and passOnStoreError is true',
    "a mock of express-rate-limit's Store interface that throws; a store failure is decided by the policy's fail mode (default 'local': this instance's share of the limit), never a 500, and is reported to onError",
  );

  notApplicable(
    'should only call next once when passOnStoreError causes it to skip limiting',
    "a mock of express-rate-limit's Store interface that throws; a store failure is decided by the policy's fail mode (default 'local': this instance's share of the limit), never a 500, and is reported to onError",
  );

  describe('with the logger set', () => {
    deliberatelyDifferent(
      'should use the logger instead of the console on validation errors',
      'a bad ipv6Subnet (48.5) throws a ConfigError naming it at construction',
      async () => {
        const logger = { error: vi.fn(), warn: vi.fn() };
        const consoleError = vi.spyOn(console, 'error').mockImplementation(() => {});
        try {
          rateLimit({
            logger,
            ipv6Subnet: 48.5,
          });

          expect(console.error).not.toHaveBeenCalled();
          expect(logger.error).toHaveBeenCalledWith(expect.objectContaining({ code: 'ERR_ERL_IPV6_SUBNET' }));
        } finally {
          consoleError.mockRestore();
        }
      },
    );
    notApplicable(
      'should use the logger instead of the console when the store throws an error and passOnStoreError is true',
      "a mock of express-rate-limit's Store interface that throws; a store failure is decided by the policy's fail mode (default 'local': this instance's share of the limit), never a 500, and is reported to onError",
    );
  });
});

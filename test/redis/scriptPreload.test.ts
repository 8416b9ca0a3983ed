import { describe, expect, it } from 'vitest';
import { RedisStore } from '../../src/index.js';
import { luaScript } from '../../src/scripts.js';
import { eventually } from '../support/eventually.js';
import { privateRedis } from '../support/privateRedis.js';

// Its own server: SCRIPT FLUSH and a restart would hit every file running beside it.
const { server, client } = privateRedis();

describe('the batch script is loaded before the first call needs it', () => {
  it('by ready(), and again after Redis restarts, so no first call pays NOSCRIPT and an EVAL of the whole script', async () => {
    const admin = client();
    await admin.script('FLUSH');
    const { sha } = luaScript('batch');
    const store = new RedisStore({ client: client(), prefix: 'preload:' });
    await store.ready();
    expect(await admin.script('EXISTS', sha), 'loaded by ready()').toEqual([1]);
    await server().restart();
    // The restarted server has no scripts: the store loads it again when it reconnects.
    await eventually(async () => expect(await admin.script('EXISTS', sha)).toEqual([1]), 50);
    await store.close();
  });
});

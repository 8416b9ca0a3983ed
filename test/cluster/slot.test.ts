import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { keySlot } from '../../src/stores/slot.js';
import { closeAllClients, clusterClient } from '../support/clients.js';

afterAll(closeAllClients);

describe('keySlot', () => {
  it('agrees with CLUSTER KEYSLOT', async () => {
    const redis = clusterClient();
    const keys = fc.sample(
      fc.oneof(
        fc.string(),
        fc.string({ unit: 'grapheme' }),
        fc.constantFrom('{', '}', '{}', '{}a', 'a{b}c', '{{a}}'),
      ),
      { numRuns: 300, seed: 7 },
    );
    for (const key of ['', 'tl:{k:client-42}:token-bucket:p', ...keys]) {
      expect(keySlot(key), JSON.stringify(key)).toBe(Number(await redis.cluster('KEYSLOT', key)));
    }
  });
});

import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

describe('the built package', () => {
  it("imports { Limiter, MemoryStore, RedisStore } from 'tokenlease' in plain Node ESM", () => {
    // Resolves through package.json "exports" (self-reference), i.e. what a user's import sees.
    const script = `
      import { Limiter, MemoryStore, RedisStore } from 'tokenlease';
      const l = new Limiter({ store: new MemoryStore(), policies: { p: { algorithm: 'token-bucket', rate: 5 } } });
      const ds = [];
      for (let i = 0; i < 6; i++) ds.push((await l.consume('p', 'k')).allowed);
      await l.close();
      console.log(JSON.stringify({ ds, redis: typeof RedisStore }));
    `;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
    expect(JSON.parse(out)).toEqual({ ds: [true, true, true, true, true, false], redis: 'function' });
  });
});

import { afterEach } from 'vitest';
import type { Limiter } from '../../src/index.js';

/** The limiters a file's tests open (push them), each closed after its test. */
export function closedAfterEach(): Limiter[] {
  const open: Limiter[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((l) => l.close()));
  });
  return open;
}

import type { Algorithm, Rule } from '../policy.js';
import { concurrencyEngine } from './concurrency.js';
import type { Engine } from './engine.js';
import { leakyBucketEngine } from './leakyBucket.js';
import { slidingLogEngine } from './slidingLog.js';
import { tokenBucketEngine } from './tokenBucket.js';
import { windowEngine } from './window.js';

/** Each algorithm's engine: the only place the limiter learns which algorithms exist. */
export const ENGINES: { readonly [A in Algorithm]: Engine<Extract<Rule, { algorithm: A }>> } = {
  'token-bucket': tokenBucketEngine,
  'fixed-window': windowEngine,
  'sliding-window': windowEngine,
  'sliding-log': slidingLogEngine,
  'leaky-bucket': leakyBucketEngine,
  concurrency: concurrencyEngine,
};

// Ported from express-rate-limit 3828a5b61c90e3134451ab32e88e61072dbf19f5,
// test/library/options-test.ts: the original assertions, run through ./mapping.ts.
// Tests parsing/handling of options passed in by the user

import { describe, expect, it } from 'vitest';
import { deliberatelyDifferent, notApplicable } from '../notApplicable.js';
import { rateLimit } from './mapping.js';

const STORE_INIT =
  "reads the options express-rate-limit hands to its Store's init(); tokenlease stores get no options";

describe('options test', () => {
  it('should allow an empty options object', async () => {
    expect(rateLimit).not.toThrow();
  });

  notApplicable('should ignore options that are set to `undefined`', STORE_INIT);
  notApplicable('should allow the use of pre-6.x headers options', STORE_INIT);
  notApplicable('should allow the use of the `max` option', STORE_INIT);
  notApplicable('should allow the use of the `limit` option', STORE_INIT);

  it('should not allow the use of an invalid store', async () => {
    class InvalidStore {
      invalid = true;
    }

    expect(() => {
      rateLimit({
        // @ts-expect-error Check if the library can detect invalid stores without TSC's help
        store: new InvalidStore(),
      });
    }).toThrow(/store/);
  });

  it('should not call `init` if it is not a function', async () => {
    class InvalidStore {
      init = 'not-a-function';

      async increment(_key: string) {
        return { totalHits: 1, resetTime: undefined };
      }

      async decrement(_key: string): Promise<void> {}

      async resetKey(_key: string): Promise<void> {}
    }

    expect(() => {
      rateLimit({
        // @ts-expect-error Check if the library can detect invalid stores without TSC's help
        store: new InvalidStore(),
      });
    }).toThrow(/store/);
  });

  deliberatelyDifferent(
    'should not allow an invalid standardHeaders option',
    'an unknown standardHeaders value throws a ConfigError naming the option',
    async () => {
      rateLimit({
        // @ts-expect-error Check if TSC can detect an invalid value for this option. If not, it
        // will report that this is an unnecessary annotation.
        standardHeaders: 'not-a-valid-draft',
      });
    },
  );

  deliberatelyDifferent(
    'should not allow an invalid logger implemenation to be provided',
    'it throws, as a ConfigError naming `logger` (tokenlease reports bad options with one error type), not a TypeError',
    async () => {
      expect(() => {
        rateLimit({
          // @ts-expect-error Check if the library can detect invalid stores without TSC's help
          logger: { error: 'invalid logger' },
        });
      }).toThrow(TypeError);
    },
  );
});

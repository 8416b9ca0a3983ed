// Ported from express-rate-limit 3828a5b61c90e3134451ab32e88e61072dbf19f5,
// test/external/imports/{default,named}-import/*: each app imports the package the way its folder
// is named, with 'tokenlease/express' for 'express-rate-limit', and gets 200, 200, 429. The apps
// run in a child Node process that resolves the built package by its name, as a user's app does.
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { notApplicable } from '../notApplicable.js';

const importLines = {
  'default-import/js-cjs': {
    type: 'commonjs',
    lines:
      "const rateLimit = require('tokenlease/express')\nconst { MemoryStore } = require('tokenlease/express')",
  },
  'named-import/js-cjs': {
    type: 'commonjs',
    lines: "const { rateLimit, MemoryStore } = require('tokenlease/express')",
  },
  'default-import/js-esm': {
    type: 'module',
    lines: "import rateLimit, { MemoryStore } from 'tokenlease/express'",
  },
  'named-import/js-esm': {
    type: 'module',
    lines: "import { MemoryStore, rateLimit } from 'tokenlease/express'",
  },
} as const;

/** The upstream app and its server test (supertest's three requests), as one script. */
function app(type: 'commonjs' | 'module', lines: string): string {
  const express =
    type === 'module' ? "import createServer from 'express'" : "const createServer = require('express')";
  return `${express}
${lines}
const app = createServer()
app.use(rateLimit({ limit: 2, legacyHeaders: false, standardHeaders: true, store: new MemoryStore() }))
app.get('/', (request, response) => response.send('Hello!'))
const server = app.listen(0, '127.0.0.1', async () => {
  const url = 'http://127.0.0.1:' + server.address().port + '/'
  const statuses = []
  for (let i = 0; i < 3; i++) statuses.push((await fetch(url)).status)
  console.log(JSON.stringify(statuses))
  server.close()
})`;
}

describe('external imports test', () => {
  for (const [name, { type, lines }] of Object.entries(importLines)) {
    it(`${name}: rate limiting middleware`, () => {
      const out = execFileSync(process.execPath, [`--input-type=${type}`, '-e', app(type, lines)], {
        encoding: 'utf8',
      });
      expect(JSON.parse(out)).toEqual([200, 200, 429]);
    });
  }
  for (const name of [
    'default-import/ts-cjs',
    'default-import/ts-esm',
    'named-import/ts-cjs',
    'named-import/ts-esm',
  ]) {
    notApplicable(
      `${name}: rate limiting middleware`,
      "its app implements express-rate-limit's Store interface (TestStore); tokenlease takes its own stores",
    );
  }
});

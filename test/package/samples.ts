import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface Sample {
  /** The document it came from, relative to the repository root. */
  readonly doc: string;
  /** The file it is written to for tsc: `<doc>-sample<N>.ts`, so an error names where to look. */
  readonly file: string;
  readonly code: string;
}

/** Every ```ts block of README.md and docs/*.md, in document order, each as its own module. */
export function extractSamples(root: string): Sample[] {
  const docs = [
    'README.md',
    ...readdirSync(join(root, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .sort()
      .map((f) => `docs/${f}`),
  ];
  return docs.flatMap((doc) =>
    [...readFileSync(join(root, doc), 'utf8').matchAll(/^```ts\n([\s\S]*?)^```/gm)].map((m, i) => ({
      doc,
      file: `${doc.replace(/\//g, '-').replace(/\.md$/, '')}-sample${i + 1}.ts`,
      // `export {}` makes a sample without imports a module too, so its names stay its own.
      code: `${m[1]}\nexport {};\n`,
    })),
  );
}

/**
 * What a sample may use without defining it: the objects the surrounding text has already set up
 * (a limiter, a store, a Redis client, an app) and the application's own functions. A sample that
 * defines one of these names itself shadows the declaration here.
 */
export const SAMPLE_CONTEXT = `
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Redis } from 'ioredis';
import type { Limiter, PolicyConfig, RedisStore } from 'tokenlease';

declare global {
  const limiter: Limiter;
  const store: RedisStore;
  const redis: Redis;
  const policies: Record<string, PolicyConfig>;
  const server: Server;
  const req: IncomingMessage;
  const res: ServerResponse;
  const key: string;
  const apiKey: string;
  const signal: AbortSignal;
  function runExport(): Promise<void>;
  function generateReport(): Promise<unknown>;
  function log(message: unknown): void;
  function alert(message: string): void;
  function audit(policy: string, key: string, route: string | undefined): void;
  const webhooks: { enqueue(event: unknown): void };
  const logger: { warn(record: unknown, message: string): void };
}
`;

/**
 * The HTTP bench's server, one process per contestant: `tsx bench/http-server.ts <contestant>
 * <redisUrl> <prefix> <zipfKeys>`. Each request is decided for the next key of a Zipf stream (as
 * if many API keys were calling) and answered 200, or 429 when refused. Talks to its parent over IPC:
 * sends `{ port }` once listening; answers 'stats' and 'stop' with its counters, 'cpu' with its CPU time.
 */
import { createServer, type ServerResponse } from 'node:http';
import { contestant } from './contestants.js';
import { serveOverIpc } from './server-ipc.js';
import { STREAM_LENGTH, zipfKeys } from './zipf.js';

const [id = '', redisUrl = '', prefix = '', keys = '10000'] = process.argv.slice(2);
const decider = await contestant(id).create('hit', { redisUrl, prefix });
const stream = zipfKeys(Number(keys));
const mask = STREAM_LENGTH - 1;
let next = 0;
let refused = 0;
let errors = 0;

function answer(res: ServerResponse, allowed: boolean): void {
  if (allowed) {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end('ok');
  } else {
    refused++;
    res.writeHead(429, { 'content-type': 'text/plain' });
    res.end('too many requests');
  }
}

const server = createServer((_req, res) => {
  const decision = decider.decide(stream[next++ & mask] as string);
  // The baseline and the Map bucket answer synchronously: not even an await.
  if (!(decision instanceof Promise)) answer(res, decision.allowed);
  else
    decision.then(
      (verdict) => answer(res, verdict.allowed),
      () => {
        errors++;
        res.writeHead(503);
        res.end();
      },
    );
});

const stats = () => ({ refused, errors, counters: decider.counters?.() });

serveOverIpc(server, stats, () => decider.close());

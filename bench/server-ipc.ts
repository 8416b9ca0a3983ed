import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * The bench servers' side of their IPC with bench/http.ts: listens on a free local port and sends
 * `{ port }`; answers 'stats' with `stats()`, 'cpu' with the process's CPU time in µs, and 'stop'
 * by closing the server, then `close()`, then a last `stats()`.
 */
export function serveOverIpc(server: Server, stats: () => unknown, close: () => Promise<void>): void {
  process.on('message', async (message) => {
    if (message === 'stats') process.send?.({ stats: stats() });
    if (message === 'cpu') {
      const used = process.cpuUsage();
      process.send?.({ cpuUs: used.user + used.system });
    }
    if (message === 'stop') {
      server.closeAllConnections();
      server.close();
      await close();
      process.send?.({ stats: stats() });
      process.disconnect();
    }
  });
  server.listen(0, '127.0.0.1', () => {
    process.send?.({ port: (server.address() as AddressInfo).port });
  });
}

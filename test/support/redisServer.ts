import { type ChildProcess, execFile, spawn, spawnSync } from 'node:child_process';
import { closeSync, openSync, rmSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';

const HOST = '127.0.0.1';
const START_TIMEOUT_MS = 10_000;
const STOP_GRACE_MS = 5_000;
const CLUSTER_READY_TIMEOUT_MS = 30_000;
const INSTALL_HINT =
  'Install it with `apt-get install -y redis-server` (as root, after `apt-get update`), ' +
  'or put a redis-server 7.x binary (and redis-cli) on PATH.';

export interface RedisProcess {
  readonly host: string;
  readonly port: number;
  /** PID of the current incarnation; changes after restart(). */
  readonly pid: number;
  readonly url: string;
  /** Graceful SIGTERM (SIGKILL after 5s), then deletes the data dir. Idempotent. */
  stop(): Promise<void>;
  /** SIGKILL to simulate a crash; the data dir is kept so restart() can reuse it. */
  kill(): Promise<void>;
  /** Starts a new process on the same port and data dir (stopping the current one first if alive). */
  restart(): Promise<void>;
}

export interface StartRedisOptions {
  extraArgs?: string[];
}

export interface StartClusterOptions {
  masters?: number;
  replicasPerMaster?: number;
}

export interface RedisClusterProcess {
  readonly nodes: RedisProcess[];
  readonly startupNodes: { host: string; port: number }[];
  stop(): Promise<void>;
}

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

// Children are unref'd so a test that forgets stop() cannot keep a worker alive; this hook then
// makes sure the forgotten server dies with the process instead of being orphaned.
const liveChildren = new Set<ChildProcess>();
const ownedDirs = new Set<string>();
let exitHookInstalled = false;
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const c of liveChildren) c.kill('SIGKILL');
    for (const dir of ownedDirs) rmSync(dir, { recursive: true, force: true });
  });
}
function trackChild(child: ChildProcess): void {
  installExitHook();
  liveChildren.add(child);
  child.once('exit', () => liveChildren.delete(child));
}

const isAlive = (child: ChildProcess) => child.exitCode === null && child.signalCode === null;

function waitExit(child: ChildProcess): Promise<void> {
  if (!isAlive(child)) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

/** A port that was free a moment ago; callers must tolerate losing the race for it. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, HOST, resolve);
  });
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Runs fn on a short-lived connection that fails fast instead of queueing/reconnecting. */
async function withConnection<T>(port: number, fn: (c: Redis) => Promise<T>): Promise<T> {
  const c = new Redis({
    host: HOST,
    port,
    lazyConnect: true,
    connectTimeout: 1_000,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    // ioredis arms a ref'd timer of this length on disconnect() that never clears for a socket
    // that failed to connect; the 2s default would delay process exit.
    disconnectTimeout: 50,
  });
  c.on('error', () => {});
  try {
    await c.connect();
    return await fn(c);
  } finally {
    c.disconnect();
  }
}

class AddrInUseError extends Error {}

interface NodeSpec {
  port: number;
  dir: string;
  args: string[];
}

function serverArgs(port: number, dir: string, extraArgs: string[], clusterBusPort?: number): string[] {
  const args = [
    '--port',
    String(port),
    '--bind',
    HOST,
    '--save',
    '',
    '--appendonly',
    'no',
    '--daemonize',
    'no',
    '--dir',
    dir,
  ];
  if (clusterBusPort !== undefined) {
    // An explicit bus port, because the default (port + 10000) is often unusable or taken for
    // ephemeral ports.
    args.push(
      '--cluster-enabled',
      'yes',
      '--cluster-port',
      String(clusterBusPort),
      '--cluster-config-file',
      join(dir, `nodes-${port}.conf`),
      '--cluster-node-timeout',
      '2000',
      // Replicas sync at once instead of after the default 5 s wait for more replicas; a replica
      // that never synced cannot be promoted, so failover tests would silently wait forever.
      '--repl-diskless-sync-delay',
      '0',
    );
  }
  return [...args, ...extraArgs];
}

async function launch(spec: NodeSpec): Promise<ChildProcess> {
  await mkdir(spec.dir, { recursive: true });
  const logPath = join(spec.dir, 'redis.log');
  // Log to a file rather than a pipe: nothing has to drain it, and it survives for post-mortems.
  const logFd = openSync(logPath, 'a');
  let child: ChildProcess;
  try {
    child = spawn('redis-server', spec.args, { stdio: ['ignore', logFd, logFd] });
  } finally {
    closeSync(logFd);
  }
  let spawnError: Error | undefined;
  child.once('error', (err) => {
    spawnError = err;
  });
  child.unref();
  trackChild(child);

  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    if (spawnError) throw new Error(`cannot spawn redis-server: ${spawnError.message}. ${INSTALL_HINT}`);
    if (!isAlive(child)) {
      const log = (await readFile(logPath, 'utf8').catch(() => '')).slice(-4_000);
      const msg = `redis-server on port ${spec.port} exited during startup:\n${log}`;
      throw /address already in use/i.test(log) ? new AddrInUseError(msg) : new Error(msg);
    }
    // Checking process_id guards against a foreign server that won the race for our port.
    const pid = await withConnection(spec.port, async (c) => {
      const info = await c.info('server');
      return Number(/process_id:(\d+)/.exec(info)?.[1]);
    }).catch(() => undefined);
    if (pid === child.pid) return child;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      await waitExit(child);
      throw new Error(`redis-server on port ${spec.port} did not answer within ${START_TIMEOUT_MS}ms`);
    }
    await delay(50);
  }
}

class ManagedRedis implements RedisProcess {
  readonly host = HOST;
  private stopped = false;

  constructor(
    private readonly spec: NodeSpec,
    private child: ChildProcess,
  ) {}

  get port(): number {
    return this.spec.port;
  }
  get pid(): number {
    return this.child.pid ?? -1;
  }
  get url(): string {
    return `redis://${HOST}:${this.spec.port}`;
  }

  private async terminate(): Promise<void> {
    const child = this.child;
    if (!isAlive(child)) return;
    child.kill('SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    const exited = await Promise.race([
      waitExit(child).then(() => true),
      new Promise<false>((resolve) => {
        timer = setTimeout(() => resolve(false), STOP_GRACE_MS);
      }),
    ]);
    // A dangling 5s timer would keep the process (e.g. vitest's main process) alive after teardown.
    clearTimeout(timer);
    if (!exited) {
      child.kill('SIGKILL');
      await waitExit(child);
    }
  }

  async stop(): Promise<void> {
    await this.terminate();
    if (!this.stopped) {
      this.stopped = true;
      await rm(this.spec.dir, { recursive: true, force: true });
      ownedDirs.delete(this.spec.dir);
    }
  }

  async kill(): Promise<void> {
    if (isAlive(this.child)) this.child.kill('SIGKILL');
    await waitExit(this.child);
  }

  async restart(): Promise<void> {
    await this.terminate();
    this.stopped = false;
    ownedDirs.add(this.spec.dir);
    // The port is usually rebindable at once (redis uses SO_REUSEADDR), but an unrelated socket may
    // briefly hold it; a few retries make crash/restart tests robust against that.
    for (let attempt = 1; ; attempt++) {
      try {
        this.child = await launch(this.spec);
        return;
      } catch (err) {
        if (!(err instanceof AddrInUseError) || attempt >= 5) throw err;
        await delay(200);
      }
    }
  }
}

async function startNode(extraArgs: string[], cluster: boolean): Promise<RedisProcess> {
  const dir = await mkdtemp(join(tmpdir(), 'tokenlease-redis-'));
  installExitHook();
  ownedDirs.add(dir);
  // freePort() is inherently racy (the port is released before redis binds it), so retry on conflicts.
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const busPort = cluster ? await freePort() : undefined;
    const spec = { port, dir, args: serverArgs(port, dir, extraArgs, busPort) };
    try {
      return new ManagedRedis(spec, await launch(spec));
    } catch (err) {
      if (!(err instanceof AddrInUseError) || attempt >= 5) {
        await rm(dir, { recursive: true, force: true });
        ownedDirs.delete(dir);
        throw err;
      }
    }
  }
}

export function startRedis(opts: StartRedisOptions = {}): Promise<RedisProcess> {
  return startNode(opts.extraArgs ?? [], false);
}

async function clusterReady(ports: number[]): Promise<boolean> {
  const infos = await Promise.all(
    ports.map((port) =>
      withConnection(port, async (c) => `${await c.cluster('INFO')}${await c.info('replication')}`).catch(
        () => '',
      ),
    ),
  );
  return infos.every(
    (info) =>
      info.includes('cluster_state:ok') &&
      info.includes('cluster_slots_assigned:16384') &&
      // Every node must know every other one, or clients may get inconsistent slot maps.
      info.includes(`cluster_known_nodes:${ports.length}\r`) &&
      // A replica is only a failover candidate once it has synced with its master.
      (info.includes('role:master') || info.includes('master_link_status:up')),
  );
}

export async function startCluster(opts: StartClusterOptions = {}): Promise<RedisClusterProcess> {
  const masters = opts.masters ?? 3;
  const replicas = opts.replicasPerMaster ?? 0;
  if (masters < 3) throw new Error('redis-cli --cluster create needs at least 3 masters');
  const settled = await Promise.allSettled(
    Array.from({ length: masters * (1 + replicas) }, () => startNode([], true)),
  );
  const nodes = settled.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const stop = async () => {
    await Promise.all(nodes.map((n) => n.stop()));
  };
  try {
    const failed = settled.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
    const args = ['--cluster', 'create', ...nodes.map((n) => `${n.host}:${n.port}`)];
    args.push('--cluster-replicas', String(replicas), '--cluster-yes');
    await promisify(execFile)('redis-cli', args, { timeout: 60_000 }).catch((err: { stdout?: string }) => {
      // redis-cli reports --cluster problems on stdout, which execFile's error message omits.
      throw new Error(`redis-cli ${args.join(' ')} failed:\n${err.stdout ?? ''}\n${String(err)}`);
    });
    const ports = nodes.map((n) => n.port);
    const deadline = Date.now() + CLUSTER_READY_TIMEOUT_MS;
    while (!(await clusterReady(ports))) {
      if (Date.now() > deadline) throw new Error(`cluster on ports ${ports.join(',')} did not become ready`);
      await delay(100);
    }
  } catch (err) {
    await stop();
    throw err;
  }
  return { nodes, startupNodes: nodes.map((n) => ({ host: n.host, port: n.port })), stop };
}

function redisMajorVersion(bin: string): number | undefined {
  const r = spawnSync(bin, ['--version'], { encoding: 'utf8' });
  if (r.error || r.status !== 0) return undefined;
  const m = /(?:v=|redis-cli )(\d+)\./.exec(r.stdout);
  return m ? Number(m[1]) : undefined;
}

/** Makes sure redis-server and redis-cli (>= 7) are runnable, installing them via apt when root. */
export function ensureRedisInstalled(): void {
  const missing = ['redis-server', 'redis-cli'].some((bin) => redisMajorVersion(bin) === undefined);
  if (missing && process.getuid?.() === 0) {
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    for (const args of [['update'], ['install', '-y', 'redis-server']]) {
      const r = spawnSync('apt-get', args, { stdio: 'inherit', env });
      if (r.error || r.status !== 0) throw new Error(`\`apt-get ${args.join(' ')}\` failed. ${INSTALL_HINT}`);
    }
  }
  for (const bin of ['redis-server', 'redis-cli']) {
    const major = redisMajorVersion(bin);
    if (major === undefined) throw new Error(`${bin} was not found on PATH. ${INSTALL_HINT}`);
    // Redis 7 is required for --cluster-port and the command set used by the library.
    if (major < 7) throw new Error(`${bin} ${major}.x is too old; version 7 is required. ${INSTALL_HINT}`);
  }
}

import { type Cluster, Redis } from 'ioredis';
import { Limiter, RedisStore } from '../../src/index.js';
import { trackClient } from './clients.js';
import { LedgerStore } from './ledgerStore.js';

/** One limiter instance whose every store call is written down, with the admissions it made. */
export interface Member {
  readonly client: Redis | Cluster;
  readonly store: RedisStore;
  readonly ledger: LedgerStore;
  readonly limiter: Limiter;
  /** Allowed decisions per target (`targetId`), counted one by one. */
  readonly admitted: Map<string, number>;
  /** Decisions per `source`. */
  readonly sources: Map<string, number>;
}

type LimiterOptions = ConstructorParameters<typeof Limiter>[0];

export interface MemberOptions {
  /** The server to connect to, or a client to run on (a Cluster's, whose settings the store fixes). */
  readonly url: string | Cluster;
  readonly policies: LimiterOptions['policies'];
  readonly prefix: string;
  readonly timeoutMs: number;
  /** One clock for the limiter and the store (a virtual one); by default each keeps its own. */
  readonly now?: () => number;
  readonly sweepIntervalMs?: number;
}

/**
 * A limiter on its own connection, made with the settings the store needs (so the store runs on
 * it as it is, and a test can cut it to simulate a crash).
 */
export async function ledgerMember(options: MemberOptions): Promise<Member> {
  const { url, policies, prefix, timeoutMs, now, sweepIntervalMs } = options;
  const client =
    typeof url === 'string'
      ? trackClient(new Redis(url, { enableOfflineQueue: false, autoResendUnfulfilledCommands: false }))
      : url;
  client.on('error', () => {});
  const store = new RedisStore({ client, prefix, timeoutMs, now });
  await store.ready();
  const ledger = new LedgerStore(store);
  const limiter = new Limiter({ store: ledger, policies, now, sweepIntervalMs });
  return { client, store, ledger, limiter, admitted: new Map(), sources: new Map() };
}

/** A client key of a policy. */
export interface Target {
  readonly policy: string;
  readonly key: string;
}

const targetId = (t: Target) => `${t.policy}/${t.key}`;

/** Longest a decision may take before the test calls it hung (far above any store timeout used). */
const HUNG_MS = 5000;

/** One request, counted; an error or a hang is recorded in `problems`, never thrown. */
export async function consumeCounted(m: Member, target: Target, problems: string[]): Promise<void> {
  const { policy, key } = target;
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<'hung'>((resolve) => {
    timer = setTimeout(() => resolve('hung'), HUNG_MS);
  });
  try {
    const d = await Promise.race([m.limiter.consume(policy, key), hung]);
    if (d === 'hung') {
      problems.push(`a decision on ${key} did not settle within ${HUNG_MS} ms`);
      return;
    }
    if (d.allowed) m.admitted.set(targetId(target), (m.admitted.get(targetId(target)) ?? 0) + 1);
    const source = d.source ?? 'none';
    m.sources.set(source, (m.sources.get(source) ?? 0) + 1);
  } catch (err) {
    problems.push(String(err));
  } finally {
    clearTimeout(timer);
  }
}

export const admittedOf = (members: readonly Member[], target: Target): number =>
  members.reduce((sum, m) => sum + (m.admitted.get(targetId(target)) ?? 0), 0);

/**
 * Every member makes `requests(target)` requests for each target, all at once: enough to spend an
 * allowance past the point where it reports (a quarter left), or one for a key never seen before,
 * so that their syncs surely go out, in batches.
 */
export async function burst(
  members: readonly Member[],
  targets: readonly Target[],
  requests: (target: Target) => number,
  problems: string[],
): Promise<void> {
  await Promise.all(
    members.flatMap((m) =>
      targets.flatMap((t) => Array.from({ length: requests(t) }, () => consumeCounted(m, t, problems))),
    ),
  );
}

/** Keys of the server `client` is connected to that have no TTL. */
export async function keysWithoutTtl(client: Redis): Promise<string[]> {
  const keys = await client.keys('*');
  const ttls = await Promise.all(keys.map((k) => client.pttl(k)));
  // -2: the key expired between KEYS and PTTL; -1 is a key without a TTL.
  return keys.filter((_, i) => ttls[i] === -1);
}

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The fleet each member counted, once every one counted `n` (or after about 5 s). */
export async function fleetCounted(members: readonly Member[], n: number): Promise<number[]> {
  for (let i = 0; i < 200 && members.some((m) => m.limiter.stats().fleet !== n); i++) await delay(25);
  return members.map((m) => m.limiter.stats().fleet);
}

/**
 * Every member asks for every target, all at once (their syncs share batches), then pauses
 * `pauseMs`, until `stop()`, which resolves when the last round is in.
 */
export function traffic(
  members: readonly Member[],
  targets: readonly Target[],
  problems: string[],
  pauseMs: number,
): { stop(): Promise<void> } {
  let running = true;
  const loops = members.map(async (m) => {
    while (running) {
      await Promise.all(targets.map((target) => consumeCounted(m, target, problems)));
      await delay(pauseMs);
    }
  });
  return {
    async stop() {
      running = false;
      await Promise.all(loops);
    },
  };
}

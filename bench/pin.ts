import { execFileSync } from 'node:child_process';
import { cpus } from 'node:os';

/**
 * CPUs the benches pin to with `taskset` (Linux): the limiter's process on one, redis-server on the
 * other, so neither steals the other's core and a Redis round trip costs what it would across hosts.
 * The HTTP benches pin their server to NODE_CPU and move the load generator next to Redis.
 */
export const NODE_CPU = 0;
export const REDIS_CPU = 1;
export const ANY_CPU = `${NODE_CPU},${REDIS_CPU}`;

/** True when pinning can work here: taskset exists and there are two CPUs to split. */
export function canPin(): boolean {
  if (cpus().length < 2) return false;
  try {
    execFileSync('taskset', ['-V'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Pins every thread of `pid` to `cpu` (a taskset CPU list); false when taskset refused. */
export function pin(pid: number, cpu: number | string): boolean {
  try {
    execFileSync('taskset', ['-a', '-p', '-c', String(cpu), String(pid)], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

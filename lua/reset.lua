-- Forgets the shared state of one (policy, key): the next request finds a fresh bucket, window or
-- log. Port of reset() in src/stores/resetOps.ts. Every algorithm keeps one key per (policy, key).
--
-- KEYS[1]  any  the state of the key, whatever its algorithm's type
-- Returns  1 when there was state, 0 when there was none. (ARGV[1], the clock, is not needed.)

return redis.call('DEL', KEYS[1])

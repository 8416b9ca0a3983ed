-- Leaky bucket read: what a request of cost 1 that may not wait (a consume) would see now. Reads
-- only: no key is created, written or given a new expiry. Port of peek() in
-- src/algorithms/leakyBucket.ts.
--
-- KEYS[1]  string  tat: store time in ms at which everything admitted so far has drained
-- Returns  { remaining, reset_ms, retry_ms } as strings.

local bucket = KEYS[1]
local rate = number_arg(1, 'rate', false)          -- units drained per period
local period = number_arg(2, 'period_ms', false)   -- period in ms
local burst = number_arg(3, 'burst', false)        -- units that pass at once into an empty bucket
local now = now_arg(4)                             -- ms

local stored = redis.call('GET', bucket)
local backlog = 0
if stored then backlog = math.max(tonumber(stored), now) - now end
local retry = math.max(0, backlog + (1 * period) / rate - (burst * period) / rate)
local remaining = burst - (backlog * rate) / period
return { fmt(remaining), fmt(backlog), fmt(retry) }

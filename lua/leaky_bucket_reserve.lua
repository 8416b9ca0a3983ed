-- Leaky bucket (shaping) reservation: the request takes the next `cost` units of a steady drain;
-- `burst` units pass at once, the rest wait their turn, and the request is refused (nothing
-- recorded) only when its wait would exceed `max_wait_ms`.
-- Port of reserve() in src/algorithms/leakyBucket.ts: keep the arithmetic in the same order.
--
-- KEYS[1]  string  tat: store time in ms at which everything admitted so far has drained
-- Returns  { allowed (1/0), delay_ms, backlog_ms } as strings.

local bucket = KEYS[1]
local rate = number_arg(1, 'rate', false)             -- units drained per period
local period = number_arg(2, 'period_ms', false)      -- period in ms
local burst = number_arg(3, 'burst', false)           -- units that pass at once into an empty bucket
local cost = number_arg(4, 'cost', false)             -- units of this request
local max_wait = number_arg(5, 'max_wait_ms', true)   -- longest acceptable wait in ms
local now = now_arg(6)                                -- ms

local stored = redis.call('GET', bucket)
local start = now
if stored then start = math.max(tonumber(stored), now) end
local tat = start + (cost * period) / rate
local delay = math.max(0, start - now + (cost * period) / rate - (burst * period) / rate)
if delay > max_wait then
  return { '0', fmt(delay), fmt(start - now) }
end

-- After `tat` the bucket is empty, which is what an absent key means.
redis.call('SET', bucket, fmt(tat))
expire_in(bucket, math.ceil(tat - now) + 1)
return { '1', fmt(delay), fmt(tat - now) }

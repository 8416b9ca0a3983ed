-- Leaky bucket cancellation: a reservation given back (a cancelled wait) — the drain ends `cost`
-- units earlier, so the next request takes the freed turn.
-- Port of cancel() in src/algorithms/leakyBucket.ts.
--
-- KEYS[1]  string  tat: store time in ms at which everything admitted so far has drained
-- Returns  nothing.

local bucket = KEYS[1]
local rate = number_arg(1, 'rate', false)         -- units drained per period
local period = number_arg(2, 'period_ms', false)  -- period in ms
local cost = number_arg(3, 'cost', false)         -- units of the reservation given back
local now = now_arg(4)                            -- ms

local stored = redis.call('GET', bucket)
if not stored then return false end
local tat = tonumber(stored) - (cost * period) / rate
if tat <= now then
  redis.call('DEL', bucket)
else
  redis.call('SET', bucket, fmt(tat))
  expire_in(bucket, math.ceil(tat - now) + 1)
end
return false

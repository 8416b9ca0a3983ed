-- Token bucket read: what a request of cost 1 would see now. Reads only: no key is created,
-- written or given a new expiry. Port of peek() in src/algorithms/tokenBucket.ts.
--
-- KEYS[1]  string  bucket: "level time" (store time in ms; absent: full)
-- Returns  { remaining, reset_ms, retry_ms } as strings.

local bucket = KEYS[1]
local rate = number_arg(1, 'rate', false)         -- tokens added per period
local period = number_arg(2, 'period_ms', false)  -- period in ms
local burst = number_arg(3, 'burst', false)       -- capacity
local now = now_arg(4)                            -- ms

local level = bucket_level(bucket, now, rate, period, burst)
local reset, retry = 0, 0
if level < burst then reset = ((burst - level) * period) / rate end
if level < 1 then retry = ((1 - level) * period) / rate end
return { fmt(level), fmt(reset), fmt(retry) }

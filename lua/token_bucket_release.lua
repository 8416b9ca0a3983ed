-- Token bucket lease return: refill, add back unused leased tokens, never above capacity.
-- Port of release() in src/algorithms/tokenBucket.ts.
--
-- KEYS[1]  string  bucket: "level time" (store time in ms)
-- Returns  the level after the return as a string, or false when the bucket had expired (= full).

local bucket = KEYS[1]
local rate = number_arg(1, 'rate', false)         -- tokens added per period
local period = number_arg(2, 'period_ms', false)  -- period in ms
local burst = number_arg(3, 'burst', false)       -- capacity
local tokens = number_arg(4, 'tokens', true)      -- unused tokens handed back
local now = now_arg(5)                            -- ms

local level, ts, lent, lent_until = bucket_level(bucket, now, rate, period, burst)
if ts == nil then return false end
local next_level = math.min(burst, level + tokens)
bucket_write(bucket, next_level, now, rate, period, burst, lent, lent_until)
return fmt(next_level)

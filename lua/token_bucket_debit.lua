-- Token bucket write-back: takes tokens a fail-policy fallback admitted while Redis was unreachable.
-- Never refuses; takes the level down to empty and no further, and leaves a negative level alone.
-- Port of debit() in src/algorithms/tokenBucket.ts.
--
-- KEYS[1]  string  bucket: "level time" (store time in ms)
-- Returns  the tokens actually taken, as a string.

local bucket = KEYS[1]
local rate = number_arg(1, 'rate', false)         -- tokens added per period
local period = number_arg(2, 'period_ms', false)  -- period in ms
local burst = number_arg(3, 'burst', false)       -- capacity
local tokens = number_arg(4, 'tokens', false)     -- tokens the fallback admitted
local now = now_arg(5)                            -- ms

local level, ts, lent, lent_until = bucket_level(bucket, now, rate, period, burst)

local next_level = math.max(level - tokens, math.min(level, 0))
if next_level == level and ts ~= nil and now >= ts then return fmt(0) end
bucket_write(bucket, next_level, now, rate, period, burst, lent, lent_until)
return fmt(level - next_level)

-- Quantised sliding log refund: takes a refused-elsewhere request's units out of the bucket they
-- went into, if that bucket is still kept. Port of release() in src/algorithms/slidingLogQuantised.ts.
--
-- KEYS[1]  hash  buckets: o = oldest live bucket index, l = newest bucket index, n = total units,
--                 and one field per bucket index holding its units
-- Returns  nothing. (ARGV[3], the store's clock, is not needed.)

local log = KEYS[1]
local bucket = fmt(number_arg(1, 'bucket', true))  -- the bucket the units went into
local cost = number_arg(2, 'cost', false)          -- units to take out

local held = tonumber(redis.call('HGET', log, bucket))
if not held then return false end
local taken = math.min(held, cost)
if held > taken then
  redis.call('HINCRBY', log, bucket, -taken)
else
  redis.call('HDEL', log, bucket)
end
redis.call('HINCRBY', log, 'n', -taken)
return false

-- Quantised sliding log: the sliding log with entries rounded to `quantum_ms` buckets — one counter
-- per bucket instead of one member per unit. A bucket counts while any part of it is inside the
-- window, so the log's guarantee holds; a unit is forgotten up to one quantum late. Trim, count and
-- append in one atomic step; a refused request is not recorded.
-- Port of acquire() in src/algorithms/slidingLogQuantised.ts.
--
-- KEYS[1]  hash  buckets: o = oldest live bucket index, l = newest bucket index, n = total units,
--                 and one field per bucket index (`floor(time / quantum_ms)`) holding its units
-- Returns  { allowed (1/0), count, bucket (-1 when refused), retry_ms, reset_ms } as strings.

local log = KEYS[1]
local limit = number_arg(1, 'limit', false)            -- most units in any window
local window_ms = number_arg(2, 'window_ms', false)    -- window length in ms
local quantum_ms = number_arg(3, 'quantum_ms', false)  -- bucket length in ms
local cost = number_arg(4, 'cost', false)              -- whole units
local now = now_arg(5)                                 -- ms

if cost ~= math.floor(cost) then error({ err = 'ERR tokenlease: invalid cost ' .. ARGV[4] }) end
-- Never fits; the limiter refuses such a cost before asking.
if cost > limit then return { '0', '0', '-1', '0', '0' } end

local function leaves_in(b)
  return (b + 1) * quantum_ms + window_ms - now
end

-- Drop the buckets that have wholly left the window.
local q = quantised_live(log, now, window_ms, quantum_ms, true)

if q.total + cost > limit then
  local b = quantised_fits_after(log, q, cost, limit)
  return { '0', fmt(q.total), '-1', fmt(leaves_in(b)), fmt(leaves_in(q.newest)) }
end

-- A clock that went backwards files the units in the oldest live bucket: they are kept longer.
local bucket = math.floor(now / quantum_ms)
local oldest, newest = bucket, bucket
if q.exists then
  bucket = math.max(bucket, q.oldest)
  oldest, newest = q.oldest, math.max(bucket, q.newest)
end
redis.call('HINCRBY', log, fmt(bucket), cost)
redis.call('HSET', log, 'o', fmt(oldest), 'l', fmt(newest), 'n', fmt(q.total + cost))
local reset = leaves_in(newest)
expire_in(log, math.ceil(reset))
return { '1', fmt(q.total + cost), fmt(bucket), '0', fmt(reset) }

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
local stored = redis.call('HMGET', log, 'o', 'l', 'n')
local exists = stored[1] ~= false
local oldest, newest, total = 0, 0, 0
if exists then
  oldest, newest, total = tonumber(stored[1]), tonumber(stored[2]), tonumber(stored[3])
  local first = math.floor((now - window_ms) / quantum_ms)
  if first > oldest then
    -- Stored buckets never reach more than `span` past `oldest`: past that everything is gone,
    -- and a long idle gap costs no loop.
    local span = math.ceil(window_ms / quantum_ms) + 1
    if first >= oldest + span then
      redis.call('DEL', log)
      exists, total = false, 0
    else
      for b = oldest, first - 1 do
        local units = redis.call('HGET', log, fmt(b))
        if units then
          total = total - tonumber(units)
          redis.call('HDEL', log, fmt(b))
        end
      end
      oldest = first
      redis.call('HSET', log, 'o', fmt(oldest), 'n', fmt(total))
    end
  end
end

if total + cost > limit then
  -- Walk from the oldest bucket until enough units would have left for `cost` to fit.
  local need = total + cost - limit
  local b = oldest
  while need > 0 do
    need = need - (tonumber(redis.call('HGET', log, fmt(b))) or 0)
    b = b + 1
  end
  return { '0', fmt(total), '-1', fmt(leaves_in(b - 1)), fmt(leaves_in(newest)) }
end

-- A clock that went backwards files the units in the oldest live bucket: they are kept longer.
local bucket = math.floor(now / quantum_ms)
if exists then
  bucket = math.max(bucket, oldest)
  newest = math.max(bucket, newest)
else
  oldest, newest = bucket, bucket
end
redis.call('HINCRBY', log, fmt(bucket), cost)
redis.call('HSET', log, 'o', fmt(oldest), 'l', fmt(newest), 'n', fmt(total + cost))
local reset = leaves_in(newest)
expire_in(log, math.ceil(reset))
return { '1', fmt(total + cost), fmt(bucket), '0', fmt(reset) }

-- Sliding log: trim entries older than the window, count the rest, and append the request only if
-- it fits — in ONE atomic step. (The common recipe pipelines ZREMRANGEBYSCORE + ZCARD and sends ZADD in a
-- second round trip; concurrent callers then all see the same count and all append.)
-- A refused request is not recorded. Port of acquire() in src/algorithms/slidingLog.ts.
--
-- KEYS[1]  zset  log: one member per admitted unit, `<request id>:<i>`, scored by its time in ms
-- Returns  { allowed (1/0), count, retry_ms, reset_ms } as strings.

local log = KEYS[1]
local limit = number_arg(1, 'limit', false)          -- most units in any window
local window_ms = number_arg(2, 'window_ms', false)  -- window length in ms
local cost = number_arg(3, 'cost', false)            -- whole units, one member each
local id = ARGV[4]                                   -- unique per request: members never collide
local now = now_arg(5)                               -- ms

if cost ~= math.floor(cost) then error({ err = 'ERR tokenlease: invalid cost ' .. ARGV[3] }) end
if id == nil or id == '' then error({ err = 'ERR tokenlease: invalid id' }) end
-- Never fits; the limiter refuses such a cost before asking.
if cost > limit then return { '0', '0', '0', '0' } end

-- Entries at or before now - window_ms have left the window (it is the half-open (now - w, now]).
redis.call('ZREMRANGEBYSCORE', log, '-inf', fmt(now - window_ms))
local count = redis.call('ZCARD', log)

local function newest_leaves_in()
  local last = redis.call('ZRANGE', log, -1, -1, 'WITHSCORES')
  return tonumber(last[2]) + window_ms - now
end

if count + cost > limit then
  -- The oldest `count + cost - limit` entries must leave before `cost` more fit.
  local blocking = redis.call('ZRANGE', log, count + cost - limit - 1, count + cost - limit - 1, 'WITHSCORES')
  local retry = tonumber(blocking[2]) + window_ms - now
  return { '0', tostring(count), fmt(retry), fmt(newest_leaves_in()) }
end

-- ZADD in chunks: Lua's unpack() has a bounded stack.
local score = fmt(now)
local args = {}
for i = 1, cost do
  args[#args + 1] = score
  args[#args + 1] = id .. ':' .. i
  if #args >= 1000 or i == cost then
    redis.call('ZADD', log, unpack(args))
    args = {}
  end
end
local reset = newest_leaves_in()
-- The key lives as long as its newest entry counts.
expire_in(log, math.ceil(reset))
return { '1', tostring(count + cost), '0', fmt(reset) }

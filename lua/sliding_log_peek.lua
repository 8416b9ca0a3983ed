-- Sliding log read: what a request of cost 1 would see now. Reads only: entries that left the
-- window are skipped, not trimmed, and no key is created or given a new expiry.
-- Port of peek() in src/algorithms/slidingLog.ts.
--
-- KEYS[1]  zset  log: one member per admitted unit, scored by its time in ms
-- Returns  { remaining, reset_ms, retry_ms } as strings.

local log = KEYS[1]
local limit = number_arg(1, 'limit', false)          -- most units in any window
local window_ms = number_arg(2, 'window_ms', false)  -- window length in ms
local now = now_arg(3)                               -- ms

-- The live entries are those scored after now - window_ms (the window is (now - w, now]).
local live = '(' .. fmt(now - window_ms)
local count = redis.call('ZCOUNT', log, live, '+inf')
local reset, retry = 0, 0
if count > 0 then
  local newest = redis.call('ZRANGE', log, -1, -1, 'WITHSCORES')
  reset = tonumber(newest[2]) + window_ms - now
end
if count + 1 > limit then
  -- The oldest `count + 1 - limit` live entries must leave before one more fits.
  local blocking = redis.call('ZRANGEBYSCORE', log, live, '+inf', 'WITHSCORES', 'LIMIT', count - limit, 1)
  retry = tonumber(blocking[2]) + window_ms - now
end
return { fmt(limit - count), fmt(reset), fmt(retry) }

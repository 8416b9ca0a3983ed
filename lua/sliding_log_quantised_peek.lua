-- Quantised sliding log read: what a request of cost 1 would see now. Reads only: buckets that
-- left the window are skipped, not dropped, and no key is created or given a new expiry.
-- Port of peek() in src/algorithms/slidingLogQuantised.ts.
--
-- KEYS[1]  hash  buckets: o = oldest live bucket index, l = newest bucket index, n = total units,
--                 and one field per bucket index holding its units
-- Returns  { remaining, reset_ms, retry_ms } as strings.

local log = KEYS[1]
local limit = number_arg(1, 'limit', false)            -- most units in any window
local window_ms = number_arg(2, 'window_ms', false)    -- window length in ms
local quantum_ms = number_arg(3, 'quantum_ms', false)  -- bucket length in ms
local now = now_arg(4)                                 -- ms

local function leaves_in(b)
  return (b + 1) * quantum_ms + window_ms - now
end

local stored = redis.call('HMGET', log, 'o', 'l', 'n')
local exists = stored[1] ~= false
local oldest, newest, total = 0, 0, 0
if exists then
  oldest, newest, total = tonumber(stored[1]), tonumber(stored[2]), tonumber(stored[3])
  local first = math.floor((now - window_ms) / quantum_ms)
  if first > oldest then
    local span = math.ceil(window_ms / quantum_ms) + 1
    if first >= oldest + span then
      exists, total = false, 0
    else
      for b = oldest, first - 1 do
        total = total - (tonumber(redis.call('HGET', log, fmt(b))) or 0)
      end
      oldest = first
    end
  end
end

local reset, retry = 0, 0
if exists and total > 0 then reset = leaves_in(newest) end
if exists and total + 1 > limit then
  -- Walk from the oldest bucket until enough units would have left for one more to fit.
  local need = total + 1 - limit
  local b = oldest
  while need > 0 do
    need = need - (tonumber(redis.call('HGET', log, fmt(b))) or 0)
    b = b + 1
  end
  retry = leaves_in(b - 1)
end
return { fmt(limit - total), fmt(reset), fmt(retry) }

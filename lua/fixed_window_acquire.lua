-- Fixed window lease acquisition: grant up to `want` tokens (at least `min`, else none) from the
-- current window's quota and count them, in one atomic step. The common INCR + one-time EXPIRE,
-- without its gap: the expiry is set in the same script, once, when a window's first grant
-- creates the key, so no request ever extends it and no key ever lives without one.
-- Port of acquire() in src/algorithms/fixedWindow.ts.
--
-- KEYS[1]  hash  counter: w = window index, n = tokens counted in that window
-- Returns  { granted, remaining, opens_per_ms (always 0), window, ms_left, retry_ms, reset_ms } as
--          strings.

local counter = KEYS[1]
local limit = number_arg(1, 'limit', false)         -- most tokens per window
local window_ms = number_arg(2, 'window_ms', true)  -- window length in ms; 0 = calendar month (UTC)
local want = number_arg(3, 'want', false)           -- tokens wanted for the slice
local min = number_arg(4, 'min', false)             -- fewest tokens worth granting
-- '1': a window opens at the first grant after the last one ended (index = start / window_ms,
-- fractional), instead of on the epoch grid. Not for calendar months.
local first_hit = ARGV[5] == '1' and window_ms > 0
local now = now_arg(6)                              -- ms

-- Days since 1970-01-01 -> (year, month 1..12), and back: Howard Hinnant's civil calendar
-- algorithms, the same dates JavaScript's Date.UTC gives.
local function civil_from_days(days)
  local z = days + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400
  if m <= 2 then y = y + 1 end
  return y, m
end

local function days_from_civil(y, m)
  if m <= 2 then y = y - 1 end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local doy = math.floor((153 * (m > 2 and m - 3 or m + 9) + 2) / 5)
  return era * 146097 + yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy - 719468
end

local function window_index(t)
  if window_ms > 0 then return math.floor(t / window_ms) end
  local y, m = civil_from_days(math.floor(math.floor(t) / 86400000))
  return y * 12 + m - 1
end

-- A first-hit index is fractional (start / window_ms): rounded to the microsecond, its product is
-- the start again rather than a hair off it (which would round a whole second up in headers).
local function window_start(index)
  if window_ms > 0 then return math.floor(index * window_ms * 1000 + 0.5) / 1000 end
  local y = math.floor(index / 12)
  return days_from_civil(y, index - y * 12 + 1) * 86400000
end

local stored = redis.call('HMGET', counter, 'w', 'n')
-- A clock that went backwards stays in the stored window; an older stored window counts as empty.
local window = window_index(now)
local used = 0
if first_hit then
  window = now / window_ms
  if stored[1] and now < window_start(tonumber(stored[1]) + 1) then
    window = tonumber(stored[1])
    used = tonumber(stored[2])
  end
elseif stored[1] then
  local stored_window = tonumber(stored[1])
  if stored_window >= window then
    window = stored_window
    used = tonumber(stored[2])
  end
end
-- A window opening at this hit lasts exactly its length (its fractional index would round).
local ms_left = window_start(window + 1) - now
if first_hit and not (stored[1] and tonumber(stored[1]) == window) then ms_left = window_ms end
local room = limit - used

local granted = 0
if room >= want then granted = want elseif room >= min then granted = room end
if granted == 0 then
  -- A refusal writes nothing and is not counted.
  local reset_ms = 0
  if used > 0 then reset_ms = ms_left end
  return { '0', fmt(room), '0', fmt(window), fmt(ms_left), fmt(ms_left), fmt(reset_ms) }
end

if stored[1] and tonumber(stored[1]) == window then
  redis.call('HSET', counter, 'n', fmt(used + granted))
else
  redis.call('HSET', counter, 'w', fmt(window), 'n', fmt(granted))
  expire_in(counter, math.ceil(ms_left))
end
return { fmt(granted), fmt(room - granted), '0', fmt(window), fmt(ms_left), '0', fmt(ms_left) }

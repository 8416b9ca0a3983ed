-- Sliding window counter lease acquisition: roll the two counts over to the current window,
-- estimate the last `window_ms` as previous * (end - now) / window_ms + current, grant up to `want`
-- tokens (at least `min`, else none) of the room left, and count them — one atomic step. With
-- `ahead`, a lease may also take what the previous count frees before the window ends (the
-- limiter spends those tokens only as they open).
-- Port of acquire() in src/algorithms/slidingWindow.ts: keep the arithmetic in the same order so
-- Redis and MemoryStore produce identical doubles.
--
-- KEYS[1]  hash  counts: w = current window index, c = its count, p = the previous window's count
-- Returns  { granted, remaining, opens_per_ms, window, ms_left, retry_ms, reset_ms } as strings.

local counts = KEYS[1]
local limit = number_arg(1, 'limit', false)          -- most tokens per sliding window
local window_ms = number_arg(2, 'window_ms', false)  -- window length in ms
local want = number_arg(3, 'want', false)            -- tokens wanted for the slice
local min = number_arg(4, 'min', false)              -- fewest tokens worth granting
local ahead = number_arg(5, 'ahead', true) == 1      -- 1: may grant what opens before the window ends
local now = now_arg(6)                               -- ms

local stored = redis.call('HMGET', counts, 'w', 'c', 'p')
-- A clock that went backwards stays in the stored window.
local window = math.floor(now / window_ms)
if stored[1] then window = math.max(window, tonumber(stored[1])) end
local current, previous = 0, 0
if stored[1] then
  local stored_window = tonumber(stored[1])
  if stored_window == window then
    current, previous = tonumber(stored[2]), tonumber(stored[3])
  elseif stored_window == window - 1 then
    previous = tonumber(stored[2])
  end
end

local window_end = (window + 1) * window_ms
-- What the previous count still weighs: it opens as room, linearly, until window_end.
local opening = (previous * (window_end - now)) / window_ms
local room = limit - (opening + current)
local reach = room
if ahead then reach = room + opening end
local ms_left = window_end - now
local opens_per_ms = previous / window_ms

local function reset_in(c, p)
  if c > 0 then return window_end + window_ms - now end
  if p > 0 then return window_end - now end
  return 0
end

local granted = 0
if reach >= want then granted = want elseif reach >= min then granted = reach end
if granted == 0 then
  -- A refusal writes nothing. When could `min` fit? Leasing ahead, nothing more opens in this
  -- window. Otherwise: within this window the previous count's weight falls to zero at
  -- window_end; after it, this window's count is the decaying one.
  local retry
  local spare = limit - current - min
  if ahead then
    retry = ms_left
  elseif spare >= 0 and previous > 0 then
    retry = math.max(0, window_end - (window_ms * spare) / previous - now)
  elseif spare >= 0 then
    retry = 0
  elseif current <= 0 then
    retry = window_end - now
  else
    retry = math.max(window_end, window_end + window_ms - (window_ms * (limit - min)) / current) - now
  end
  return {
    '0', fmt(math.max(0, room)), fmt(opens_per_ms), fmt(window), fmt(ms_left), fmt(retry),
    fmt(reset_in(current, previous)),
  }
end

if stored[1] and tonumber(stored[1]) == window then
  redis.call('HSET', counts, 'c', fmt(current + granted))
else
  -- First grant of this window: roll over and set the expiry once. This window's count matters
  -- until the next window ends, as that window's `previous`.
  redis.call('HSET', counts, 'w', fmt(window), 'c', fmt(granted), 'p', fmt(previous))
  expire_in(counts, math.ceil(ms_left + window_ms))
end
return {
  fmt(granted), fmt(room - granted), fmt(opens_per_ms), fmt(window), fmt(ms_left), '0',
  fmt(reset_in(current + granted, previous)),
}

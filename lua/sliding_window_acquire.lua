-- Sliding window counter lease acquisition: roll the two counts over to the current window,
-- estimate the last `window_ms` as previous * (end - now) / window_ms + current, grant up to `want`
-- tokens (at least `min`, else none) of the room left, and count them — one atomic step. With
-- `ahead`, a lease may also take what the previous count frees before the window ends (the
-- limiter spends those tokens only as they open).
-- Port of acquire() in src/algorithms/slidingWindow.ts (the sliding_window_* helpers are in
-- prelude.lua): keep the arithmetic in the same order so Redis and MemoryStore produce identical
-- doubles.
--
-- KEYS[1]  hash  counts: w = current window index, c = its count, p = the previous window's count
-- Returns  { granted, remaining, opens_per_ms, window, ms_left, retry_ms, reset_ms } as strings.

local counts = KEYS[1]
local req = {
  limit = number_arg(1, 'limit', false),          -- most tokens per sliding window
  window_ms = number_arg(2, 'window_ms', false),  -- window length in ms
  want = number_arg(3, 'want', false),            -- tokens wanted for the slice
  min = number_arg(4, 'min', false),              -- fewest tokens worth granting
  ahead = number_arg(5, 'ahead', true) == 1,      -- 1: may grant what opens before the window ends
}
local now = now_arg(6)                            -- ms

local s = sliding_window_counts(counts, now, req.window_ms)
local m = sliding_window_measure(s, now, req)
local granted = grant_from(sliding_window_reach(m, req), req.want, req.min)
-- A refusal writes nothing.
if granted == 0 then return sliding_window_reply(s, now, m, granted, true, req) end
sliding_window_write(counts, s, granted, m, req.window_ms)
return sliding_window_reply(s, now, m, granted, false, req)

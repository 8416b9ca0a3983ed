-- Sliding window counter read: what a request of cost 1 would see now. Reads only: no key is
-- created, written or given a new expiry. Port of peek() in src/algorithms/slidingWindow.ts.
--
-- KEYS[1]  hash  counts: w = current window index, c = its count, p = the previous window's count
-- Returns  { remaining, reset_ms, retry_ms } as strings.

local counts = KEYS[1]
local req = {
  limit = number_arg(1, 'limit', false),          -- most tokens per sliding window
  window_ms = number_arg(2, 'window_ms', false),  -- window length in ms
  min = 1,                                        -- the cost the read is for
}
local now = now_arg(3)                            -- ms

local s = sliding_window_counts(counts, now, req.window_ms)
local m = sliding_window_measure(s, now, req)
local retry = 0
if m.room < 1 then retry = sliding_window_retry(s, now, m.window_end, req) end
local reset = sliding_window_reset(s.current, s.previous, now, m.window_end, req.window_ms)
return { fmt(m.room), fmt(reset), fmt(retry) }

-- Sliding window counter dialogue of one instance in one step: count what it admitted under its
-- allowance and take leased tokens it hands back off the count of the window they belong to
-- (current or previous; older windows no longer weigh), then grant an allowance (nothing counted)
-- when the window is far from its limit, else a slice as sliding_window_acquire does.
-- Port of sync() in src/algorithms/slidingWindow.ts (the sliding_window_* helpers are in
-- prelude.lua): keep the arithmetic in the same order.
--
-- KEYS[1]  hash  counts: w = current window index, c = its count, p = the previous window's count
-- Returns  { granted, remaining, opens_per_ms, window, ms_left, retry_ms, reset_ms, allowance } as
--          strings.

local counts = KEYS[1]
local req = {
  limit = number_arg(1, 'limit', false),           -- most tokens per sliding window
  window_ms = number_arg(2, 'window_ms', false),   -- window length in ms
  want = number_arg(3, 'want', true),              -- slice wanted when no allowance is granted
  min = number_arg(4, 'min', true),                -- fewest tokens worth granting (0: the whole want)
  ahead = number_arg(5, 'ahead', true) == 1,       -- 1: may grant what opens before the window ends
}
req.min = lease_min(req.want, req.min)
-- ARGV[6..10]: the report and the allowance ask (window_report_args)
local used, returned, window, allowance, fleet = window_report_args(6)
local now = now_arg(11)                            -- ms

local s = sliding_window_counts(counts, now, req.window_ms)
local settles = false
if window == s.window then
  local current = window_settled(s.current, used, returned)
  if current ~= nil then s.current, settles = current, true end
elseif window == s.window - 1 then
  local previous = window_settled(s.previous, used, returned)
  if previous ~= nil then s.previous, settles = previous, true end
end
local m = sliding_window_measure(s, now, req)
local granted_allowance = window_allowance_from(m.room, req.limit, allowance, fleet, req.min, req.want)
local leasing = granted_allowance == 0 and req.want > 0
local granted = 0
if leasing then granted = grant_from(sliding_window_reach(m, req), req.want, req.min) end
local reply = sliding_window_reply(s, now, m, granted, leasing and granted == 0, req)
reply[8] = fmt(granted_allowance)
-- Nothing settled and nothing granted writes nothing.
if settles or granted > 0 then sliding_window_write(counts, s, granted, m, req.window_ms) end
return reply

-- Fixed window dialogue of one instance in one step: count what it admitted under its allowance,
-- take leased tokens it hands back off the count (both only into the current window: an ended
-- window's usage no longer matters), then grant an allowance (nothing counted) when the window is
-- far from its limit, else a slice as fixed_window_acquire does.
-- Port of sync() in src/algorithms/fixedWindow.ts; the fixed_window_* helpers are in prelude.lua.
--
-- KEYS[1]  hash  counter: w = window index, n = tokens counted in that window
-- Returns  { granted, remaining, opens_per_ms (always 0), window, ms_left, retry_ms, reset_ms,
--          allowance } as strings.

local counter = KEYS[1]
local limit = number_arg(1, 'limit', false)         -- most tokens per window
local window_ms = number_arg(2, 'window_ms', true)  -- window length in ms; 0 = calendar month (UTC)
local want = number_arg(3, 'want', true)            -- slice wanted when no allowance is granted
local min = lease_min(want, number_arg(4, 'min', true))  -- fewest tokens worth granting (0: all)
local first_hit = ARGV[5] == '1' and window_ms > 0  -- '1': windows open at the first grant
-- ARGV[6..10]: the report and the allowance ask (window_report_args)
local used, returned, window, allowance, fleet = window_report_args(6)
local now = now_arg(11)                             -- ms

local c = fixed_window_counted(counter, now, window_ms, first_hit)
local count = nil
if window == c.window then count = window_settled(c.used, used, returned) end
if count ~= nil then c.used = count end
local room = limit - c.used
local granted_allowance = window_allowance_from(room, limit, allowance, fleet, min, want)
local leasing = granted_allowance == 0 and want > 0
local granted = 0
if leasing then granted = grant_from(room, want, min) end
local reply = fixed_window_reply(c, room, granted, leasing and granted == 0)
reply[8] = fmt(granted_allowance)
-- Nothing settled and nothing granted writes nothing; an allowance opening a first-hit window
-- writes it (counting nothing), or the next call would open another.
if count ~= nil or granted > 0 or (granted_allowance > 0 and c.opens) then
  fixed_window_write(counter, c, c.used + granted)
end
return reply

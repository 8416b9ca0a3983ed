-- Fixed window lease acquisition: grant up to `want` tokens (at least `min`, else none) from the
-- current window's quota and count them, in one atomic step. The common INCR + one-time EXPIRE,
-- without its gap: the expiry is set in the same script, once, when a window's first grant
-- creates the key, so no request ever extends it and no key ever lives without one.
-- Port of acquire() in src/algorithms/fixedWindow.ts; the fixed_window_* helpers are in prelude.lua.
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

local c = fixed_window_counted(counter, now, window_ms, first_hit)
local room = limit - c.used
local granted = grant_from(room, want, min)
-- A refusal writes nothing and is not counted.
if granted == 0 then return fixed_window_reply(c, room, granted, true) end
fixed_window_write(counter, c, c.used + granted)
return fixed_window_reply(c, room, granted, false)

-- Fixed window read: what a request of cost 1 would see now. Reads only: no key is created,
-- written or given a new expiry. Port of peek() in src/algorithms/fixedWindow.ts.
--
-- KEYS[1]  hash  counter: w = window index, n = tokens counted in that window
-- Returns  { remaining, reset_ms, retry_ms } as strings.

local counter = KEYS[1]
local limit = number_arg(1, 'limit', false)         -- most tokens per window
local window_ms = number_arg(2, 'window_ms', true)  -- window length in ms; 0 = calendar month (UTC)
-- '1': windows open at the first grant after the last one ended (not for calendar months).
local first_hit = ARGV[3] == '1' and window_ms > 0
local now = now_arg(4)                              -- ms

local c = fixed_window_counted(counter, now, window_ms, first_hit)
local room = limit - c.used
local reset, retry = 0, 0
if c.used > 0 then reset = c.ms_left end
if room < 1 then retry = c.ms_left end
return { fmt(room), fmt(reset), fmt(retry) }

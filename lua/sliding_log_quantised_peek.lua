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

local q = quantised_live(log, now, window_ms, quantum_ms, false)
local reset, retry = 0, 0
if q.exists and q.total > 0 then reset = leaves_in(q.newest) end
if q.exists and q.total + 1 > limit then retry = leaves_in(quantised_fits_after(log, q, 1, limit)) end
return { fmt(limit - q.total), fmt(reset), fmt(retry) }

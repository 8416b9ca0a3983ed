-- Token bucket dialogue of one instance in one step: debit what it admitted under its allowance,
-- credit leased tokens it hands back, then grant an allowance (nothing debited) when the bucket is
-- far from empty, else a lease as token_bucket_acquire does. Port of sync() in
-- src/algorithms/tokenBucket.ts: keep the arithmetic in the same order.
--
-- KEYS[1]  string  bucket: "level time" (level may be negative; store time in ms)
-- Returns  { granted, allowance, level_before, now, lent, lent_ms } as strings; lent: tokens leases
--          hold that existed when granted and may come back, lent_ms: by when at the latest

local bucket = KEYS[1]
local rate = number_arg(1, 'rate', false)            -- tokens added per period
local period = number_arg(2, 'period_ms', false)     -- period in ms
local burst = number_arg(3, 'burst', false)          -- capacity
local used = number_arg(4, 'used', true)             -- tokens admitted under the allowance: debited
local returned = number_arg(5, 'returned', true)     -- leased tokens handed back: credited
local want = number_arg(6, 'want', true)             -- lease wanted when no allowance is granted
local min = number_arg(7, 'min', true)               -- fewest tokens worth granting
local ahead = number_arg(8, 'ahead', true)           -- how far below zero a lease may go
local allowance = number_arg(9, 'allowance', true)   -- most allowance wanted
local fleet = number_arg(10, 'fleet', true)          -- instances sharing the limits (0: unknown)
local hold = number_arg(11, 'hold_ms', true)         -- longest a lease's existing tokens stay unused
local spent = number_arg(12, 'spent', true)          -- of this instance's leases, tokens spent since
local now = now_arg(13)                              -- ms

local refilled, ts, held, held_until = bucket_level(bucket, now, rate, period, burst)
-- Reported usage is charged in full, wherever leases left the level: those tokens were admitted.
local settled = math.min(burst, refilled + returned)
local level = settled - used
local granted_allowance = allowance_from(level, burst, level >= (3 * burst) / 4 and burst or level, allowance, fleet, min, want)
local granted = 0
if granted_allowance == 0 and want > 0 then
  local room = level + ahead
  if room >= want then granted = want elseif min > 0 and room >= min then granted = room end
end
-- What leases hold of existing tokens: less what comes back now, plus what this lease takes of
-- them (its tokens below zero exist only later and are not counted).
local lent = math.max(0, held - returned - spent)
local lent_until = now
if lent > 0 then lent_until = held_until end
local existing = math.min(granted, math.max(0, level))
if existing > 0 and hold > 0 then
  lent = lent + existing
  -- Held until the last of its tokens exists, and a lease time after.
  lent_until = math.max(lent_until, now + hold + ((granted - existing) * period) / rate)
end
local lent_out, lent_ms = bucket_lent_reply(lent, lent_until, now)
local reply = { fmt(granted), fmt(granted_allowance), fmt(level), fmt(now), lent_out, lent_ms }

local settles = used > 0 or (returned > 0 and ts ~= nil)
if not settles and granted == 0 then
  -- Nothing written, unless the clock went backwards (as for a refusal in token_bucket_acquire).
  if ts ~= nil and now < ts then
    bucket_write(bucket, level, now, rate, period, burst, lent, lent_until)
  end
  return reply
end
local next_level = level - granted
bucket_write(bucket, next_level, now, rate, period, burst, lent, lent_until)
return reply

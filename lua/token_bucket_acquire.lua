-- Token bucket lease acquisition: refill, grant up to `want` tokens (at least `min`, else none),
-- debit, all in one atomic step. Port of acquire() in src/algorithms/tokenBucket.ts: keep the
-- arithmetic in the same order so Redis and MemoryStore produce identical doubles.
--
-- KEYS[1]  string  bucket: "level time" (level may be negative down to -ahead; store time in ms)
-- Returns  { granted, level_before, now, lent, lent_ms } as strings (Lua numbers would be
--          truncated to integers); lent: tokens leases hold that may come back, lent_ms: by when.

local bucket = KEYS[1]
local rate = number_arg(1, 'rate', false)         -- tokens added per period
local period = number_arg(2, 'period_ms', false)  -- period in ms
local burst = number_arg(3, 'burst', false)       -- capacity
local want = number_arg(4, 'want', false)         -- tokens wanted for the lease
local min = number_arg(5, 'min', false)           -- fewest tokens worth granting
local ahead = number_arg(6, 'ahead', true)        -- how far below zero the level may go
local now = now_arg(7)                            -- ms

local level, ts, lent, lent_until = bucket_level(bucket, now, rate, period, burst)
local lent_out, lent_ms = bucket_lent_reply(lent, lent_until, now)

local room = level + ahead
local granted = 0
if room >= want then granted = want elseif room >= min then granted = room end
if granted == 0 then
  -- A refusal writes nothing, unless the clock went backwards: then `t` moves back to now, or the
  -- bucket would refill nothing until the clock caught up with the old `t`.
  if ts ~= nil and now < ts then
    bucket_write(bucket, level, now, rate, period, burst, lent, lent_until)
  end
  return { '0', fmt(level), fmt(now), lent_out, lent_ms }
end

-- An exact decision spends what it takes at once: nothing of it comes back.
local next_level = level - granted
bucket_write(bucket, next_level, now, rate, period, burst, lent, lent_until)
return { fmt(granted), fmt(level), fmt(now), lent_out, lent_ms }

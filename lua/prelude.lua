-- Shared helpers, prepended to every script by the loader (src/scripts.ts): Redis has no `require`.

-- Reads ARGV[index] as a finite number >= 0 (> 0 unless allow_zero), or fails the script with an
-- error naming the argument. Raising aborts before any write, so bad input never corrupts state.
local function number_arg(index, name, allow_zero)
  local value = tonumber(ARGV[index])
  -- value ~= value rejects NaN; the upper bound rejects +inf.
  if value == nil or value ~= value or value >= math.huge or value < 0 or (value == 0 and not allow_zero) then
    error({ err = 'ERR tokenlease: invalid ' .. name .. ' ' .. tostring(ARGV[index]) })
  end
  return value
end

-- The explicit clock (simulator, tests) when ARGV[index] is set, else Redis TIME in ms: gateway
-- clocks drift, the store's is the one all instances share.
local explicit_clock = false
-- Redis TIME, read once per call: a batch runs atomically, so all its operations decide at one
-- instant, and it costs one command instead of one per operation.
local store_now = nil
local function now_arg(index)
  if ARGV[index] == nil or ARGV[index] == '' then
    if store_now == nil then
      local t = redis.call('TIME')
      store_now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    end
    return store_now
  end
  explicit_clock = true
  return number_arg(index, 'now', true)
end

-- The TTL of state that stops mattering in `ms`. Redis expires keys by its own clock, so under an
-- explicit (virtual) clock that may run slower than Redis's, keep keys at least a minute:
-- otherwise Redis could forget a bucket that virtual time still needs.
-- At most MAX_TTL_MS of src/algorithms/tokenBucket.ts: larger values (or a non-finite one) would
-- make PEXPIRE fail after the state was written, leaving a key that never expires.
local function ttl_ms(ms)
  if explicit_clock then ms = math.max(ms, 60000) end
  if not (ms <= 1e13) then ms = 1e13 end
  return ms
end

-- Sets the key's TTL to when its state stops mattering.
local function expire_in(key, ms)
  redis.call('PEXPIRE', key, ttl_ms(ms))
end

-- Doubles survive a round trip through a Redis string only with 17 significant digits.
local function fmt(x)
  return string.format('%.17g', x)
end

-- A token bucket is a string "level time" (the level may be negative; time is store time in ms),
-- or "level time lent until" while leases hold tokens that existed when granted (`lent`, handed
-- back by store time `until` at the latest): read with one GET and written with one SET that also
-- sets its expiry, where a hash took HMGET, HSET and PEXPIRE. The hash tokenlease 0.1 wrote is
-- still read; the next write replaces it.
local function bucket_stored(bucket)
  local stored = redis.pcall('GET', bucket)
  if type(stored) == 'string' then
    -- Two fields or four, each matched at once: a split into a table cost every exact decision
    -- about as much as the rest of its arithmetic.
    local a, b, c, d = string.match(stored, '^%s*(%S+)%s+(%S+)%s*$')
    if a == nil then a, b, c, d = string.match(stored, '^%s*(%S+)%s+(%S+)%s+(%S+)%s+(%S+)%s*$') end
    local level, ts = tonumber(a), tonumber(b)
    local lent, lent_until = nil, nil
    if c ~= nil then lent, lent_until = tonumber(c), tonumber(d) end
    -- Something else wrote the key: fail before any write rather than compute on garbage.
    if level == nil or ts == nil or (c ~= nil and (lent == nil or lent_until == nil)) then
      error({ err = 'ERR tokenlease: not a token bucket at ' .. bucket })
    end
    return level, ts, lent, lent_until
  end
  if type(stored) == 'table' and stored.err then
    local legacy = redis.call('HMGET', bucket, 'l', 't')
    if legacy[1] then return tonumber(legacy[1]), tonumber(legacy[2]) end
  end
  return nil, nil
end

-- Token bucket state at `now`: the refilled level, the stored time (nil when the bucket is
-- absent, i.e. full), and what leases hold of existing tokens and until when (heldAt(): nothing
-- once that time has passed, nor in a full bucket). Port of refill() in src/algorithms/tokenBucket.ts, same arithmetic order.
local function bucket_level(bucket, now, rate, period, burst)
  local level, ts, lent, lent_until = bucket_stored(bucket)
  if level == nil then return burst, nil, 0, now end
  local elapsed = math.max(0, now - ts)
  local refilled = math.min(burst, level + (elapsed * rate) / period)
  if lent == nil or now >= lent_until or refilled >= burst then lent, lent_until = 0, now end
  return refilled, ts, lent, lent_until
end

-- Stores `level` at `now`, with what leases hold when they hold something (written()). The key
-- expires exactly when the bucket would be full again: then absence means the same thing.
local function bucket_write(bucket, level, now, rate, period, burst, lent, lent_until)
  local value = fmt(level) .. ' ' .. fmt(now)
  if lent ~= nil and lent > 0 then value = value .. ' ' .. fmt(lent) .. ' ' .. fmt(lent_until) end
  redis.call('SET', bucket, value, 'PX', ttl_ms(math.ceil(((burst - level) * period) / rate) + 1))
end

-- What a reply says leases hold: { lent, lent_ms } as strings (lentReply()).
local function bucket_lent_reply(lent, lent_until, now)
  if lent > 0 then return fmt(lent), fmt(lent_until - now) end
  return '0', '0'
end

-- Write-behind allowance: port of allowanceFrom() in src/algorithms/allowance.ts.
local function allowance_from(room, capacity, pool, allowance, fleet, min, want)
  if allowance <= 0 or fleet < 1 or room < capacity / 2 then return 0 end
  local granted = math.min(allowance, math.floor(pool / (2 * fleet)))
  if granted < math.max(1, min, want) then return 0 end
  return granted
end

-- A window's allowance: port of windowAllowanceFrom() in src/algorithms/allowance.ts.
local function window_allowance_from(room, limit, allowance, fleet, min, want)
  return allowance_from(room, limit, room - limit / 2, allowance, fleet, min, want)
end

-- Windowed counters: ports of src/algorithms/window.ts.

-- Slice size for a grant of `min` up to `want` from `room` tokens left (grantFrom()).
local function grant_from(room, want, min)
  if room >= want then return want end
  if room >= min then return room end
  return 0
end

-- A count after a report, or nil when it stays (settled()).
local function window_settled(count, used, returned)
  if used > 0 or (returned > 0 and count > 0) then return math.max(0, count - returned) + used end
  return nil
end

-- The report and the allowance ask of a window sync, ARGV[at] to ARGV[at + 4]: tokens admitted
-- under the allowance (counted), leased tokens handed back (taken off), the index of the window
-- both belong to, the most allowance wanted, the instances sharing the limits (0: unknown).
local function window_report_args(at)
  return number_arg(at, 'used', true), number_arg(at + 1, 'returned', true), number_arg(at + 2, 'window', true),
    number_arg(at + 3, 'allowance', true), number_arg(at + 4, 'fleet', true)
end

-- The `min` of the lease a sync asks for: 0 means the whole `want` (leaseMin()).
local function lease_min(want, min)
  if min > 0 then return min end
  return want
end

-- Fixed window: ports of src/algorithms/fixedWindow.ts. A key is a hash: w = window index,
-- n = tokens counted in that window.

-- Days since 1970-01-01 -> (year, month 1..12), and back: Howard Hinnant's civil calendar
-- algorithms, the same dates JavaScript's Date.UTC gives.
local function civil_from_days(days)
  local z = days + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400
  if m <= 2 then y = y + 1 end
  return y, m
end

local function days_from_civil(y, m)
  if m <= 2 then y = y - 1 end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local doy = math.floor((153 * (m > 2 and m - 3 or m + 9) + 2) / 5)
  return era * 146097 + yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy - 719468
end

-- Index of the window containing t (windowIndex()); window_ms 0 = calendar months in UTC.
local function fixed_window_index(t, window_ms)
  if window_ms > 0 then return math.floor(t / window_ms) end
  local y, m = civil_from_days(math.floor(math.floor(t) / 86400000))
  return y * 12 + m - 1
end

-- Start in ms of window `index` (windowStart()). A first-hit index is fractional
-- (start / window_ms): rounded to the microsecond, its product is the start again rather than a
-- hair off it (which would round a whole second up in headers).
local function fixed_window_start(index, window_ms)
  if window_ms > 0 then return math.floor(index * window_ms * 1000 + 0.5) / 1000 end
  local y = math.floor(index / 12)
  return days_from_civil(y, index - y * 12 + 1) * 86400000
end

-- The window a call at `now` counts in, what the key has counted in it and how long it lasts
-- (counted()). A clock that went backwards stays in the stored window; an older stored window
-- counts as empty. first_hit: a window opens at the first grant after the last one ended.
-- A stored window more than one window after `now` is foreign (foreign()): written under another
-- window length; its count counts in the window of `now`.
local function fixed_window_counted(counter, now, window_ms, first_hit)
  local stored = redis.call('HMGET', counter, 'w', 'n')
  local window = fixed_window_index(now, window_ms)
  local used = 0
  local foreign = false
  if stored[1] then
    if first_hit then
      foreign = fixed_window_start(tonumber(stored[1]), window_ms) > now + window_ms
    else
      foreign = tonumber(stored[1]) > window + 1
    end
  end
  if foreign then
    used = tonumber(stored[2])
    if first_hit then window = now / window_ms end
  elseif first_hit then
    window = now / window_ms
    if stored[1] and now < fixed_window_start(tonumber(stored[1]) + 1, window_ms) then
      window = tonumber(stored[1])
      used = tonumber(stored[2])
    end
  elseif stored[1] then
    local stored_window = tonumber(stored[1])
    if stored_window >= window then
      window = stored_window
      used = tonumber(stored[2])
    end
  end
  local held = stored[1] ~= false and tonumber(stored[1]) == window
  local opens = first_hit and not held
  -- A window opening at this hit lasts exactly its length (its fractional index would round).
  local ms_left = fixed_window_start(window + 1, window_ms) - now
  if opens then ms_left = window_ms end
  return { window = window, used = used, ms_left = ms_left, stored = held, opens = opens }
end

-- The reply to a call that leaves room - granted in window c (answer()); refused: a slice was.
-- { granted, remaining, opens_per_ms (always 0), window, ms_left, retry_ms, reset_ms } as strings.
local function fixed_window_reply(c, room, granted, refused)
  local retry_ms, reset_ms = 0, 0
  if refused then retry_ms = c.ms_left end
  if c.used + granted > 0 then reset_ms = c.ms_left end
  return { fmt(granted), fmt(room - granted), '0', fmt(c.window), fmt(c.ms_left), fmt(retry_ms), fmt(reset_ms) }
end

-- Counts `count` in window c (counting()). The expiry is set once, when a window's first write
-- creates the key, so no later write extends it and no key ever lives without one.
local function fixed_window_write(counter, c, count)
  if c.stored then
    redis.call('HSET', counter, 'n', fmt(count))
  else
    redis.call('HSET', counter, 'w', fmt(c.window), 'n', fmt(count))
    expire_in(counter, math.ceil(c.ms_left))
  end
end

-- Sliding window counter: ports of src/algorithms/slidingWindow.ts. A key is a hash: w = current
-- window index, c = its count, p = the previous window's count. `req` holds a call's limit,
-- window_ms, want, min and ahead.

-- The counts rolled over to the window a call at `now` counts in (indexAt() and roll()): a clock
-- that went backwards stays in the stored window; counts older than the previous window are gone;
-- those of a window more than one ahead (foreign: another window length) count in this one.
local function sliding_window_counts(counts, now, window_ms)
  local stored = redis.call('HMGET', counts, 'w', 'c', 'p')
  local window = math.floor(now / window_ms)
  if stored[1] and tonumber(stored[1]) == window + 1 then window = window + 1 end
  local s = { window = window, current = 0, previous = 0, stored = false }
  if stored[1] then
    local stored_window = tonumber(stored[1])
    if stored_window == window then
      s.current, s.previous, s.stored = tonumber(stored[2]), tonumber(stored[3]), true
    elseif stored_window == window - 1 then
      s.previous = tonumber(stored[2])
    elseif stored_window > window then
      s.current, s.previous = tonumber(stored[2]), tonumber(stored[3])
    end
  end
  return s
end

-- Where counts s stand at `now` (measure()): the previous count still weighs `opening`, which
-- opens as room, linearly, until window_end.
local function sliding_window_measure(s, now, req)
  local window_end = (s.window + 1) * req.window_ms
  local opening = (s.previous * (window_end - now)) / req.window_ms
  return { window_end = window_end, opening = opening, room = req.limit - (opening + s.current), ms_left = window_end - now }
end

-- Tokens a slice may take: leasing ahead, also what opens before the window ends (reach()).
local function sliding_window_reach(m, req)
  if req.ahead then return m.room + m.opening end
  return m.room
end

-- Ms until `min` fits (msUntilRoom()): within this window the previous count's weight falls to
-- zero at window_end; after it, this window's count is the decaying one.
local function sliding_window_retry(s, now, window_end, req)
  local spare = req.limit - s.current - req.min
  if spare >= 0 and s.previous > 0 then
    return math.max(0, window_end - (req.window_ms * spare) / s.previous - now)
  end
  if spare >= 0 then return 0 end
  if s.current <= 0 then return window_end - now end
  return math.max(window_end, window_end + req.window_ms - (req.window_ms * (req.limit - req.min)) / s.current) - now
end

-- Ms until every count is gone (resetIn()).
local function sliding_window_reset(current, previous, now, window_end, window_ms)
  if current > 0 then return window_end + window_ms - now end
  if previous > 0 then return window_end - now end
  return 0
end

-- The reply to a call that granted a slice of `granted` from counts s (answer()); refused: a
-- slice was. Leasing ahead, nothing more opens in this window for a refused one.
-- { granted, remaining, opens_per_ms, window, ms_left, retry_ms, reset_ms } as strings.
local function sliding_window_reply(s, now, m, granted, refused, req)
  local remaining = math.max(0, m.room)
  if granted > 0 then remaining = m.room - granted end
  local retry = 0
  if refused then
    if req.ahead then retry = m.ms_left else retry = sliding_window_retry(s, now, m.window_end, req) end
  end
  return {
    fmt(granted), fmt(remaining), fmt(s.previous / req.window_ms), fmt(s.window), fmt(m.ms_left), fmt(retry),
    fmt(sliding_window_reset(s.current + granted, s.previous, now, m.window_end, req.window_ms)),
  }
end

-- Counts `granted` more in the current window of s (counting()). The first write of a window
-- rolls the counts over and sets the expiry once: this window's count matters until the next
-- window ends, as that window's `previous`.
local function sliding_window_write(counts, s, granted, m, window_ms)
  if s.stored then
    redis.call('HSET', counts, 'c', fmt(s.current + granted), 'p', fmt(s.previous))
  else
    redis.call('HSET', counts, 'w', fmt(s.window), 'c', fmt(s.current + granted), 'p', fmt(s.previous))
    expire_in(counts, math.ceil(m.ms_left + window_ms))
  end
end

-- Quantised sliding log: ports of src/algorithms/slidingLogQuantised.ts. A key is a hash:
-- o = oldest live bucket index, l = newest bucket index, n = total units, and one field per bucket
-- index holding its units.

-- The log's live buckets at `now`: { exists, oldest, newest, total }. With `drop`, buckets that
-- wholly left the window are deleted (the whole key when all did); without, only skipped (a read).
local function quantised_live(log, now, window_ms, quantum_ms, drop)
  local stored = redis.call('HMGET', log, 'o', 'l', 'n')
  local q = { exists = stored[1] ~= false, oldest = 0, newest = 0, total = 0 }
  if not q.exists then return q end
  q.oldest, q.newest, q.total = tonumber(stored[1]), tonumber(stored[2]), tonumber(stored[3])
  -- Buckets more than a window ahead were filed at a finer quantum (trim()): the log starts afresh.
  if q.newest * quantum_ms > now + window_ms then
    if drop then redis.call('DEL', log) end
    q.exists, q.total = false, 0
    return q
  end
  local first = math.floor((now - window_ms) / quantum_ms)
  if first <= q.oldest then return q end
  -- Stored buckets never reach more than `span` past `oldest`: past that everything is gone, and a
  -- long idle gap costs no loop.
  local span = math.ceil(window_ms / quantum_ms) + 1
  if first >= q.oldest + span then
    if drop then redis.call('DEL', log) end
    q.exists, q.total = false, 0
    return q
  end
  for b = q.oldest, first - 1 do
    local units = redis.call('HGET', log, fmt(b))
    if units then
      q.total = q.total - tonumber(units)
      if drop then redis.call('HDEL', log, fmt(b)) end
    end
  end
  q.oldest = first
  if drop then redis.call('HSET', log, 'o', fmt(q.oldest), 'n', fmt(q.total)) end
  return q
end

-- The bucket whose leaving lets `cost` more units fit: walked from the oldest live one.
local function quantised_fits_after(log, q, cost, limit)
  local need = q.total + cost - limit
  local b = q.oldest
  while need > 0 do
    need = need - (tonumber(redis.call('HGET', log, fmt(b))) or 0)
    b = b + 1
  end
  return b - 1
end

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
local function now_arg(index)
  if ARGV[index] == nil or ARGV[index] == '' then
    local t = redis.call('TIME')
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  explicit_clock = true
  return number_arg(index, 'now', true)
end

-- Sets the key's TTL to when its state stops mattering. Redis expires keys by its own clock, so
-- under an explicit (virtual) clock that may run slower than Redis's, keep keys at least a minute:
-- otherwise Redis could forget a bucket that virtual time still needs.
-- At most MAX_TTL_MS of src/algorithms/tokenBucket.ts: larger values (or a non-finite one) would
-- make PEXPIRE fail after the state was written, leaving a key that never expires.
local function expire_in(key, ms)
  if explicit_clock then ms = math.max(ms, 60000) end
  if not (ms <= 1e13) then ms = 1e13 end
  redis.call('PEXPIRE', key, ms)
end

-- Doubles survive a round trip through a Redis string only with 17 significant digits.
local function fmt(x)
  return string.format('%.17g', x)
end

-- Token bucket state at `now`: the refilled level and the stored time (nil when the bucket is
-- absent, i.e. full). Port of refill() in src/algorithms/tokenBucket.ts, same arithmetic order.
local function bucket_level(bucket, now, rate, period, burst)
  local stored = redis.call('HMGET', bucket, 'l', 't')
  if not stored[1] then return burst, nil end
  local ts = tonumber(stored[2])
  local elapsed = math.max(0, now - ts)
  return math.min(burst, tonumber(stored[1]) + (elapsed * rate) / period), ts
end

-- Concurrency slots: trim expired slots, then grant up to `want` slots (at least `min`, else none)
-- of the `limit`, each with its own expiry — one atomic step. Slots of a holder that died expire
-- `ttl_ms` after their last renewal. Port of acquire() in src/algorithms/concurrency.ts.
--
-- KEYS[1]  zset  slots: member = slot id `<owner>:<n>`, score = expiry time in ms
-- Returns  { granted, held, retry_ms } as strings.

local slots = KEYS[1]
local limit = number_arg(1, 'limit', false)    -- most slots held at once
local want = number_arg(2, 'want', false)      -- slots wanted (a block handed out locally)
local min = number_arg(3, 'min', false)        -- fewest slots worth granting
local ttl = number_arg(4, 'ttl_ms', false)     -- ms a slot lives without renewal
local owner = ARGV[5]                          -- id prefix unique to the caller
local first = number_arg(6, 'first', true)     -- number of the first slot id granted
local now = now_arg(7)                         -- ms

if owner == nil or owner == '' then error({ err = 'ERR tokenlease: invalid owner' }) end
if want ~= math.floor(want) or min ~= math.floor(min) then
  error({ err = 'ERR tokenlease: invalid want/min ' .. ARGV[2] .. '/' .. ARGV[3] })
end

redis.call('ZREMRANGEBYSCORE', slots, '-inf', fmt(now))
local held = redis.call('ZCARD', slots)
local free = limit - held
local granted = 0
if free >= want then granted = want elseif free >= min then granted = free end

if granted == 0 then
  local retry = 0
  if held > 0 then
    local earliest = redis.call('ZRANGE', slots, 0, 0, 'WITHSCORES')
    retry = tonumber(earliest[2]) - now
  end
  return { '0', tostring(held), fmt(retry) }
end

local expiry = fmt(now + ttl)
for i = 0, granted - 1 do
  redis.call('ZADD', slots, expiry, owner .. ':' .. fmt(first + i))
end
-- The key lives as long as its last slot.
local last = redis.call('ZRANGE', slots, -1, -1, 'WITHSCORES')
expire_in(slots, math.ceil(tonumber(last[2]) - now))
return { fmt(granted), tostring(held + granted), '0' }

-- Concurrency slot renewal: a holder still using its slots pushes their expiry to now + ttl_ms.
-- Slots that already expired are not recreated (another caller may have taken their place); their
-- ids are returned so the holder knows it lost them. Port of renew() in src/algorithms/concurrency.ts.
--
-- KEYS[1]  zset  slots: member = slot id `<owner>:<n>`, score = expiry time in ms
-- ARGV     ttl_ms, then the slot ids, then the store's clock (the last argument)
-- Returns  the ids that were lost.

local slots = KEYS[1]
local ttl = number_arg(1, 'ttl_ms', false)  -- ms a renewed slot lives
local now = now_arg(#ARGV)                  -- ms
-- ARGV[2 .. #ARGV - 1] are the slot ids.

redis.call('ZREMRANGEBYSCORE', slots, '-inf', fmt(now))
local expiry = fmt(now + ttl)
local lost = {}
for i = 2, #ARGV - 1 do
  if redis.call('ZSCORE', slots, ARGV[i]) then
    redis.call('ZADD', slots, 'XX', expiry, ARGV[i])
  else
    lost[#lost + 1] = ARGV[i]
  end
end
if redis.call('ZCARD', slots) > 0 then
  local last = redis.call('ZRANGE', slots, -1, -1, 'WITHSCORES')
  expire_in(slots, math.ceil(tonumber(last[2]) - now))
end
return lost

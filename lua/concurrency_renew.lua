-- Concurrency slot renewal: a holder still using its slots pushes their expiry to now + ttl_ms.
-- A slot the store no longer has (it lost its data, or the holder stalled past the slot's expiry)
-- is put back while fewer than `limit` are held: its request is still running. The ids that did
-- not fit are returned so the holder knows it lost them. Port of renew() in
-- src/algorithms/concurrency.ts.
--
-- KEYS[1]  zset  slots: member = slot id `<owner>:<n>`, score = expiry time in ms
-- ARGV     ttl_ms, limit, then the slot ids, then the store's clock (the last argument)
-- Returns  the ids that were lost.

local slots = KEYS[1]
local ttl = number_arg(1, 'ttl_ms', false)   -- ms a renewed slot lives
local limit = number_arg(2, 'limit', false)  -- most slots held at once
local now = now_arg(#ARGV)                   -- ms
-- ARGV[3 .. #ARGV - 1] are the slot ids.

redis.call('ZREMRANGEBYSCORE', slots, '-inf', fmt(now))
local expiry = fmt(now + ttl)
local lost = {}
for i = 3, #ARGV - 1 do
  if redis.call('ZSCORE', slots, ARGV[i]) or redis.call('ZCARD', slots) < limit then
    redis.call('ZADD', slots, expiry, ARGV[i])
  else
    lost[#lost + 1] = ARGV[i]
  end
end
if redis.call('ZCARD', slots) > 0 then
  local last = redis.call('ZRANGE', slots, -1, -1, 'WITHSCORES')
  expire_in(slots, math.ceil(tonumber(last[2]) - now))
end
return lost

-- Concurrency slot release: frees the given slots (ids that expired already are ignored).
-- Port of release() in src/algorithms/concurrency.ts.
--
-- KEYS[1]  zset  slots: member = slot id `<owner>:<n>`, score = expiry time in ms
-- ARGV     the slot ids, then the store's clock (the last argument)
-- Returns  the number of slots still held, as a string.

local slots = KEYS[1]
local now = now_arg(#ARGV)  -- ms
-- ARGV[1 .. #ARGV - 1] are the slot ids.

redis.call('ZREMRANGEBYSCORE', slots, '-inf', fmt(now))
for i = 1, #ARGV - 1 do
  redis.call('ZREM', slots, ARGV[i])
end
local held = redis.call('ZCARD', slots)
if held > 0 then
  local last = redis.call('ZRANGE', slots, -1, -1, 'WITHSCORES')
  expire_in(slots, math.ceil(tonumber(last[2]) - now))
end
return tostring(held)

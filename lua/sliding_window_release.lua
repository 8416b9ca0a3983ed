-- Sliding window counter lease return: unused tokens go back to the window they were granted in —
-- its current count while it lasts, its previous count during the next window, nowhere after.
-- Port of release() in src/algorithms/slidingWindow.ts. The key keeps the expiry its window set.
--
-- KEYS[1]  hash  counts: w = current window index, c = its count, p = the previous window's count
-- Returns  nothing. (ARGV[3], the store's clock, is not needed: the window index says it all.)

local counts = KEYS[1]
local window = number_arg(1, 'window', true)  -- index of the window the tokens came from
local tokens = number_arg(2, 'tokens', true)  -- unused tokens handed back

local stored = redis.call('HMGET', counts, 'w', 'c', 'p')
if not stored[1] then return false end
local stored_window = tonumber(stored[1])
if stored_window == window then
  redis.call('HSET', counts, 'c', fmt(math.max(0, tonumber(stored[2]) - tokens)))
elseif stored_window == window + 1 then
  redis.call('HSET', counts, 'p', fmt(math.max(0, tonumber(stored[3]) - tokens)))
end
return false

-- Fixed window lease return: unused tokens of a slice go back to the window they were granted in,
-- and only to it (a slice of an earlier window must not raise the next window's quota).
-- Port of release() in src/algorithms/fixedWindow.ts. The key keeps the expiry its window set.
--
-- KEYS[1]  hash  counter: w = window index, n = tokens counted in that window
-- Returns  nothing. (ARGV[3], the store's clock, is not needed: the window index says it all.)

local counter = KEYS[1]
local window = number_arg(1, 'window', true)  -- index of the window the tokens came from
local tokens = number_arg(2, 'tokens', true)  -- unused tokens handed back

local stored = redis.call('HMGET', counter, 'w', 'n')
if not stored[1] or tonumber(stored[1]) ~= window then return false end
redis.call('HSET', counter, 'n', fmt(math.max(0, tonumber(stored[2]) - tokens)))
return false

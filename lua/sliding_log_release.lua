-- Sliding log refund: removes the entries of one admitted request (a multi-rule check that another
-- rule refused). Port of release() in src/algorithms/slidingLog.ts. The key keeps its expiry: at
-- worst it outlives its entries, and expired entries count for nothing.
--
-- KEYS[1]  zset  log: one member per admitted unit, `<request id>:<i>`, scored by its time in ms
-- Returns  nothing. (ARGV[3], the store's clock, is not needed.)

local log = KEYS[1]
local cost = number_arg(1, 'cost', false)  -- whole units the request was admitted with
local id = ARGV[2]                         -- the request's id

if cost ~= math.floor(cost) then error({ err = 'ERR tokenlease: invalid cost ' .. ARGV[1] }) end
if id == nil or id == '' then error({ err = 'ERR tokenlease: invalid id' }) end

local members = {}
for i = 1, cost do
  members[#members + 1] = id .. ':' .. i
  if #members >= 1000 or i == cost then
    redis.call('ZREM', log, unpack(members))
    members = {}
  end
end
return false

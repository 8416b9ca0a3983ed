-- One instance's heartbeat: records it and counts the instances that beat within the window.
-- Port of heartbeat() in src/algorithms/fleet.ts.
--
-- KEYS[1]  zset  fleet: member = instance id, score = store time of its last beat in ms
-- Returns  the number of instances in the fleet, this one included

local fleet = KEYS[1]
local id = ARGV[1]                                  -- the beating instance
local window = number_arg(2, 'window_ms', false)    -- an instance counts while younger than this
local now = now_arg(3)                              -- ms

if type(id) ~= 'string' or id == '' then
  error({ err = 'ERR tokenlease: invalid id ' .. tostring(id) })
end
redis.call('ZADD', fleet, now, id)
redis.call('ZREMRANGEBYSCORE', fleet, '-inf', now - window)
local count = redis.call('ZCARD', fleet)
expire_in(fleet, window)
return count

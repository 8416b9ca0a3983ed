-- A plain per-request token bucket, as commonly written: one EVALSHA per decision, no leases.
-- The benches' stand-in for "the same design without leases".
-- KEYS[1] = bucket:{api_key}; ARGV = rate, burst, cost
local t = redis.call('TIME')
local now = t[1] + t[2] / 1e6
local b = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(b[1]) or tonumber(ARGV[2])
local ts = tonumber(b[2]) or now
tokens = math.min(tonumber(ARGV[2]), tokens + (now - ts) * tonumber(ARGV[1]))
local ok = tokens >= tonumber(ARGV[3])
if ok then tokens = tokens - tonumber(ARGV[3]) end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', now)
redis.call('EXPIRE', KEYS[1], 3600)
return ok and 1 or 0

-- Runs many operations, each on its own key, in one call: the store dialogue of many keys in one
-- round trip. The loader (src/scripts.ts) prepends the prelude and `run_op(name)`, which runs the
-- operation script of lua/ by that name (UNKNOWN_OPERATION: none); each one sees KEYS and ARGV as if
-- it had been called alone.
-- Each operation is atomic (the whole batch is); one failing operation fails only itself.
--
-- KEYS[i]  the key of operation i (all in one Cluster slot: the store groups them)
-- ARGV     for each operation in order: its script name, its argument count c, then c arguments
-- Returns  for each operation { 1, reply } or { 0, error message }

local replies = {}
local at = 1
for i = 1, #BATCH_KEYS do
  local name = BATCH_ARGV[at]
  local count = tonumber(BATCH_ARGV[at + 1])
  if count == nil then
    error({ err = 'ERR tokenlease: malformed batch at operation ' .. i })
  end
  local args = {}
  for j = 1, count do args[j] = BATCH_ARGV[at + 1 + j] end
  at = at + 2 + count
  KEYS = { BATCH_KEYS[i] }
  ARGV = args
  explicit_clock = false
  local ok, reply = pcall(run_op, name)
  if ok and reply == UNKNOWN_OPERATION then
    replies[i] = { 0, 'ERR tokenlease: unknown operation ' .. tostring(name) }
  elseif ok then
    replies[i] = { 1, reply }
  elseif type(reply) == 'table' and reply.err then
    replies[i] = { 0, reply.err }
  else
    replies[i] = { 0, tostring(reply) }
  end
end
return replies

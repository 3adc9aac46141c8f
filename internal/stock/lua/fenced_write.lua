-- fenced_write.lua: write the new stock and count the sale, but only if the
-- writer's token is still the highest one seen for this backend.
--
-- KEYS[1] stock key
-- KEYS[2] lucky key            (number of successful sales)
-- KEYS[3] fence key            (hash: backend, token; see fenced_read.lua)
-- ARGV[1] backend name
-- ARGV[2] fencing token        (decimal uint64)
-- ARGV[3] new stock value      (decimal int64)
--
-- Returns 0 = written, 1 = fenced, 2 = mixed backends. Nothing is written
-- unless it returns 0.
--
-- "Still the highest" means equal to the recorded token: the writer's own
-- fenced read recorded it, so anything else means a newer holder has read
-- since (A reads, B reads, A writes) or a reset wiped the fence in between.
-- Both make the writer's view of the stock stale.

local fence = redis.call('HMGET', KEYS[3], 'backend', 'token')
local backend, highest = fence[1], fence[2]

if backend and backend ~= ARGV[1] then
  return 2
end
if highest ~= ARGV[2] then
  return 1
end

redis.call('SET', KEYS[1], ARGV[3])
redis.call('INCR', KEYS[2])
return 0

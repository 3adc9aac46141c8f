-- release.lua: drop one hold of a reentrant hash lock; free it at zero.
--
-- KEYS[1]  the lock hash {owner-id: hold-count}
-- ARGV[1]  owner id
-- ARGV[2]  TTL in milliseconds, restored while holds remain (as Redisson does)
-- ARGV[3]  the lock's pub/sub channel (not a key: PUBLISH touches no keyspace)
-- ARGV[4]  message published when the lock becomes free
--
-- Returns the remaining hold count (> 0 still held), 0 when the lock was
-- deleted and the release published, -1 when the owner does not hold it.
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return -1
end
local holds = redis.call('hincrby', KEYS[1], ARGV[1], -1)
if holds > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return holds
end
redis.call('del', KEYS[1])
redis.call('publish', ARGV[3], ARGV[4])
return 0

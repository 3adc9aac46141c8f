-- release.lua: drop one hold of a reentrant hash lock; free it at zero.
--
-- KEYS[1]  the lock hash {owner-id: hold-count}
-- ARGV[1]  owner id
-- ARGV[2]  TTL in milliseconds, restored while holds remain (as Redisson does)
-- ARGV[3]  the lock's pub/sub channel (not a key: PUBLISH touches no keyspace)
-- ARGV[4]  message published when the lock becomes free
-- ARGV[5]  "" for a plain release; for a yield (the releasing Locker's own
--          goroutines still wait), how many of the subscribers are the
--          releasing Locker's own connection: "0" or "1"
--
-- Returns the remaining hold count (> 0 still held), 0 when the lock was
-- deleted and the release published, -1 when the owner does not hold it, and
-- -2 when a yield was published to a connection other than the Locker's own.
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return -1
end
local holds = redis.call('hincrby', KEYS[1], ARGV[1], -1)
if holds > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return holds
end
redis.call('del', KEYS[1])
local heard = redis.call('publish', ARGV[3], ARGV[4])
if ARGV[5] ~= '' and heard > tonumber(ARGV[5]) then
  return -2
end
return 0

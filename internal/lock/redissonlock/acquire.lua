-- acquire.lua: take, or re-enter, a Redisson-style reentrant hash lock.
--
-- KEYS[1]  the lock: a hash {owner-id: hold-count} with a TTL
-- KEYS[2]  the fencing counter "<key>:fence", INCRed only on a first acquisition
-- ARGV[1]  TTL in milliseconds, set on the hash whenever it is taken or re-entered
-- ARGV[2]  owner id "<locker-uuid>:<acquisition-seq>"
-- ARGV[3]  "1" = re-entry only (Lease.Reacquire): never take a lock the owner
--          does not hold already, so a lost lease cannot silently come back
--
-- Returns {1, fencing-token} on a first acquisition, {2, hold-count} on a
-- re-entry, {0, pttl} when another owner holds the lock, and {-1, 0} when a
-- re-entry found the owner no longer holding it.
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  local holds = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {2, holds}
end
if ARGV[3] == '1' then
  return {-1, 0}
end
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {1, redis.call('incr', KEYS[2])}
end
return {0, redis.call('pttl', KEYS[1])}

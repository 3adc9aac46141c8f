-- forceunlock.lua: operator override; frees the lock whoever holds it.
--
-- KEYS[1]  the lock hash {owner-id: hold-count}
-- ARGV[1]  the lock's pub/sub channel (not a key)
-- ARGV[2]  message published when a lock was deleted
--
-- Returns 1 when a lock was deleted (and waiters notified), 0 when it was free.
if redis.call('del', KEYS[1]) == 1 then
  redis.call('publish', ARGV[1], ARGV[2])
  return 1
end
return 0

-- renew.lua: the watchdog's heartbeat; extends the TTL only for the owner.
--
-- KEYS[1]  the lock hash {owner-id: hold-count}
-- ARGV[1]  owner id
-- ARGV[2]  TTL in milliseconds
--
-- Returns 1 when renewed, 0 when the owner no longer holds the lock.
if redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 1
end
return 0

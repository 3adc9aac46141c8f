-- Renew: extend the lock's TTL if the caller still owns it.
--   KEYS[1] the lock
--   ARGV[1] owner value
--   ARGV[2] TTL in ms
-- Returns 1 when extended, 0 when the caller no longer owns the lock.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0

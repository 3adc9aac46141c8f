-- transfer.lua: the final release of a hold that hands the lock straight to
-- another owner of the same Locker (a waiting goroutine) in the same step.
--
-- KEYS[1]  the lock hash {owner-id: hold-count}
-- KEYS[2]  the fencing counter "<key>:fence", INCRed for the new owner
-- ARGV[1]  current owner id
-- ARGV[2]  new owner id, minted by the same Locker
-- ARGV[3]  TTL in milliseconds for the new owner (or the remaining holds)
-- ARGV[4]  the lock's pub/sub channel (not a key)
-- ARGV[5]  message published when the lock is released instead ("yield")
-- ARGV[6]  "1" when the Locker's run of local hand-offs reached its bound:
--          then hand over only if no other process listens on the channel
--          (PUBSUB NUMSUB counts connections; the caller's own is one)
--
-- Returns {1, fencing-token} when the new owner holds the lock, {2, holds}
-- when the current owner still has holds left (nothing handed over), {0, 0}
-- when the lock was deleted and the yield published, and {-1, 0} when the
-- current owner does not hold the lock.
--
-- A hand-off is idempotent per attempt: the new owner id is minted for this
-- call, so when the current owner is gone but the new one holds the lock, an
-- earlier run of the same call (its reply lost, the client retried) made the
-- hand-off, and this run returns its result; the fence still holds the new
-- owner's token (or a value AdvanceTokens set meanwhile, which a fence
-- refuses). A retried yield answers {-1, 0}: the lock is free either way.
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    return {1, tonumber(redis.call('get', KEYS[2]))}
  end
  return {-1, 0}
end
local holds = redis.call('hincrby', KEYS[1], ARGV[1], -1)
if holds > 0 then
  redis.call('pexpire', KEYS[1], ARGV[3])
  return {2, holds}
end
if ARGV[6] == '1' and redis.call('pubsub', 'numsub', ARGV[4])[2] > 1 then
  redis.call('del', KEYS[1])
  redis.call('publish', ARGV[4], ARGV[5])
  return {0, 0}
end
redis.call('hdel', KEYS[1], ARGV[1])
redis.call('hset', KEYS[1], ARGV[2], 1)
redis.call('pexpire', KEYS[1], ARGV[3])
return {1, redis.call('incr', KEYS[2])}

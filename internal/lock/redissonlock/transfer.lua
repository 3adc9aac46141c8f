-- transfer.lua: the final release of a hold that hands the lock straight to
-- another owner of the same Locker (a waiting goroutine) in the same step.
--
-- KEYS[1]  the lock hash {owner-id: hold-count}
-- KEYS[2]  the fencing counter "<key>:fence", INCRed for the new owner
-- ARGV[1]  current owner id
-- ARGV[2]  new owner id, minted by the same Locker
-- ARGV[3]  TTL in milliseconds for the new owner
--
-- Returns {1, fencing-token} when the new owner holds the lock, {2, holds}
-- when the current owner has more than one hold (nothing changed: not a
-- final release), and {-1, 0} when the current owner does not hold the lock.
--
-- A hand-off is idempotent per attempt: the new owner id is minted for this
-- call, so when the current owner is gone but the new one holds the lock, an
-- earlier run of the same call (its reply lost, the client retried) made the
-- hand-off, and this run returns its result; the fence still holds the new
-- owner's token (or a value AdvanceTokens set meanwhile, which a fence
-- refuses).
local holds = tonumber(redis.call('hget', KEYS[1], ARGV[1]))
if not holds then
  if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    return {1, tonumber(redis.call('get', KEYS[2]))}
  end
  return {-1, 0}
end
if holds > 1 then
  return {2, holds}
end
redis.call('hdel', KEYS[1], ARGV[1])
redis.call('hset', KEYS[1], ARGV[2], 1)
redis.call('pexpire', KEYS[1], ARGV[3])
return {1, redis.call('incr', KEYS[2])}

-- acquire.lua: take, or re-enter, a Redisson-style reentrant hash lock.
--
-- KEYS[1]  the lock: a hash {owner-id: hold-count} with a TTL
-- KEYS[2]  the fencing counter "<key>:fence", INCRed only on a first acquisition
-- ARGV[1]  TTL in milliseconds, set on the hash whenever it is taken or re-entered
-- ARGV[2]  owner id "<locker-uuid>:<acquisition-seq>"
-- ARGV[3]  "1" = re-entry only (Lease.Reacquire): never take a lock the owner
--          does not hold already, so a lost lease cannot silently come back
-- ARGV[4]  the hold count this attempt makes: "1" for a first acquisition,
--          the lease's count + 1 for a re-entry
--
-- Returns {1, fencing-token} on a first acquisition, {2, hold-count} on a
-- re-entry, {0, pttl} when another owner holds the lock, and {-1, 0} when a
-- re-entry found the owner no longer holding it.
--
-- Idempotent per attempt: a second run of one call (a client retry after a
-- lost reply) finds the count ARGV[4] already made and returns the first
-- run's result without adding a hold. A first acquisition's owner id is new,
-- so a field of it can only come from an earlier run of the same attempt;
-- while that owner holds the lock nobody else INCRs the fence, so the fence
-- still holds its token (unless AdvanceTokens moved it meanwhile: then the
-- answer is the advanced value, at or below the mark, which a fence
-- refuses). Such a field with any other count is answered {2, count}, which
-- the caller treats as unexpected and abandons.
local holds = tonumber(redis.call('hget', KEYS[1], ARGV[2]))
local want = tonumber(ARGV[4])
if holds then
  if ARGV[3] ~= '1' then
    if holds ~= want then
      return {2, holds}
    end
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, tonumber(redis.call('get', KEYS[2]))}
  end
  if holds < want then
    holds = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  end
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

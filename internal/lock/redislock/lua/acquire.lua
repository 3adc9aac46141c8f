-- Acquire: take the lock if it is free and no live waiter is ahead, otherwise
-- join (or stay in) the queue. KEYS as in queue.lua.
--   ARGV[1] owner value, unique per acquisition
--   ARGV[2] lock TTL in ms
--   ARGV[3] how long the queue entry stays live without another call, in ms
-- Returns {1, token, pttl} when the caller took the lock now, {2, token, pttl}
-- when a release had already handed it to the caller (whose message is still
-- on its way), or {0, pttl} when it waits, pttl being the current holder's
-- remaining TTL.
local owner, ttl, life = ARGV[1], ARGV[2], tonumber(ARGV[3])

-- Uncontended fast path: the queue key exists only while someone waits (its
-- last entry's removal deletes it, and it expires with its entries), so
-- without it there is nobody to let go first and nothing of ours to
-- dequeue: one SET NX takes a free lock. If the lock is not free (held, or
-- handed to us by a release), the full path below decides.
if redis.call('EXISTS', queueKey) == 0 and redis.call('SET', lockKey, owner, 'NX', 'PX', ttl) then
  return {1, redis.call('INCR', fenceKey), tonumber(ttl)}
end

local cur = redis.call('GET', lockKey)
if cur == owner then
  -- Handed over: the fencing counter still holds this owner's token, since
  -- no acquisition can have happened while it owns the lock.
  return {2, tonumber(redis.call('GET', fenceKey)), redis.call('PTTL', lockKey)}
end
if not cur then
  local head, headTTL = nextLive()
  if not head or head == owner then
    dequeue(owner)
    redis.call('SET', lockKey, owner, 'PX', ttl)
    return {1, redis.call('INCR', fenceKey), tonumber(ttl)}
  end
  -- Free, but others were here first (the holder expired or was deleted):
  -- the first of them gets it, so a newcomer cannot barge the queue.
  grant(head, headTTL)
end

local now = nowMs()
local last = redis.call('ZRANGE', queueKey, -1, -1, 'WITHSCORES')
redis.call('ZADD', queueKey, 'NX', (tonumber(last[2]) or 0) + 1, owner)
redis.call('HSET', entryKey, owner, string.format('%.0f:%s', now + life, ttl))
-- Every entry's deadline is at most now+life, so the queue cleans itself up
-- when all its waiters are gone.
redis.call('PEXPIRE', queueKey, life)
redis.call('PEXPIRE', entryKey, life)
return {0, redis.call('PTTL', lockKey)}

-- Release: leave the queue and, if the caller holds the lock, hand it to the
-- next live waiter (or delete it when nobody waits). A waiter that gives up
-- calls it too, which also passes on a lock handed to it in the meantime.
-- KEYS as in queue.lua.
--   ARGV[1] owner value
-- Returns 1 when handed over, 0 when freed, -1 when the caller did not hold
-- the lock (expired, deleted, or it was only waiting).
local owner = ARGV[1]
if redis.call('EXISTS', queueKey) == 0 then
  -- Nobody waits and the caller is not queued (see acquire.lua's fast
  -- path): free the lock if it is the caller's, with no queue work.
  if redis.call('GET', lockKey) ~= owner then
    return -1
  end
  redis.call('DEL', lockKey)
  return 0
end
dequeue(owner)
if redis.call('GET', lockKey) ~= owner then
  return -1
end
local head, ttl = nextLive()
if head then
  grant(head, ttl)
  return 1
end
redis.call('DEL', lockKey)
return 0

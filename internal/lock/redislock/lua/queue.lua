-- Shared by acquire.lua and release.lua (prepended to each), which take the
-- same KEYS, all under one hash tag so they live in one cluster slot:
--   KEYS[1] the lock: a string holding the owner value, with a PX expiry
--   KEYS[2] the fencing counter: INCR once per acquisition, never expires
--   KEYS[3] the waiter queue: sorted set, member = owner, score = arrival order
--   KEYS[4] the waiter entries: hash, owner -> "<deadline ms>:<ttl ms>"
-- An owner value is "<locker instance id>:<sequence>"; the instance id names
-- the pub/sub channel "redislock:<instance id>" of the process that waits.
local lockKey, fenceKey, queueKey, entryKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]

-- Server time, so every process's queue deadline is judged by one clock.
local function nowMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function dequeue(owner)
  redis.call('ZREM', queueKey, owner)
  redis.call('HDEL', entryKey, owner)
end

-- nextLive drops waiters whose entry lapsed (crashed or gone without saying
-- so) from the front of the queue and returns the first live one and its TTL.
local function nextLive()
  local now
  while true do
    local head = redis.call('ZRANGE', queueKey, 0, 0)[1]
    if not head then
      return nil
    end
    now = now or nowMs()
    local entry = redis.call('HGET', entryKey, head)
    if entry then
      local deadline, ttl = string.match(entry, '^(%d+):(%d+)$')
      if deadline and tonumber(deadline) > now then
        return head, ttl
      end
    end
    dequeue(head)
  end
end

-- grant makes waiter the owner and tells its process, which then holds the
-- lock without another round trip.
local function grant(waiter, ttl)
  dequeue(waiter)
  redis.call('SET', lockKey, waiter, 'PX', ttl)
  local token = redis.call('INCR', fenceKey)
  local instance = string.match(waiter, '^(.*):[^:]*$')
  redis.call('PUBLISH', 'redislock:' .. instance, waiter .. ' ' .. token)
  return token
end

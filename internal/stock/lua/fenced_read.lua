-- fenced_read.lua: read the stock under a lease, recording the lease as the
-- fence's current reader.
--
-- KEYS[1] stock key            (integer string; missing = 0, i.e. not reset yet)
-- KEYS[2] fence key            (hash: lock = identity, token = highest token
--                               seen, lease = the reader that recorded it)
-- ARGV[1] lock identity        (backend/lock key: tokens of other locks do not compare)
-- ARGV[2] fencing token        (decimal uint64, no leading zeros)
-- ARGV[3] lease id             (unique per acquisition: one sale's attempt id)
--
-- Returns {status, stock, highest}: status 0 = ok, 1 = stale (a higher token
-- was already seen; highest says which, so the caller can move a lock that
-- forgot its counter past it), 2 = mixed (the fence belongs to another
-- lock), 3 = collision (another lease read under the same token: the lock
-- service handed one token out twice, so it lost state; both are refused).
-- On status 1 or 2 the fence is left untouched.
--
-- Idempotent: a second run for the same lease (a retry after a lost reply)
-- finds its own lease recorded and answers as the first run did, unless a
-- newer reader came in between — then it is refused, as it must be.

-- Tokens are uint64; Lua numbers are doubles and lose precision above 2^53,
-- so compare the canonical decimal strings: longer is larger, then bytewise.
local function less(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end

local fence = redis.call('HMGET', KEYS[2], 'lock', 'token', 'lease')
local ident, highest, lease = fence[1], fence[2], fence[3]

if ident and ident ~= ARGV[1] then
  return {2, 0, highest or ''}
end
if highest then
  if less(ARGV[2], highest) then
    return {1, 0, highest}
  end
  if ARGV[2] == highest and lease ~= ARGV[3] then
    -- Poison the token: the lease that recorded it can no longer write
    -- either, and every later reader under it is refused the same way.
    redis.call('HSET', KEYS[2], 'lease', '!collision')
    return {3, 0, highest}
  end
end

redis.call('HSET', KEYS[2], 'lock', ARGV[1], 'token', ARGV[2], 'lease', ARGV[3])
local stock = tonumber(redis.call('GET', KEYS[1]) or '0')
return {0, stock, ARGV[2]}

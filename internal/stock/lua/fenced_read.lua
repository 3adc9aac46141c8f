-- fenced_read.lua: read the stock under a lease, recording its fencing token.
--
-- KEYS[1] stock key            (integer string; missing = 0, i.e. not reset yet)
-- KEYS[2] fence key            (hash: backend = name, token = highest token seen)
-- ARGV[1] backend name         (tokens of different backends do not compare)
-- ARGV[2] fencing token        (decimal uint64, no leading zeros)
--
-- Returns {status, stock}: status 0 = ok, 1 = fenced (a higher token was
-- already seen), 2 = mixed backends (the fence belongs to another backend).
-- On status 1 or 2 the fence is left untouched.

-- Tokens are uint64; Lua numbers are doubles and lose precision above 2^53,
-- so compare the canonical decimal strings: longer is larger, then bytewise.
local function less(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end

local fence = redis.call('HMGET', KEYS[2], 'backend', 'token')
local backend, highest = fence[1], fence[2]

if backend and backend ~= ARGV[1] then
  return {2, 0}
end
if highest and less(ARGV[2], highest) then
  return {1, 0}
end

redis.call('HSET', KEYS[2], 'backend', ARGV[1], 'token', ARGV[2])
local stock = tonumber(redis.call('GET', KEYS[1]) or '0')
return {0, stock}

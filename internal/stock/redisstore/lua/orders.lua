-- orders.lua: read orders of the ledger at one instant (Store.Order,
-- Store.OrdersByUser).
--
-- KEYS[1] order index hash     (order id -> stream entry id)
-- KEYS[2] orders stream
-- KEYS[3] per-user sorted set  (members "user count id", scores 0; see ledger.lua)
-- KEYS[4] sale id
-- ARGV[1] 'id' or 'user'
-- 'id':   ARGV[2..] order ids
-- 'user': ARGV[2] user, ARGV[3] offset, ARGV[4] limit
--
-- Returns {total, sale, entry...}: each entry as XRANGE gives it ({entry
-- id, {field, value, ...}}), or the order id itself when the stream has
-- no entry for it (trimmed once stored, trim.lua; or no such order);
-- total is the user's order count ('user'), or the number of ids asked
-- ('id'); sale is the current sale's id ('' if none).

local ids = {}
local total
if ARGV[1] == 'user' then
  local u = ARGV[2]
  -- Users are printable ASCII without spaces: '!' is the smallest byte
  -- that can follow a user's own members' "user ".
  local lo, hi = '[' .. u .. ' ', '(' .. u .. '!'
  total = redis.call('ZLEXCOUNT', KEYS[3], lo, hi)
  local ms = redis.call('ZRANGEBYLEX', KEYS[3], lo, hi, 'LIMIT', ARGV[3], ARGV[4])
  for i, m in ipairs(ms) do
    ids[i] = string.match(m, '(%S+)$')
  end
else
  for i = 2, #ARGV do
    ids[#ids + 1] = ARGV[i]
  end
  total = #ids
end

local out = {total, redis.call('GET', KEYS[4]) or ''}
for i, id in ipairs(ids) do
  local entry = redis.call('HGET', KEYS[1], id)
  local found = id
  if entry then
    local r = redis.call('XRANGE', KEYS[2], entry, entry)
    if r[1] then
      found = r[1]
    end
  end
  out[i + 2] = found
end
return out

-- fenced_write.lua: write the new stock and count the sale, exactly once,
-- and only if the writer's lease is still the fence's current reader.
--
-- KEYS[1] stock key
-- KEYS[2] lucky key            (number of successful sales)
-- KEYS[3] fence key            (hash: lock, token, lease; see fenced_read.lua)
-- KEYS[4] receipt key          (this lease's receipt: exists once it has sold)
-- ARGV[1] lock identity
-- ARGV[2] fencing token        (decimal uint64)
-- ARGV[3] lease id
-- ARGV[4] new stock value      (decimal int64)
-- ARGV[5] receipt TTL in ms    (longer than any retry of this write)
-- ARGV[6] units sold           (optional, default 1: a combined sale of a
--                               batch of buyers, Store.WriteBatch)
--
-- Returns 0 = written (now or by an earlier run of the same lease), 1 =
-- fenced, 2 = mixed, 3 = collision, 4 = the lucky key holds a non-integer
-- (int.lua's readInt: checked first, since INCRBY failing after the SET
-- would leave a unit gone and no sale counted). Nothing is written unless
-- it returns 0.
--
-- "Still the current reader" means lock, token and lease all equal what the
-- writer's own fenced read recorded: every accepted read records its own
-- unique lease, so anything else means another reader came in between (A
-- reads, B reads, A writes), a reset wiped the fence, or the token was
-- handed out twice. The check is a compare-and-set on the whole
-- read-modify-write: it holds even if tokens lie.
--
-- The receipt makes a retry after a lost reply return the first run's
-- answer instead of selling twice (go-redis retries on a read timeout and
-- on EOF; the service retries too, with the same lease id). It holds the
-- new stock, and for a batch ":units" after it, so that each member of the
-- batch can learn whether it was among the units sold.

if redis.call('EXISTS', KEYS[4]) == 1 then
  return 0
end

local fence = redis.call('HMGET', KEYS[3], 'lock', 'token', 'lease')
local ident, highest, lease = fence[1], fence[2], fence[3]

if ident and ident ~= ARGV[1] then
  return 2
end
if highest ~= ARGV[2] then
  return 1
end
if lease ~= ARGV[3] then
  if lease == '!collision' then
    return 3
  end
  return 1
end

if not readInt(KEYS[2]) then
  return 4
end

local units = tonumber(ARGV[6] or '1')
local receipt = ARGV[4]
if units ~= 1 then
  receipt = ARGV[4] .. ':' .. ARGV[6]
end
redis.call('SET', KEYS[1], ARGV[4])
redis.call('INCRBY', KEYS[2], units)
redis.call('SET', KEYS[4], receipt, 'PX', ARGV[5])
return 0

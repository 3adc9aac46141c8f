-- fenced_read.lua: read the stock under a lease, recording the lease as the
-- fence's current reader.
--
-- KEYS[1] stock key            (integer string; missing = the sale is lost, R.lost)
-- KEYS[2] fence key            (hash: lock = identity, token = highest token
--                               seen, lease = the reader that recorded it)
-- ARGV[1] lock identity        (backend/lock key: tokens of other locks do not compare)
-- ARGV[2] fencing token        (decimal uint64, no leading zeros)
-- ARGV[3] lease id             (unique per acquisition: one sale's attempt id)
-- ARGV[4] quiet period in ms   (0 = never; see "Restarting the fence")
-- KEYS[3], KEYS[4], KEYS[5], ARGV[5], ARGV[6]: the epoch key, the halt
--                              key, the returned key, the caller's epoch
--                              and ceiling (guard.lua)
-- ARGV[7] '1' when a buyer of the sale has an idempotency key the ledger
--                              may replay (optional): see R.ended
-- Last of all KEYS, an item's window key (window.lua, windowed variant).
--
-- Returns {status, stock, highest, restarted, returned}, status from R (the answers'
-- table, results.go): R.ok, R.fenced = stale (a higher token was already
-- seen; highest says which, so the caller can move a lock that forgot its
-- counter past it), R.mixed (the fence belongs to another lock),
-- R.collision (another lease read under the same token: the lock service
-- handed one token out twice, so it lost state; both are refused),
-- R.not_int = the stock key holds a non-integer (int.lua's readInt),
-- R.lost = the stock key is missing: Redis lost the sale or it was never
-- reset (int.lua), R.halted = the sale is halted (guard.lua), R.epoch =
-- the caller's epoch is not the sale's (guard.lua), R.early = the sale's
-- window has not started (stock is then its starts_at), R.ended = it has
-- ended (stock is its ends_at; window.lua), R.skewed = Redis's clock and
-- the caller's disagree at an edge of the window (stock is the skew in
-- ms; window.lua's 'clock_skew'). An
-- ended sale is read as usual when ARGV[7] is '1': only the write's ledger
-- can tell a replay of a key sold before the end, which it answers
-- (ledger.lua), from a new sale, which it refuses.
-- On every status but R.ok and R.collision the fence is left untouched.
--
-- restarted is 1 when this read restarted the fence (below). returned is
-- the units returned so far (guard.lua), on R.ok: no return can come
-- between this read and a write under its lease that is not refused (a
-- return moves the fence, lifecycle.lua), so the caller's ceiling after
-- the write is its stock less this.
--
-- Restarting the fence: a lock service that lost its state (an etcd
-- restored from a snapshot, a new ZooKeeper ensemble, a lock Redis restarted
-- empty) hands out tokens below the fence, or of another identity, and
-- would be refused for good. Once no read at all has been accepted for the
-- quiet period (one lock TTL: by then every lease of the old token space has
-- lapsed unless it is still renewing — and a renewing holder's read is
-- refused the same way), the next refused read is accepted instead and the
-- fence restarts at its token. It stays safe because the write is a
-- compare-and-set on the reader's lease (fenced_write.lua), not a token
-- comparison: whatever the tokens, a write lands only if no other read was
-- accepted since its own.
--
-- A reservation's return (lifecycle.lua) replaces the reader with
-- '!return': a read again under the same token is then no collision, and
-- reads the stock with the unit back in it.
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

-- Before anything is recorded: a reader that cannot use the stock must
-- not become the fence's current reader.
local stock = readInt(KEYS[1], 'lost')
if stock == 'lost' then
  return {R.lost, 0, '', 0}
end
if not stock then
  return {R.not_int, 0, '', 0}
end
local refused, returned = guard(stock, KEYS[3], KEYS[4], KEYS[5], ARGV[5], ARGV[6])
if refused == 'halted' then
  return {R.halted, 0, '', 0}
elseif refused == 'epoch' then
  return {R.epoch, 0, '', 0}
end
local closed, bound = window(true)
if closed == 'clock_skew' then
  return {R.skewed, bound, '', 0}
elseif closed == 'not_started' then
  return {R.early, bound, '', 0}
elseif closed == 'ended' and ARGV[7] ~= '1' then
  return {R.ended, bound, '', 0}
end

local fence = redis.call('HMGET', KEYS[2], 'lock', 'token', 'lease', 'at')
local ident, highest, lease, at = fence[1], fence[2], fence[3], tonumber(fence[4])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local quiet = tonumber(ARGV[4]) or 0

local status = R.ok
if ident and ident ~= ARGV[1] then
  status = R.mixed
elseif highest and less(ARGV[2], highest) then
  status = R.fenced
end
local restarted = 0
if status ~= R.ok then
  if quiet > 0 and at and now - at >= quiet then
    restarted = 1
  else
    return {status, 0, highest or '', 0}
  end
elseif highest and ARGV[2] == highest and lease ~= ARGV[3] and lease ~= '!return' then
  -- Poison the token: the lease that recorded it can no longer write
  -- either, and every later reader under it is refused the same way.
  redis.call('HSET', KEYS[2], 'lease', '!collision')
  return {R.collision, 0, highest, 0}
end

redis.call('HSET', KEYS[2], 'lock', ARGV[1], 'token', ARGV[2], 'lease', ARGV[3], 'at', now)
return {R.ok, stock, ARGV[2], restarted, returned}

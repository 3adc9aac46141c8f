-- Generated from results.go (resultsPrelude), int.lua, guard.lua, window.lua, fenced_read.lua by TestRunScriptsAreTheirParts (make docs): edit those, not this.
local R = {ok = 0, fenced = 1, mixed = 2, collision = 3, not_int = 4, lost = 5, halted = 6, epoch = 7, early = 8, ended = 9, skewed = 10, sold_out = 11, lucky_not_int = 12, returned = 13}
-- int.lua: prepended to every script that reads a counter of the sale
-- (store.go). Not a script on its own.
--
-- readInt(key, missing) is the integer a stock or lucky key holds, missing
-- (0 when not given) when the key does not exist, or nil when it holds
-- anything else: a non-canonical decimal
-- ("5.0", " 5", "007", which DECR and INCR refuse), a value outside
-- -(2^53-1)..2^53-1 (a Lua number is a double, exact only that far: 2^63-1
-- would come back as -2^63), or a key of another type (WRONGTYPE). A script
-- checks every counter it touches before its first write, so a bad key
-- makes it write nothing rather than fail half-way (Redis does not roll a
-- script back). Store.checkInt is the same rule in Go.
--
-- A sale's stock key is read with missing = 'lost': a reset writes every
-- stock key, so a missing one is a Redis that lost the sale (restarted
-- empty, flushed, a snapshot from before the sale), never "0 left": read
-- as 0 it answers buyers holding a unit "sold out", and with the ledger
-- lets their replayed keys buy again.
local function readInt(key, missing)
  local v = redis.pcall('GET', key)
  if v == false then
    return missing or 0
  end
  if type(v) ~= 'string' or #v > 17 then
    return nil
  end
  if v ~= '0' and not string.match(v, '^%-?[1-9]%d*$') then
    return nil
  end
  local n = tonumber(v)
  if n > 9007199254740991 or n < -9007199254740991 then
    return nil
  end
  return n
end

-- guard.lua: prepended (after int.lua) to the scripts that read the stock
-- to sell from it: fenced_read.lua and sell_atomic.lua. Not a script on
-- its own.
--
-- guard(stock, ekey, hkey, rkey, epoch, ceiling) refuses a Redis that went
-- back in time. It returns nil when the sale may go on, 'halted' when it
-- must stop, 'epoch' when the caller's epoch is not the sale's; and, as
-- its second value, the units returned so far (0 for a sale without
-- reservations, whose rkey never exists).
--
-- ekey     the sale's epoch key   (a random id, new on every reset)
-- hkey     the sale's halt key    (exists once a rewind was seen; only an
--                                  operator removes it, see the runbook)
-- rkey     the units returned key (Keys.Returned: reservations that
--                                  expired or were cancelled; only rises)
-- epoch    the epoch the caller last saw ('' = none yet: no check)
-- ceiling  the least "fresh" stock (stock less returned) the caller saw
--          left after a sale it answered sold in that epoch, for this
--          stock key (-1 = none)
--
-- Within one epoch the fresh stock only falls: a sale takes a unit, and a
-- return raises the stock and the returned count together (lifecycle.lua).
-- So a fresh stock above the ceiling is a Redis that lost sales it
-- acknowledged (an older snapshot loaded, a failover to a replica that
-- lagged): the first caller to see it writes the halt key, and every caller
-- after it, on every replica, is refused until an operator reconciles.
-- Without reservations returned is 0 and the fresh stock is the stock. An
-- epoch other than the caller's is a reset the caller has not seen (or a
-- snapshot of another sale): the caller learns the epoch and asks again,
-- with no ceiling. Nothing else is written here.
local function guard(stock, ekey, hkey, rkey, epoch, ceiling)
  if redis.call('EXISTS', hkey) == 1 then
    return 'halted', 0
  end
  local returned = tonumber(redis.call('GET', rkey)) or 0
  if epoch == '' then
    return nil, returned
  end
  if redis.call('GET', ekey) ~= epoch then
    return 'epoch', returned
  end
  local c = tonumber(ceiling)
  if c and c >= 0 and stock - returned > c then
    redis.call('SET', hkey, 'rewound: stock ' .. stock .. ' less ' .. returned .. ' returned in ' .. ekey ..
      ' above the ' .. c .. ' a sale of epoch ' .. epoch .. ' was answered with')
    return 'halted', returned
  end
  return nil, returned
end
local windowed = false
-- window.lua: prepended (last, right before the script itself) to the
-- scripts that read to sell or take a unit: fenced_read.lua, peek.lua,
-- fenced_write.lua and sell_atomic.lua. Not a script on its own.
--
-- An item's sale (stock.ItemKeys) has a window: a hash with starts_at and
-- ends_at, unix ms, 0 = no bound; a missing key is always open. Its key is
-- passed last of all KEYS when `windowed` is true (a line store.go puts
-- first: the windowed variant of each script); nkeys is then the number of
-- the other keys, which the script reads as it reads #KEYS without a
-- window. The windowed variant also takes two ARGV last of all: the
-- caller's clock (unix ms) and stock.max_clock_skew (ms, 0: unchecked);
-- nargv is the number of the others. The default sale has no window key:
-- windowed is false, nkeys is #KEYS, nargv #ARGV, and nothing here reads
-- Redis.
--
-- window() returns nil while the sale is open, else 'not_started' and
-- starts_at, or 'ended' and ends_at (from ends_at on), or 'ended' and
-- archived_at once the item is archived (Items.Archive: the hash's
-- archived_at, which no reset removes): an archived item's sale has ended
-- for good, checked here where the unit would be taken, so an archive
-- that lands mid-sale refuses that sale's write. A caller checks it
-- before its first write, so a refused script writes nothing of its own.
--
-- The clock is Redis's (TIME), never a replica's: every replica agrees
-- when a sale opens and ends. It is trusted only forward (clock.go):
--   - now is max(TIME, high_water), the highest TIME a sale saw, so a
--     clock stepped back reopens nothing;
--   - end_seen_at is a latch: once a sale saw the end, the item has ended
--     whatever the clock says later, until a reset or Items.Unlatch;
--   - both move only while Redis's clock is within the bound of the
--     caller's, so a primary whose clock is ahead (a failover, a step)
--     cannot end a sale for good. Beyond the bound, a decision the two
--     clocks agree on stands (far from an edge), and one they do not is
--     refused: 'clock_skew' and the skew in ms (Redis's less the caller's).
-- climb is false for peek.lua, the read without the lock, which would
-- otherwise write on every call: it leaves the high-water clock to the
-- sales, and sets only the end latch (once).
local nkeys, windowKey, nargv = #KEYS, nil, #ARGV
local callerNow, maxSkew = 0, 0
if windowed then
  windowKey = KEYS[nkeys]
  nkeys = nkeys - 1
  callerNow, maxSkew = tonumber(ARGV[nargv - 1]) or 0, tonumber(ARGV[nargv]) or 0
  nargv = nargv - 2
end

local function decide(now, starts, ends)
  if starts > 0 and now < starts then
    return 'not_started', starts
  end
  if ends > 0 and now >= ends then
    return 'ended', ends
  end
  return nil
end

local function window(climb)
  if not windowKey then
    return nil
  end
  local w = redis.call('HMGET', windowKey, 'starts_at', 'ends_at', 'archived_at', 'end_seen_at', 'high_water')
  local archived = tonumber(w[3]) or 0
  if archived > 0 then
    return 'ended', archived
  end
  local starts, ends = tonumber(w[1]) or 0, tonumber(w[2]) or 0
  if starts <= 0 and ends <= 0 then
    return nil
  end
  if ends > 0 and (tonumber(w[4]) or 0) > 0 then
    return 'ended', ends
  end
  local t = redis.call('TIME')
  local tnow = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local high = tonumber(w[5]) or 0
  local now = math.max(tnow, high)
  local skew = tnow - callerNow
  if maxSkew > 0 and math.abs(skew) > maxSkew then
    local closed, bound = decide(now, starts, ends)
    local other = decide(math.max(callerNow, high), starts, ends)
    if closed ~= other then
      return 'clock_skew', skew
    end
    return closed, bound
  end
  local closed, bound = decide(now, starts, ends)
  if climb and tnow > high then
    redis.call('HSET', windowKey, 'high_water', string.format('%d', tnow))
  end
  if closed == 'ended' then
    redis.call('HSET', windowKey, 'end_seen_at', string.format('%d', now))
  end
  return closed, bound
end
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

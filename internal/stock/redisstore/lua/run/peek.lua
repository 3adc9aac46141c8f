-- Generated from results.go (resultsPrelude), int.lua, guard.lua, window.lua, peek.lua by TestRunScriptsAreTheirParts (make docs): edit those, not this.
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
-- peek.lua: the stock read without the lock, so that a buyer of a sold-out
-- sale is answered "sold out" at the speed of a read instead of queueing
-- on the lock to learn it (Service.soldOutEarly). It records nothing in
-- the fence: it sells nothing, and a reader that will not write must not
-- become the fence's current reader.
--
-- KEYS[1] stock key            (missing = the sale is lost, R.lost: never "0 left")
-- KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2]: the epoch key, the halt
--                              key, the returned key, the caller's epoch
--                              and ceiling (guard.lua)
-- KEYS[5] the buyer's idempotency record, when it sent a key (optional)
-- Last of all KEYS, an item's window key (window.lua, windowed variant).
--
-- Returns {status, stock, record}, status from R (the answers' table,
-- results.go): R.ok, R.not_int = the stock key holds a non-integer,
-- R.lost = the stock key is missing, R.halted = the sale is halted,
-- R.epoch = the caller's epoch is not the sale's, R.early = the window has
-- not started and R.ended = it has ended, stock then being starts_at or
-- ends_at, R.skewed = the clocks disagree at an edge (window.lua's
-- 'clock_skew'), stock the skew. record is 1 when KEYS[5] exists: a replay the
-- sale script must answer, since only it knows whether the record is this
-- sale's and this buyer's (after the end too: ledger.lua).
--
-- A sold-out answer given on a 0 read here is linearizable, placed at this
-- read. Without reservations the stock only falls within an epoch, so it
-- stays 0 until a reset (which moves the epoch); with them a return may
-- raise it again, and a later read sees it (docs/reservations.md).
local stock = readInt(KEYS[1], 'lost')
if stock == 'lost' then
  return {R.lost, 0, 0}
end
if not stock then
  return {R.not_int, 0, 0}
end
local refused = guard(stock, KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2])
if refused == 'halted' then
  return {R.halted, 0, 0}
elseif refused == 'epoch' then
  return {R.epoch, 0, 0}
end
local record = 0
if nkeys >= 5 and redis.call('EXISTS', KEYS[5]) == 1 then
  record = 1
end
local closed, bound = window(false)
if closed == 'clock_skew' then
  return {R.skewed, bound, record}
elseif closed == 'not_started' then
  return {R.early, bound, record}
elseif closed == 'ended' then
  return {R.ended, bound, record}
end
return {R.ok, stock, record}

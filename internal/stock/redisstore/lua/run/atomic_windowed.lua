-- Generated from results.go (resultsPrelude), int.lua, guard.lua, salesclock.lua, formats.go (ledgerPrelude), lifeclock.lua, ledger.lua, window.lua, sell_atomic.lua by TestRunScriptsAreTheirParts (make docs): edit those, not this.
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
-- salesclock.lua: keys that live by the sales' clock, not Redis's.
--
-- A record a retry or a replay must find (an idempotency record, an
-- attempt's receipt) has no Redis TTL: Redis expires keys by its own
-- clock, and a clock that jumped forward past the TTL let a key buy twice.
-- Instead each is listed in an index (a sorted set) with the time of its
-- sale by the seller's clock, and every write of one first removes at most
-- two listed older than ttl by that same clock. Trimming moves with the
-- sales, never with Redis's clock, and never falls behind them (one in, up
-- to two out). The index and its records share a hash tag, so this works
-- on a Redis Cluster; the removed records are not declared in KEYS, which
-- a cluster allows for keys of the script's own slot.
--
-- now and ttl are unix ms and ms, as strings or numbers.
local function keepBySalesClock(index, key, value, now, ttl)
  local old = redis.call('ZRANGEBYSCORE', index, '-inf', '(' .. (tonumber(now) - tonumber(ttl)), 'LIMIT', 0, 2)
  for _, name in ipairs(old) do
    redis.call('UNLINK', name)
    redis.call('ZREM', index, name)
  end
  redis.call('SET', key, value)
  redis.call('ZADD', index, now, key)
end

local ledgerFormat = '1'
-- lifeclock.lua: the reservations' clock, prepended to the scripts that
-- set or judge a payment deadline (ledger.lua's reserve, lifecycle.lua).
-- Not a script on its own.
--
-- lifeNow(key) is Redis's clock (TIME, unix ms) trusted only forward: the
-- highest it ever read is kept in key, and a clock stepped back reads as
-- that. One clock sets every deadline (pay_by) and judges every payment
-- and expiry, inside the script that decides, so a replica's clock never
-- takes part and a payment racing its deadline has one outcome. A clock
-- stepped forward expires early what it passes: bounded by the step, and
-- refused nowhere, since no unit can be sold twice by it (the expiry and
-- the payment are still one script each).
local function lifeNow(key)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local high = tonumber(redis.call('GET', key) or '0') or 0
  if now > high then
    redis.call('SET', key, string.format('%d', now))
    return now
  end
  return high
end
-- ledger.lua: prepended to fenced_write.lua and sell_atomic.lua (after
-- int.lua) for their ledger form, used when the order ledger is on
-- (Keys.Orders). Not a script on its own. ledgerFormat, the format every
-- entry carries, comes before it from Go (formats.go, ledgerPrelude).
--
-- sellTo(stock, kb, ab, token, n, lucky, closed) decides, for n members in order, what
-- each gets out of stock units, and writes the ledger of every unit it
-- sells: buyer count, stream entry, index, per-user list and idempotency
-- record. The caller takes the units from the stock and counts them in
-- lucky: in the same script, so no unit is sold without its order and no
-- order exists without its unit. It reads:
--
-- KEYS[kb]    orders stream        (one entry per unit sold; fields below)
-- KEYS[kb+1]  sale id              (string, set by every Store.Reset)
-- KEYS[kb+2]  buyers hash          (user -> units bought in this sale)
-- KEYS[kb+3]  order index hash     (order id -> stream entry id)
-- KEYS[kb+4]  per-user sorted set  (all scores 0; members "user count id",
--                                   so ZRANGEBYLEX lists a user's orders oldest first)
-- KEYS[kb+5]  the records' index   (sorted set: record name -> its sale's time, below)
-- KEYS[kb+5+i] member i's idempotency record, named for its buyer and key
--              (Store.idemKey: a key is its buyer's own), or the prefix
--              alone if it has no key
-- ARGV[ab]    per-user limit       (0 = none; anonymous buyers are never limited)
-- ARGV[ab+1]  how long a key answers its sale, in ms (stock.idempotency_ttl)
-- ARGV[ab+2]  replica name
-- ARGV[ab+3]  now, unix ms         (from the caller: a retry writes the same time)
-- ARGV[ab+4]  a fresh sale id      (taken only if the sale id is missing: a
--                                   stock set by hand, never reset, still
--                                   gets orders that name a sale)
-- ARGV[ab+5+3(i-1)], +1, +2: member i's user ('' anonymous), key ('' none), order id
-- After the members' records and arguments, the reservations (Keys.States;
-- reservations.md):
-- KEYS[kb+5+n+1]  order states hash    (order id -> 'reserved <pay_by>', ...)
-- KEYS[kb+5+n+2]  due sorted set       (reserved order id -> pay_by, unix ms)
-- KEYS[kb+5+n+3]  the reservations' clock (lifeclock.lua)
-- ARGV[ab+5+3n]   payment window in ms (0: none, today's sale: a unit sold
--                 is final and nothing above is touched)
--
-- Member i's outcome, in order:
--   its key has a record of this sale -> 'replay <id> <after> <token>', the
--       original sale's;
--   closed given (the sale's window has ended: window.lua) -> closed,
--       'ended <ends_at>': a key sold before the end is still answered;
--   no unit left                      -> 'soldout';
--   limit > 0, named user, count >= limit -> 'limit';
--   otherwise it sells: 'sold <id> <after> <token>', and with a payment
--       window 'sold <id> <after> <token> <pay_by>', the order reserved.
-- Members are sold in order, so a batch holding a key twice, or one user
-- past the limit, answers the later ones from what the earlier ones wrote.
--
-- lucky is the sale's lucky count before this run: the i-th unit sold
-- here is unit lucky + i of the sale, which its entry carries ('unit'). A
-- unit's number is unique in a sale across segments (lucky is one key),
-- so a durable store can refuse a second order for one unit: a Redis that
-- went back in time and sold a unit again cannot hide it there.
--
-- An idempotency record is "sale user id after token" (user may be ''): a
-- record of an earlier sale (another id) counts as absent, so a Reset need
-- not find every record before the next sale may reuse its keys.
--
-- Records have no TTL: they live by the sales' clock (salesclock.lua),
-- listed in the index with the time of their sale (ARGV[ab+3], the
-- seller's clock). A reset sweeps records and index.
--
-- Returns the units sold and the outcomes joined with ',' (what the
-- receipt keeps, so a retry answers every member as the first run did).

local function sellTo(stock, kb, ab, token, n, lucky, closed)
  local orders, saleKey, buyers, index, byUser = KEYS[kb], KEYS[kb + 1], KEYS[kb + 2], KEYS[kb + 3], KEYS[kb + 4]
  local idemIndex = KEYS[kb + 5]
  local limit = tonumber(ARGV[ab])
  local ttl, replica, now = ARGV[ab + 1], ARGV[ab + 2], ARGV[ab + 3]
  local sale = redis.call('GET', saleKey)
  if not sale then
    sale = ARGV[ab + 4]
    redis.call('SET', saleKey, sale)
  end
  local sold = 0
  local out = {}
  -- With a payment window, every unit sold here is reserved until pay_by
  -- (one deadline for the run: one clock reading).
  local lk = kb + 5 + n
  local window = tonumber(ARGV[ab + 5 + 3 * n] or '0') or 0
  local payBy = nil
  if window > 0 then
    payBy = string.format('%d', lifeNow(KEYS[lk + 3]) + window)
  end
  for i = 1, n do
    local a = ab + 5 + 3 * (i - 1)
    local user, key, id = ARGV[a], ARGV[a + 1], ARGV[a + 2]
    local idem = KEYS[kb + 5 + i]
    local outcome
    if key ~= '' then
      local rec = redis.call('GET', idem)
      if rec then
        local rsale, ruser, rid, rafter, rtoken = string.match(rec, '^(%S*) (%S*) (%S+) (%S+) (%S+)$')
        if rid and rsale == sale and ruser == user then
          outcome = 'replay ' .. rid .. ' ' .. rafter .. ' ' .. rtoken
        end
      end
    end
    if outcome then
      -- decided by the key's record
    elseif closed then
      outcome = closed
    elseif stock - sold <= 0 then
      outcome = 'soldout'
    elseif limit > 0 and user ~= '' and (tonumber(redis.call('HGET', buyers, user)) or 0) >= limit then
      outcome = 'limit'
    else
      sold = sold + 1
      local after = string.format('%d', stock - sold)
      local entry = redis.call('XADD', orders, '*', 'id', id, 'sale', sale, 'user', user, 'key', key,
        'token', token, 'replica', replica, 'stock_after', after, 'time', now,
        'unit', string.format('%d', lucky + sold), 'format', ledgerFormat)
      redis.call('HSET', index, id, entry)
      if user ~= '' then
        local count = redis.call('HINCRBY', buyers, user, 1)
        redis.call('ZADD', byUser, 0, user .. ' ' .. string.format('%010d', count) .. ' ' .. id)
      end
      if key ~= '' then
        keepBySalesClock(idemIndex, idem, sale .. ' ' .. user .. ' ' .. id .. ' ' .. after .. ' ' .. token, now, ttl)
      end
      outcome = 'sold ' .. id .. ' ' .. after .. ' ' .. token
      if payBy then
        redis.call('HSET', KEYS[lk + 1], id, 'reserved ' .. payBy)
        redis.call('ZADD', KEYS[lk + 2], payBy, id)
        outcome = outcome .. ' ' .. payBy
      end
    end
    out[i] = outcome
  end
  return sold, table.concat(out, ',')
end

local windowed = true
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
-- sell_atomic.lua: the whole sale in one script, no lock. Redis runs scripts
-- one at a time, so check-and-decrement cannot interleave: this is the
-- production ceiling the locked mode is compared against.
--
-- KEYS[1] stock key            (missing = the sale is lost: -R.lost)
-- KEYS[2] lucky key
-- KEYS[3] receipt key          (this attempt's receipt: the stock after its sale)
-- KEYS[4] epoch key, KEYS[5] halt key, KEYS[6] returned key (guard.lua)
-- ARGV[1] receipt TTL in ms    (longer than any retry of this attempt)
-- ARGV[2] the caller's epoch, ARGV[3] its ceiling (guard.lua)
-- Then, last of KEYS and ARGV before a window's, the receipts' index and
-- the seller's clock in unix ms (salesclock.lua: the receipt lives by the
-- sales' clock, so a jump of Redis's clock cannot take it before a retry).
-- Last of all KEYS, an item's window key (window.lua, windowed variant).
--
-- Returns the stock after the sale (never below 0), or a refusal: its
-- code in R (the answers' table, results.go) negated. -R.sold_out when
-- sold out, -R.not_int when the stock key and -R.lucky_not_int when the
-- lucky key holds a non-integer (int.lua's readInt), -R.lost when the
-- stock key is missing (int.lua: the sale is lost), -R.halted when the
-- sale is halted and -R.epoch when the caller's epoch is not the sale's
-- (guard.lua);
-- nothing is written unless the sale is made. Both are checked before the
-- first write: INCR lucky followed by a DECR refused on "5.0" counted a sale
-- that took no unit.
-- The ledger form (Keys.Orders set), told apart by its extra keys:
-- KEYS[7..] and ARGV[4..] as ledger.lua's sellTo reads them (kb = 7,
-- ab = 4) for one member. It returns {code, outcomes}: code R.ok (outcomes
-- as ledger.lua's, the receipt's when it existed), or a refusal as above;
-- a run that read the stock (not a receipt's answer) returns {R.ok,
-- outcomes, 0, returned}, returned as guard.lua read it, which the
-- caller's ceiling is the stock after the sale less. The
-- receipt (the outcomes) is written only when the unit sold; a run that
-- sold nothing wrote nothing, and its retry answers the same.
--
-- An item's window (window.lua) refuses a sale before it with {-R.early,
-- starts_at} ({-R.early, '', starts_at} in the ledger form) and after it
-- with {-R.ended, ends_at}, and one its clocks disagree on (window.lua's
-- 'clock_skew') with {-R.skewed, skew ms} ({-R.skewed, '', skew}); the
-- ledger form answers an ended sale's member as
-- ledger.lua does (a replayed key its original sale, else 'ended').
--
-- Idempotent per attempt: a second run (a retry after a lost reply) returns
-- the first run's stock-after from the receipt and sells nothing more.

-- The receipts' index and this seller's clock (salesclock.lua: the
-- receipt has no Redis TTL) come last of KEYS and ARGV, before a window's.
local receiptIndex, sellerNow = KEYS[nkeys], ARGV[nargv]
nkeys, nargv = nkeys - 1, nargv - 1

local done = redis.call('GET', KEYS[3])
if nkeys > 6 then
  if done then
    return {R.ok, done}
  end
  local stock = readInt(KEYS[1], 'lost')
  if stock == 'lost' then
    return {-R.lost, ''}
  end
  if not stock then
    return {-R.not_int, ''}
  end
  local refused, returned = guard(stock, KEYS[4], KEYS[5], KEYS[6], ARGV[2], ARGV[3])
  if refused == 'halted' then
    return {-R.halted, ''}
  elseif refused == 'epoch' then
    return {-R.epoch, ''}
  end
  local lucky = readInt(KEYS[2])
  if not lucky then
    return {-R.lucky_not_int, ''}
  end
  local closed, bound = window(true)
  if closed == 'clock_skew' then
    return {-R.skewed, '', bound}
  elseif closed == 'not_started' then
    return {-R.early, '', bound}
  end
  local ended = nil
  if closed == 'ended' then
    ended = 'ended ' .. string.format('%d', bound)
  end
  local sold, outcomes = sellTo(stock, 7, 4, '0', 1, lucky, ended)
  if sold > 0 then
    redis.call('INCRBY', KEYS[2], sold)
    redis.call('DECRBY', KEYS[1], sold)
    keepBySalesClock(receiptIndex, KEYS[3], outcomes, sellerNow, ARGV[1])
  end
  return {R.ok, outcomes, 0, returned}
end
if done then
  return tonumber(done)
end
local stock = readInt(KEYS[1], 'lost')
if stock == 'lost' then
  return -R.lost
end
if not stock then
  return -R.not_int
end
local refused = guard(stock, KEYS[4], KEYS[5], KEYS[6], ARGV[2], ARGV[3])
if refused == 'halted' then
  return -R.halted
elseif refused == 'epoch' then
  return -R.epoch
end
local closed, bound = window(true)
if closed == 'clock_skew' then
  return {-R.skewed, bound}
elseif closed == 'not_started' then
  return {-R.early, bound}
elseif closed == 'ended' then
  return {-R.ended, bound}
end
if stock <= 0 then
  return -R.sold_out
end
if not readInt(KEYS[2]) then
  return -R.lucky_not_int
end
redis.call('INCR', KEYS[2])
local after = redis.call('DECR', KEYS[1])
keepBySalesClock(receiptIndex, KEYS[3], after, sellerNow, ARGV[1])
return after

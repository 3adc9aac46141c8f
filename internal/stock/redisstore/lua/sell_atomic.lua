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

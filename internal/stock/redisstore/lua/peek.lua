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

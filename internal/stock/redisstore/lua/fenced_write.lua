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
-- Then, last of KEYS and ARGV before a window's, the receipts' index and
-- the seller's clock in unix ms (salesclock.lua).
-- Last of all KEYS, an item's window key (window.lua, windowed variant).
--
-- The ledger form (Keys.Orders set), told apart by its extra keys:
-- KEYS[5..] and ARGV[7..] as ledger.lua's sellTo reads them (kb = 5,
-- ab = 7), ARGV[4] is the stock READ under this lease (not the new stock)
-- and ARGV[6] the number of members. The script decides what each member
-- gets (ledger.lua), writes read - sold back, counts sold in lucky, and
-- returns {status, outcomes}; outcomes is '' unless status is R.ok. The
-- receipt then holds the outcomes, and is written only when a unit sold: a
-- run that sold nothing changed nothing, and its retry (a sold-out stock
-- only falls, a buyer's count only rises, a key's record stays) answers the
-- same. The unfenced write has no ledger form: with fencing off the lab
-- shows the articles' oversell, and those sales leave no order.
--
-- Returns a status of R (the answers' table, results.go): R.ok = written
-- (now or by an earlier run of the same lease), R.fenced, R.mixed,
-- R.collision, R.returned = a reservation's unit came back since the read
-- (lifecycle.lua: read again), R.not_int = the lucky key holds a non-integer (int.lua's
-- readInt: checked first, since INCRBY failing after the SET would leave
-- a unit gone and no sale counted), R.lost = the stock key is missing
-- (the sale is lost: ErrStoreLost). Nothing is written unless it returns
-- R.ok.
--
-- An item's window (window.lua) is checked here, at the write, where the
-- unit is taken: a sale that read inside it and writes after it is
-- refused. Not started: {R.early, starts_at} ({R.early, '', starts_at} in
-- the ledger form); ended: {R.ended, ends_at}; Redis's clock beyond the
-- bound of the caller's at an edge: {R.skewed, skew ms}, while the ledger
-- form answers each member
-- (ledger.lua: a replayed key its original sale, the others 'ended'). A
-- receipt found first still answers: that write was made in time.
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
--
-- The receipt lives ReceiptTTL by the sales' clock, not Redis's
-- (salesclock.lua), so a jump of Redis's clock cannot take it before its
-- retry. The write also leaves its lease and receipt in the fence ('wrote',
-- 'receipt'), where they stay until the next write: a retry whose receipt
-- a reset or an older replica's TTL took answers from there.

-- The receipts' index and this seller's clock (salesclock.lua: the
-- receipt has no Redis TTL) come last of KEYS and ARGV, before a window's.
local receiptIndex, sellerNow = KEYS[nkeys], ARGV[nargv]
nkeys, nargv = nkeys - 1, nargv - 1

local ledger = nkeys > 4
local function answer(status, outcomes)
  if ledger then
    return {status, outcomes or ''}
  end
  return status
end
-- refuse answers a closed window: its code and the bound it passed.
local function refuse(status, bound)
  if ledger then
    return {status, '', bound}
  end
  return {status, bound}
end

local done = redis.call('GET', KEYS[4])
if not done then
  local w = redis.call('HMGET', KEYS[3], 'wrote', 'receipt')
  if w[1] == ARGV[3] then
    done = w[2]
  end
end
if done then
  return answer(R.ok, done)
end

local fence = redis.call('HMGET', KEYS[3], 'lock', 'token', 'lease')
local ident, highest, lease = fence[1], fence[2], fence[3]

if ident and ident ~= ARGV[1] then
  return answer(R.mixed)
end
if highest ~= ARGV[2] then
  return answer(R.fenced)
end
if lease ~= ARGV[3] then
  if lease == '!collision' then
    return answer(R.collision)
  end
  if lease == '!return' then
    return answer(R.returned) -- a unit came back since the read: read again
  end
  return answer(R.fenced)
end

local lucky = readInt(KEYS[2])
if not lucky then
  return answer(R.not_int)
end
-- The stock key gone since this lease's read (deleted, evicted): the sale
-- is lost, as the read would have said; writing it back would make a
-- stock out of nothing.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return answer(R.lost)
end

local closed, bound = window(true)
if closed == 'clock_skew' then
  return refuse(R.skewed, bound)
elseif closed == 'not_started' then
  return refuse(R.early, bound)
end
if ledger then
  local read = tonumber(ARGV[4])
  local ended = nil
  if closed == 'ended' then
    ended = 'ended ' .. string.format('%d', bound)
  end
  local sold, outcomes = sellTo(read, 5, 7, ARGV[2], tonumber(ARGV[6]), lucky, ended)
  if sold > 0 then
    redis.call('SET', KEYS[1], string.format('%d', read - sold))
    redis.call('INCRBY', KEYS[2], sold)
    keepBySalesClock(receiptIndex, KEYS[4], outcomes, sellerNow, ARGV[5])
    redis.call('HSET', KEYS[3], 'wrote', ARGV[3], 'receipt', outcomes)
  end
  return {R.ok, outcomes}
end
if closed == 'ended' then
  return refuse(R.ended, bound)
end

local units = 1
if nargv >= 6 then
  units = tonumber(ARGV[6])
end
local receipt = ARGV[4]
if units ~= 1 then
  receipt = ARGV[4] .. ':' .. ARGV[6]
end
redis.call('SET', KEYS[1], ARGV[4])
redis.call('INCRBY', KEYS[2], units)
keepBySalesClock(receiptIndex, KEYS[4], receipt, sellerNow, ARGV[5])
redis.call('HSET', KEYS[3], 'wrote', ARGV[3], 'receipt', receipt)
return R.ok

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


-- lifecycle.lua: a reserved order's end, decided in one script: paid,
-- cancelled or expired (reservations.md). Each race (a payment against its
-- deadline, a cancel against a payment, two expirers) is two runs of this
-- script, which Redis runs one at a time: the second finds the state the
-- first wrote and answers it. A state only moves forward, out of
-- 'reserved'; a unit goes back to the stock only on that move, so it goes
-- back at most once.
--
-- KEYS[1] order states hash   (order id -> 'reserved <pay_by>', 'paid <payment id>',
--                              'cancelled', 'expired')
-- KEYS[2] due sorted set      (reserved order id -> pay_by)
-- KEYS[3] payments hash       (payment id -> order id: a payment id is used once)
-- KEYS[4] refunds hash        (payment id -> '<order id> <state>': money taken
--                              for an order that was no longer reserved)
-- KEYS[5] the reservations' clock (lifeclock.lua)
-- KEYS[6] stock key           (the sale's one segment)
-- KEYS[7] returned key        (units returned, only rising)
-- KEYS[8] fence key           (moved, when it exists, so that a locked
--                              write that read before the return is refused)
-- KEYS[9] halt key            (a halted sale returns nothing)
-- KEYS[10] optional: the ended orders MySQL does not hold yet (sorted set,
--          '<order id> <state>[ <payment id>]' -> when it ended, unix ms),
--          passed only with durable states (orders.durable): each end is
--          added to it in the script that decides it, so none is missed,
--          and orders.StateSyncer copies it to MySQL and removes it.
-- ARGV[1] 'pay', 'cancel' or 'expire'
-- ARGV[2] pay, cancel: the order id; expire: the most orders to expire
-- ARGV[3] pay: the payment id
--
-- Returns {state, detail}:
--   pay:    {'paid', payment id} (also a repeat of the same payment);
--           {'expired'|'cancelled'|'paid', 'refund'}: the payment met an
--           order no longer reserved (or already paid by another payment),
--           recorded in the refunds; an order past its deadline that no
--           expirer took yet expires here first and returns its unit;
--           {'reused', order id}: the payment id paid another order.
--   cancel: {'cancelled', ''} or the state that won ('paid', 'expired').
--   either: {'unknown', ''} for an order with no state (no reservation);
--           {'halted', ''}; {'lost', ''} when the stock key is missing.
--   expire: {'expired', count, next, pending}: count orders expired now,
--           next the earliest deadline left (unix ms, '' none), pending
--           the orders still reserved.
--
-- A deadline is inclusive: a payment at pay_by pays, the expirer takes an
-- order only once its clock is past pay_by.

local states, due, payments, refunds, clock = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local stockKey, returned, fence, halt = KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local outbox = KEYS[10]

-- ended records an order's end for MySQL, when states are durable.
local function ended(member)
  if outbox then
    redis.call('ZADD', outbox, lifeNow(clock), member)
  end
end

if redis.call('EXISTS', halt) == 1 then
  return {'halted', ''}
end
if redis.call('EXISTS', stockKey) == 0 then
  return {'lost', ''} -- a return must not make up a sale Redis lost
end

-- giveBack ends a reserved order as state and returns its unit. A locked
-- sale writes the stock as it read it less what it sold: the fence's
-- reader is replaced, so a write whose read came before this return is
-- refused (fenced_write.lua) instead of overwriting it; the next read
-- sees the unit.
local function giveBack(id, state)
  redis.call('HSET', states, id, state)
  ended(id .. ' ' .. state)
  redis.call('ZREM', due, id)
  redis.call('INCR', stockKey)
  redis.call('INCR', returned)
  if redis.call('EXISTS', fence) == 1 then
    redis.call('HSET', fence, 'lease', '!return')
  end
end

local op = ARGV[1]
if op == 'expire' then
  local now = lifeNow(clock)
  local ids = redis.call('ZRANGEBYSCORE', due, '-inf', '(' .. now, 'LIMIT', 0, tonumber(ARGV[2]))
  local count = 0
  for _, id in ipairs(ids) do
    local st = redis.call('HGET', states, id)
    if st and string.sub(st, 1, 9) == 'reserved ' then
      giveBack(id, 'expired')
      count = count + 1
    else
      redis.call('ZREM', due, id)
    end
  end
  local first = redis.call('ZRANGE', due, 0, 0, 'WITHSCORES')
  return {'expired', count, first[2] or '', redis.call('ZCARD', due)}
end

local id = ARGV[2]
local st = redis.call('HGET', states, id)
if not st then
  return {'unknown', ''}
end
local kind, rest = string.match(st, '^(%S+) ?(.*)$')

if op == 'cancel' then
  if kind == 'reserved' then
    giveBack(id, 'cancelled')
    return {'cancelled', ''}
  end
  return {kind, ''}
end

-- pay
local pid = ARGV[3]
local owner = redis.call('HGET', payments, pid)
if owner and owner ~= id then
  return {'reused', owner}
end
if kind == 'reserved' then
  if lifeNow(clock) <= tonumber(rest) then
    redis.call('HSET', states, id, 'paid ' .. pid)
    ended(id .. ' paid ' .. pid)
    redis.call('ZREM', due, id)
    redis.call('HSET', payments, pid, id)
    return {'paid', pid}
  end
  giveBack(id, 'expired') -- its deadline passed first
  kind = 'expired'
end
if kind == 'paid' and rest == pid then
  return {'paid', pid}
end
redis.call('HSET', payments, pid, id)
redis.call('HSET', refunds, pid, id .. ' ' .. kind)
return {kind, 'refund'}

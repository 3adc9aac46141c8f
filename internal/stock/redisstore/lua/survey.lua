-- One item's halt mark, books and ledger count at one instant, for
-- Items.Survey: one script per item, so its keys are one slot.
-- KEYS[1] halt, KEYS[2] stock, KEYS[3] lucky, KEYS[4] initial stock,
-- KEYS[5] units returned (reservations), and with the ledger on KEYS[6]
-- its stream, KEYS[7] its trimmed count.
-- Returns {halt, stock, lucky, initial, orders, returned}: the first four
-- as stored ('' when missing), the ledger's orders, entries plus trimmed
-- (-1 with the ledger off; a trimmed count that is not a number counts
-- none), and returned as stored ('' when missing).
local out = {}
for i = 1, 4 do
  local v = redis.call('GET', KEYS[i])
  out[i] = v or ''
end
local orders = -1
if #KEYS >= 7 then
  orders = redis.call('XLEN', KEYS[6]) + (tonumber(redis.call('GET', KEYS[7]) or '0') or 0)
end
out[5] = orders
out[6] = redis.call('GET', KEYS[5]) or ''
return out

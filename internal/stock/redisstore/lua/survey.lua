-- One item's halt mark, books and ledger count at one instant, for
-- Items.Survey: one script per item, so its keys are one slot.
-- KEYS[1] halt, KEYS[2] stock, KEYS[3] lucky, KEYS[4] initial stock,
-- and with the ledger on KEYS[5] its stream, KEYS[6] its trimmed count.
-- Returns {halt, stock, lucky, initial} as stored ('' when missing) and
-- the ledger's orders, entries plus trimmed (-1 with the ledger off; a
-- trimmed count that is not a number counts none).
local out = {}
for i = 1, 4 do
  local v = redis.call('GET', KEYS[i])
  out[i] = v or ''
end
local orders = -1
if #KEYS >= 6 then
  orders = redis.call('XLEN', KEYS[5]) + (tonumber(redis.call('GET', KEYS[6]) or '0') or 0)
end
out[5] = orders
return out

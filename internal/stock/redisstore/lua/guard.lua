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

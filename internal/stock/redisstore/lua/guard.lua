-- guard.lua: prepended (after int.lua) to the scripts that read the stock
-- to sell from it: fenced_read.lua and sell_atomic.lua. Not a script on
-- its own.
--
-- guard(stock, ekey, hkey, epoch, ceiling) refuses a Redis that went back
-- in time. It returns nil when the sale may go on, 'halted' when it must
-- stop, 'epoch' when the caller's epoch is not the sale's.
--
-- ekey     the sale's epoch key   (a random id, new on every reset)
-- hkey     the sale's halt key    (exists once a rewind was seen; only an
--                                  operator removes it, see the runbook)
-- epoch    the epoch the caller last saw ('' = none yet: no check)
-- ceiling  the least stock the caller saw left after a sale it answered
--          sold in that epoch, for this stock key (-1 = none)
--
-- Within one epoch the stock only falls, so a stock above the ceiling is a
-- Redis that lost sales it acknowledged (an older snapshot loaded, a
-- failover to a replica that lagged): the first caller to see it writes the
-- halt key, and every caller after it, on every replica, is refused until
-- an operator reconciles. An epoch other than the caller's is a reset the
-- caller has not seen (or a snapshot of another sale): the caller learns
-- the epoch and asks again, with no ceiling. Nothing else is written here.
local function guard(stock, ekey, hkey, epoch, ceiling)
  if redis.call('EXISTS', hkey) == 1 then
    return 'halted'
  end
  if epoch == '' then
    return nil
  end
  if redis.call('GET', ekey) ~= epoch then
    return 'epoch'
  end
  local c = tonumber(ceiling)
  if c and c >= 0 and stock > c then
    redis.call('SET', hkey, 'rewound: stock ' .. stock .. ' in ' .. ekey ..
      ' above the ' .. c .. ' a sale of epoch ' .. epoch .. ' was answered with')
    return 'halted'
  end
  return nil
end

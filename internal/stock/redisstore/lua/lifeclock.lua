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

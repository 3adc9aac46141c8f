-- sell_atomic.lua: the whole sale in one script, no lock. Redis runs scripts
-- one at a time, so check-and-decrement cannot interleave: this is the
-- production ceiling the locked mode is compared against.
--
-- KEYS[1] stock key            (missing = 0)
-- KEYS[2] lucky key
--
-- Returns the stock after the sale, or -1 when sold out (nothing written).

local stock = tonumber(redis.call('GET', KEYS[1]) or '0')
if stock <= 0 then
  return -1
end
redis.call('INCR', KEYS[2])
return redis.call('DECR', KEYS[1])

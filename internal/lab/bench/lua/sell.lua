-- sell.lua: the lock-free sale, the ceiling every locked row is compared
-- with. Redis runs a script alone, so the check and the two writes cannot
-- interleave with another sale: one round trip, no lock.
--
-- KEYS[1] stock key (missing = 0)
-- KEYS[2] lucky key
--
-- Returns the stock left after this sale, or -1 when sold out (nothing written).
local stock = tonumber(redis.call('GET', KEYS[1]) or '0')
if stock <= 0 then
  return -1
end
redis.call('INCR', KEYS[2])
return redis.call('DECR', KEYS[1])

-- sell_atomic.lua: the whole sale in one script, no lock. Redis runs scripts
-- one at a time, so check-and-decrement cannot interleave: this is the
-- production ceiling the locked mode is compared against.
--
-- KEYS[1] stock key            (missing = 0)
-- KEYS[2] lucky key
-- KEYS[3] receipt key          (this attempt's receipt: the stock after its sale)
-- ARGV[1] receipt TTL in ms    (longer than any retry of this attempt)
--
-- Returns the stock after the sale, or -1 when sold out (nothing written).
-- Idempotent per attempt: a second run (a retry after a lost reply) returns
-- the first run's stock-after from the receipt and sells nothing more.

local done = redis.call('GET', KEYS[3])
if done then
  return tonumber(done)
end
local stock = tonumber(redis.call('GET', KEYS[1]) or '0')
if stock <= 0 then
  return -1
end
redis.call('INCR', KEYS[2])
local after = redis.call('DECR', KEYS[1])
redis.call('SET', KEYS[3], after, 'PX', ARGV[1])
return after

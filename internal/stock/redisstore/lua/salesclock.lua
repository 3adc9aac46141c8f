-- salesclock.lua: keys that live by the sales' clock, not Redis's.
--
-- A record a retry or a replay must find (an idempotency record, an
-- attempt's receipt) has no Redis TTL: Redis expires keys by its own
-- clock, and a clock that jumped forward past the TTL let a key buy twice.
-- Instead each is listed in an index (a sorted set) with the time of its
-- sale by the seller's clock, and every write of one first removes at most
-- two listed older than ttl by that same clock. Trimming moves with the
-- sales, never with Redis's clock, and never falls behind them (one in, up
-- to two out). The index and its records share a hash tag, so this works
-- on a Redis Cluster; the removed records are not declared in KEYS, which
-- a cluster allows for keys of the script's own slot.
--
-- now and ttl are unix ms and ms, as strings or numbers.
local function keepBySalesClock(index, key, value, now, ttl)
  local old = redis.call('ZRANGEBYSCORE', index, '-inf', '(' .. (tonumber(now) - tonumber(ttl)), 'LIMIT', 0, 2)
  for _, name in ipairs(old) do
    redis.call('UNLINK', name)
    redis.call('ZREM', index, name)
  end
  redis.call('SET', key, value)
  redis.call('ZADD', index, now, key)
end


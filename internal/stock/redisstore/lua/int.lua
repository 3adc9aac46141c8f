-- int.lua: prepended to every script that reads a counter of the sale
-- (store.go). Not a script on its own.
--
-- readInt(key, missing) is the integer a stock or lucky key holds, missing
-- (0 when not given) when the key does not exist, or nil when it holds
-- anything else: a non-canonical decimal
-- ("5.0", " 5", "007", which DECR and INCR refuse), a value outside
-- -(2^53-1)..2^53-1 (a Lua number is a double, exact only that far: 2^63-1
-- would come back as -2^63), or a key of another type (WRONGTYPE). A script
-- checks every counter it touches before its first write, so a bad key
-- makes it write nothing rather than fail half-way (Redis does not roll a
-- script back). Store.checkInt is the same rule in Go.
--
-- A sale's stock key is read with missing = 'lost': a reset writes every
-- stock key, so a missing one is a Redis that lost the sale (restarted
-- empty, flushed, a snapshot from before the sale), never "0 left": read
-- as 0 it answers buyers holding a unit "sold out", and with the ledger
-- lets their replayed keys buy again.
local function readInt(key, missing)
  local v = redis.pcall('GET', key)
  if v == false then
    return missing or 0
  end
  if type(v) ~= 'string' or #v > 17 then
    return nil
  end
  if v ~= '0' and not string.match(v, '^%-?[1-9]%d*$') then
    return nil
  end
  local n = tonumber(v)
  if n > 9007199254740991 or n < -9007199254740991 then
    return nil
  end
  return n
end


-- snapshot.lua: read counters at one instant, as MGET would, but telling a
-- key of another type from a missing one (MGET answers nil for both, so a
-- hash at the stock key read as 0 units).
--
-- KEYS  the counters (the segments' stock keys, and lucky)
--
-- Returns each key's value as stored, '' for a missing key, '!' for a key
-- that is not a string. Values are passed as strings, never through a Lua
-- number, and checked in Go (checkInt).

local out = {}
for i, k in ipairs(KEYS) do
  local v = redis.pcall('GET', k)
  if v == false then
    out[i] = ''
  elseif type(v) ~= 'string' then
    out[i] = '!'
  else
    out[i] = v
  end
end
return out

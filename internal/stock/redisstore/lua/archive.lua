-- archive.lua: marks an item archived (Items.Archive): its window hash's
-- archived_at, Redis's TIME in unix ms, which window.lua refuses every
-- sale by. Set once: archiving again keeps the first time.
--
-- KEYS[1] the item's window key (Keys.Window)
--
-- Returns archived_at.
local at = redis.call('HGET', KEYS[1], 'archived_at')
if at then
  return at
end
local t = redis.call('TIME')
at = string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
redis.call('HSET', KEYS[1], 'archived_at', at)
return at

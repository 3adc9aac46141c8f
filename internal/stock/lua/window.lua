-- window.lua: prepended (last, right before the script itself) to the
-- scripts that read to sell or take a unit: fenced_read.lua, peek.lua,
-- fenced_write.lua and sell_atomic.lua. Not a script on its own.
--
-- An item's sale (stock.ItemKeys) has a window: a hash with starts_at and
-- ends_at, unix ms, 0 = no bound; a missing key is always open. Its key is
-- passed last of all KEYS when `windowed` is true (a line store.go puts
-- first: the windowed variant of each script); nkeys is then the number of
-- the other keys, which the script reads as it reads #KEYS without a
-- window. The default sale has no window key: windowed is false, nkeys is
-- #KEYS, and nothing here reads Redis.
--
-- window() returns nil while the sale is open, else 'not_started' and
-- starts_at, or 'ended' and ends_at (from ends_at on), or 'ended' and
-- archived_at once the item is archived (Items.Archive: the hash's
-- archived_at, which no reset removes): an archived item's sale has ended
-- for good, checked here where the unit would be taken, so an archive
-- that lands mid-sale refuses that sale's write. The clock is Redis's
-- (TIME), never a replica's: every replica agrees when a sale opens and
-- ends, and a write sent after ends_at is refused here, where the unit
-- would be taken. A caller checks it before its first write, so a refused
-- script writes nothing.
local nkeys, windowKey = #KEYS, nil
if windowed then
  windowKey = KEYS[nkeys]
  nkeys = nkeys - 1
end

local function window()
  if not windowKey then
    return nil
  end
  local w = redis.call('HMGET', windowKey, 'starts_at', 'ends_at', 'archived_at')
  local archived = tonumber(w[3]) or 0
  if archived > 0 then
    return 'ended', archived
  end
  local starts, ends = tonumber(w[1]) or 0, tonumber(w[2]) or 0
  if starts <= 0 and ends <= 0 then
    return nil
  end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if starts > 0 and now < starts then
    return 'not_started', starts
  end
  if ends > 0 and now >= ends then
    return 'ended', ends
  end
  return nil
end

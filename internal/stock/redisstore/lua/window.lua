-- window.lua: prepended (last, right before the script itself) to the
-- scripts that read to sell or take a unit: fenced_read.lua, peek.lua,
-- fenced_write.lua and sell_atomic.lua. Not a script on its own.
--
-- An item's sale (stock.ItemKeys) has a window: a hash with starts_at and
-- ends_at, unix ms, 0 = no bound; a missing key is always open. Its key is
-- passed last of all KEYS when `windowed` is true (a line store.go puts
-- first: the windowed variant of each script); nkeys is then the number of
-- the other keys, which the script reads as it reads #KEYS without a
-- window. The windowed variant also takes two ARGV last of all: the
-- caller's clock (unix ms) and stock.max_clock_skew (ms, 0: unchecked);
-- nargv is the number of the others. The default sale has no window key:
-- windowed is false, nkeys is #KEYS, nargv #ARGV, and nothing here reads
-- Redis.
--
-- window() returns nil while the sale is open, else 'not_started' and
-- starts_at, or 'ended' and ends_at (from ends_at on), or 'ended' and
-- archived_at once the item is archived (Items.Archive: the hash's
-- archived_at, which no reset removes): an archived item's sale has ended
-- for good, checked here where the unit would be taken, so an archive
-- that lands mid-sale refuses that sale's write. A caller checks it
-- before its first write, so a refused script writes nothing of its own.
--
-- The clock is Redis's (TIME), never a replica's: every replica agrees
-- when a sale opens and ends. It is trusted only forward (clock.go):
--   - now is max(TIME, high_water), the highest TIME a sale saw, so a
--     clock stepped back reopens nothing;
--   - end_seen_at is a latch: once a sale saw the end, the item has ended
--     whatever the clock says later, until a reset or Items.Unlatch;
--   - both move only while Redis's clock is within the bound of the
--     caller's, so a primary whose clock is ahead (a failover, a step)
--     cannot end a sale for good. Beyond the bound, a decision the two
--     clocks agree on stands (far from an edge), and one they do not is
--     refused: 'clock_skew' and the skew in ms (Redis's less the caller's).
-- climb is false for peek.lua, the read without the lock, which would
-- otherwise write on every call: it leaves the high-water clock to the
-- sales, and sets only the end latch (once).
local nkeys, windowKey, nargv = #KEYS, nil, #ARGV
local callerNow, maxSkew = 0, 0
if windowed then
  windowKey = KEYS[nkeys]
  nkeys = nkeys - 1
  callerNow, maxSkew = tonumber(ARGV[nargv - 1]) or 0, tonumber(ARGV[nargv]) or 0
  nargv = nargv - 2
end

local function decide(now, starts, ends)
  if starts > 0 and now < starts then
    return 'not_started', starts
  end
  if ends > 0 and now >= ends then
    return 'ended', ends
  end
  return nil
end

local function window(climb)
  if not windowKey then
    return nil
  end
  local w = redis.call('HMGET', windowKey, 'starts_at', 'ends_at', 'archived_at', 'end_seen_at', 'high_water')
  local archived = tonumber(w[3]) or 0
  if archived > 0 then
    return 'ended', archived
  end
  local starts, ends = tonumber(w[1]) or 0, tonumber(w[2]) or 0
  if starts <= 0 and ends <= 0 then
    return nil
  end
  if ends > 0 and (tonumber(w[4]) or 0) > 0 then
    return 'ended', ends
  end
  local t = redis.call('TIME')
  local tnow = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local high = tonumber(w[5]) or 0
  local now = math.max(tnow, high)
  local skew = tnow - callerNow
  if maxSkew > 0 and math.abs(skew) > maxSkew then
    local closed, bound = decide(now, starts, ends)
    local other = decide(math.max(callerNow, high), starts, ends)
    if closed ~= other then
      return 'clock_skew', skew
    end
    return closed, bound
  end
  local closed, bound = decide(now, starts, ends)
  if climb and tnow > high then
    redis.call('HSET', windowKey, 'high_water', string.format('%d', tnow))
  end
  if closed == 'ended' then
    redis.call('HSET', windowKey, 'end_seen_at', string.format('%d', now))
  end
  return closed, bound
end

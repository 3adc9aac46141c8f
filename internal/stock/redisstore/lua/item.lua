-- item.lua: an item's sale at one instant, by Redis's clock (Items.Status).
--
-- KEYS[1] stock key, KEYS[2] lucky key, KEYS[3] initial stock key
-- KEYS[4] window key           (hash starts_at, ends_at, archived_at; see window.lua)
-- KEYS[5] halt key             (guard.lua: set once the sale went back in time)
--
-- Returns {stock, lucky, initial, starts_at, ends_at, now, halted, archived_at,
-- end_seen_at, high_water}: the three
-- counters as snapshot.lua gives them ('' missing, '!' not a string,
-- checked in Go), the window's bounds as stored ('' when unset) and now,
-- Redis's TIME in unix ms: the clock window.lua decides by; halted is the
-- halt key's reason, '' when the sale is not halted; archived_at is when
-- the item was archived (unix ms), '' when it is not; end_seen_at and
-- high_water are window.lua's end latch and high-water clock ('' unset).

local out = {}
for i = 1, 3 do
  local v = redis.pcall('GET', KEYS[i])
  if v == false then
    out[i] = ''
  elseif type(v) ~= 'string' then
    out[i] = '!'
  else
    out[i] = v
  end
end
local w = redis.pcall('HMGET', KEYS[4], 'starts_at', 'ends_at', 'archived_at', 'end_seen_at', 'high_water')
if type(w) ~= 'table' or w.err then
  w = {'!', '!', '!', '!', '!'}
end
out[4] = w[1] or ''
out[5] = w[2] or ''
local t = redis.call('TIME')
out[6] = string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
local h = redis.pcall('GET', KEYS[5])
if type(h) == 'string' then
  out[7] = h
else
  out[7] = ''
end
out[8] = w[3] or ''
out[9] = w[4] or ''
out[10] = w[5] or ''
return out

-- unlatch.lua: lifts an item's window latch set in error (Items.Unlatch):
-- the end latch (end_seen_at) and a high-water clock ahead of Redis's
-- clock now, which a forward step within stock.max_clock_skew left
-- (window.lua). Records who did it and when.
--
-- KEYS[1] the item's window key (Keys.Window)
-- ARGV[1] who (the admin's "by")
--
-- Returns {status, now}: 0 lifted (or nothing was set), 1 the item is
-- archived (that end is for good), 2 the window has ended by Redis's
-- clock now (a latch lifted would be set again by the next sale); now is
-- Redis's TIME in unix ms.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local w = redis.call('HMGET', KEYS[1], 'archived_at', 'ends_at', 'high_water')
if (tonumber(w[1]) or 0) > 0 then
  return {1, now}
end
local ends = tonumber(w[2]) or 0
if ends > 0 and now >= ends then
  return {2, now}
end
redis.call('HDEL', KEYS[1], 'end_seen_at')
if (tonumber(w[3]) or 0) > now then
  redis.call('HSET', KEYS[1], 'high_water', string.format('%d', now))
end
redis.call('HSET', KEYS[1], 'unlatched_by', ARGV[1], 'unlatched_at', string.format('%d', now))
return {0, now}

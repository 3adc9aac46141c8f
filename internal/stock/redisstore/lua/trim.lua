-- trim.lua: remove from the ledger in Redis the orders every consumer
-- group of the stream has acknowledged (TrimLedger): their stream entries
-- and their index entries, counted in the trimmed counter so that the
-- ledger's order count (XLEN + trimmed) stays the units sold.
--
-- KEYS[1] orders stream
-- KEYS[2] order index hash   (order id -> stream entry id)
-- KEYS[3] trimmed counter    (entries trimmed from this sale's stream)
-- ARGV[1] at most this many entries per run
--
-- An entry is acknowledged by a group when it was delivered (id <= the
-- group's last-delivered-id) and is not pending; the pending list is
-- ordered, so everything below the group's oldest pending entry, or up to
-- its last delivered one when none is pending, is acknowledged. The bound
-- is computed here, in the same script as the trim, so it is always the
-- current stream's: a reset (which deletes the stream and its group)
-- cannot meet a bound computed on the stream before it. A stream without
-- a group (just after a reset) is not trimmed: nothing of it is stored.
--
-- Returns {entries trimmed, the first id kept ('' when none trimmed)}.

local stream, index, counter = KEYS[1], KEYS[2], KEYS[3]
local max = tonumber(ARGV[1])
if redis.call('EXISTS', stream) == 0 then
  return {0, ''}
end
local groups = redis.call('XINFO', 'GROUPS', stream)
if #groups == 0 then
  return {0, ''}
end

-- cmp compares two stream ids "ms-seq" as numbers; both parts stay below
-- 2^53 (ms since 1970, entries in one ms).
local function parse(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
local function cmp(a, b)
  local am, as = parse(a)
  local bm, bs = parse(b)
  if am ~= bm then
    return am < bm and -1 or 1
  end
  if as ~= bs then
    return as < bs and -1 or 1
  end
  return 0
end

-- bound is the lowest of the groups' bounds: the last id that may go, or
-- (exclusive) the first that must stay.
local bound, exclusive
for _, g in ipairs(groups) do
  local f = {}
  for i = 1, #g, 2 do
    f[g[i]] = g[i + 1]
  end
  local b, ex = f['last-delivered-id'], false
  if tonumber(f['pending']) > 0 then
    b, ex = redis.call('XPENDING', stream, f['name'])[2], true
  end
  if not bound then
    bound, exclusive = b, ex
  else
    local c = cmp(b, bound)
    if c < 0 or (c == 0 and ex) then
      bound, exclusive = b, ex
    end
  end
end
if not exclusive and bound == '0-0' then
  return {0, ''}
end

local hi = bound
if exclusive then
  hi = '(' .. bound
end
local entries = redis.call('XRANGE', stream, '-', hi, 'COUNT', max)
if #entries == 0 then
  return {0, ''}
end
local ids = {}
for _, e in ipairs(entries) do
  local kv = e[2]
  for i = 1, #kv, 2 do
    if kv[i] == 'id' then
      ids[#ids + 1] = kv[i + 1]
      break
    end
  end
end
for i = 1, #ids, 1000 do
  redis.call('HDEL', index, unpack(ids, i, math.min(i + 999, #ids)))
end
-- MINID keeps the entries at or after the last trimmed one's successor:
-- exactly the ones read above go (XTRIM counts them).
local lastMs, lastSeq = parse(entries[#entries][1])
local minid = string.format('%d-%d', lastMs, lastSeq + 1)
local n = redis.call('XTRIM', stream, 'MINID', minid)
redis.call('INCRBY', counter, n)
return {n, minid}

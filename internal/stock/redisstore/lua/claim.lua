-- Claims item ARGV[1] in the registry: its settings ARGV[2], unless it is
-- there already (0) or the registry holds ARGV[3] items, the most (-1).
-- KEYS[1] the registry (ItemRegistry)
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  return 0
end
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then
  return -1
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1

-- abandon.lua: drop every hold of an owner nobody will release: an
-- acquisition or hand-off whose reply was lost or unexpected, or one that
-- finished after the Locker closed. Unlike release.lua it does not count
-- down, so a hold a retried script doubled is gone too.
--
-- KEYS[1]  the lock hash {owner-id: hold-count}
-- ARGV[1]  owner id
-- ARGV[2]  the lock's pub/sub channel (not a key)
-- ARGV[3]  message published when the lock becomes free
--
-- Returns 1 when the owner's holds were dropped (the lock freed and announced
-- if nobody else holds it), 0 when the owner held nothing.
if redis.call('hdel', KEYS[1], ARGV[1]) == 0 then
  return 0
end
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('publish', ARGV[2], ARGV[3])
end
return 1

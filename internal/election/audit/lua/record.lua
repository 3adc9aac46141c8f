-- Records one audit run, fenced by the election term.
-- KEYS[1] term hash: field = election backend, value = highest term recorded
-- KEYS[2] audit stream
-- ARGV[1] election backend (terms compare only within one backend)
-- ARGV[2] term of the leader recording the run (decimal, fits in 2^53)
-- ARGV[3] stream cap (XADD MAXLEN ~)
-- ARGV[4..] field, value, field, value, ... of the stream entry
-- Returns {0, entry id} when recorded, {1, highest term} when refused because
-- a leader with a higher term has already recorded (the caller is deposed).
local term = tonumber(ARGV[2])
local seen = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
if term < seen then
  return {1, tostring(seen)}
end
if term > seen then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
local fields = {}
for i = 4, #ARGV do
  fields[#fields + 1] = ARGV[i]
end
local id = redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[3], '*', unpack(fields))
return {0, id}

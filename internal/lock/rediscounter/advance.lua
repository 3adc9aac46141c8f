-- advance.lua: move a fencing counter forward to at least ARGV[1], never
-- back, so that the next acquisition's (or hand-off's) INCR exceeds it. Run
-- by the backends' AdvanceTokens after the lock's Redis lost its state
-- (lock.TokenAdvancer).
--
-- KEYS[1]  the fencing counter
-- ARGV[1]  the smallest counter value wanted, as a canonical decimal
--
-- Numbers are compared as decimal digit strings, not as Lua numbers: Lua
-- numbers are doubles, exact only below 2^53, and a counter written by
-- anything else may be above that. Redis's INCR writes canonical decimals.
-- Returns 1 when the counter moved, 0 when it already was at or above ARGV[1];
-- a counter that is not a non-negative integer is an error, never overwritten.

-- atLeast reports a >= b for canonical decimals: the longer is larger, equal
-- lengths compare digit by digit (byte order: locale-free, unlike '<').
local function atLeast(a, b)
  if #a ~= #b then
    return #a > #b
  end
  for i = 1, #a do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x > y
    end
  end
  return true
end

local want = ARGV[1]
local cur = redis.call('GET', KEYS[1])
if cur then
  if not string.match(cur, '^%d+$') then
    return redis.error_reply('fencing counter ' .. KEYS[1] .. ' is not a non-negative integer')
  end
  if atLeast((string.gsub(cur, '^0+(%d)', '%1')), want) then
    return 0
  end
end
redis.call('SET', KEYS[1], want)
return 1

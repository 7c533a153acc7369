"""Lua scripts. Each touches the keys of one user only (one Cluster slot) and runs atomically,
which is what makes a fill that raced a write refuse itself."""

from __future__ import annotations

__all__ = [
    "COMMIT_LIST_FILL",
    "DROP",
    "FILL_IF_EPOCH",
    "FILL_MANY_IF_EPOCH",
    "REPAIR_EDGE",
    "SET_COUNTS",
    "WRITE_EDGE",
]

# After a committed follow or unfollow, in one user's slot.
# KEYS: epoch, follow-state key (or the epoch again), list key, the list's tombstones,
#       the relationship entry of the pair, the user's suggestions
# ARGV: add ('1') or remove ('0'), member ('' when there is none), list limit, now (ms), tombstone life (ms)
#
# The follow state is deleted, not set: two writes of one edge may reach Redis in another order
# than they committed, and only a delete commutes. List members are unique per follow (they hold
# its timestamp), so add and remove of one member are made to commute with a short-lived
# tombstone: once removed, a member is never added back.
WRITE_EDGE = """
redis.call('INCR', KEYS[1])
if KEYS[2] ~= KEYS[1] then redis.call('DEL', KEYS[2]) end
redis.call('DEL', KEYS[5], KEYS[6])
if ARGV[2] == '' then return 1 end
local now = tonumber(ARGV[4])
if ARGV[1] == '0' then
  redis.call('ZADD', KEYS[4], now, ARGV[2])
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now - tonumber(ARGV[5]))
  redis.call('PEXPIRE', KEYS[4], ARGV[5])
end
if redis.call('EXISTS', KEYS[3]) == 1 then
  if ARGV[1] == '0' then
    redis.call('ZREM', KEYS[3], ARGV[2])
  elseif not redis.call('ZSCORE', KEYS[4], ARGV[2]) then
    redis.call('ZADD', KEYS[3], 0, ARGV[2])
  end
  if redis.call('ZCARD', KEYS[3]) > tonumber(ARGV[3]) + 1 then redis.call('DEL', KEYS[3]) end
end
return 1
"""

# KEYS: epoch, key.  ARGV: epoch seen before the store read, value, ttl
FILL_IF_EPOCH = """
local now = redis.call('GET', KEYS[1]) or '0'
if now ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[3])
return 1
"""

# KEYS: epoch, temporary list, list.  ARGV: epoch seen before the store read, ttl
COMMIT_LIST_FILL = """
local now = redis.call('GET', KEYS[1]) or '0'
if now ~= ARGV[1] or redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('DEL', KEYS[2])
  return 0
end
redis.call('RENAME', KEYS[2], KEYS[3])
redis.call('EXPIRE', KEYS[3], ARGV[2])
return 1
"""

# KEYS: counts hash.  ARGV: followers, following, version, ttl. Never replaces a newer version.
SET_COUNTS = """
local v = redis.call('HGET', KEYS[1], 'v')
if v and tonumber(v) >= tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], 'fl', ARGV[1], 'fg', ARGV[2], 'v', ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[4])
return 1
"""

# KEYS: epoch, key...  ARGV: epoch seen before the store read, ttl, value...  (one value per key)
FILL_MANY_IF_EPOCH = """
local now = redis.call('GET', KEYS[1]) or '0'
if now ~= ARGV[1] then return 0 end
for i = 2, #KEYS do redis.call('SET', KEYS[i], ARGV[i + 1], 'EX', ARGV[2]) end
return 1
"""

# Drops entries a committed change may have made stale; anything filled from a read that began
# earlier is refused. KEYS: the epoch, then the keys to delete (a key equal to the epoch is kept).
DROP = """
redis.call('INCR', KEYS[1])
for i = 2, #KEYS do
  if KEYS[i] ~= KEYS[1] then redis.call('DEL', KEYS[i]) end
end
return 1
"""

# Run by the counters consumer for each edge record it sees, in each user's slot.
# KEYS as WRITE_EDGE.  ARGV: '1' made / '0' removed, member.
# It only ever deletes, so a late record cannot make anything stale.
REPAIR_EDGE = """
redis.call('INCR', KEYS[1])
redis.call('DEL', KEYS[5], KEYS[6])
if KEYS[2] ~= KEYS[1] then
  local state = redis.call('GET', KEYS[2])
  if state and state ~= ARGV[1] then redis.call('DEL', KEYS[2]) end
end
if redis.call('EXISTS', KEYS[3]) == 1 then
  local present = redis.call('ZSCORE', KEYS[3], ARGV[2])
  if ARGV[1] == '0' and present then redis.call('ZREM', KEYS[3], ARGV[2]) end
  if ARGV[1] == '1' and not present and not redis.call('ZSCORE', KEYS[4], ARGV[2]) then
    redis.call('DEL', KEYS[3])
  end
end
return 1
"""

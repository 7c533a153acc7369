"""Lua scripts. Each touches the keys of one user only (one Cluster slot) and runs atomically,
which is what makes a fill that raced a write refuse itself."""

from __future__ import annotations

__all__ = [
    "CHECK_TRUST",
    "COMMIT_LIST_FILL",
    "DROP",
    "EPOCH",
    "FILL_IF_EPOCH",
    "FILL_MANY_IF_EPOCH",
    "KEEP_TRUST",
    "REGISTER_LEASE",
    "REMOVE_LEASE",
    "RENEW_LEASE",
    "REPAIR_EDGE",
    "SET_COUNTS",
    "SPLIT_LEASES",
    "UNLOCK",
    "WRITE_EDGE",
]

# A user's epoch is bumped by INCR; one that does not exist (never made, or gone with a cache
# reset or a Redis restarted empty) is created from Redis's clock in microseconds instead of 0, so
# a value seen before the reset can never be reached again after it (that would let a fill that
# read the store before the reset land after it). A reader never guards a fill with a missing
# epoch: it creates one first (EPOCH).
_BUMP = """
local function bump(key)
  if redis.call('EXISTS', key) == 1 then
    redis.call('INCR', key)
  else
    local t = redis.call('TIME')
    redis.call('SET', key, t[1] .. string.format('%06d', tonumber(t[2])))
  end
end
"""

# The epoch before a store read, created (as _BUMP would) if missing. KEYS: the epoch.
EPOCH = """
local v = redis.call('GET', KEYS[1])
if v then return v end
local t = redis.call('TIME')
v = t[1] .. string.format('%06d', tonumber(t[2]))
redis.call('SET', KEYS[1], v)
return v
"""

_NOW_MS = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""

# Whether the cache may be trusted (cache/trust.py): {generation} if it exists and no writer's
# lease has expired, else {} (an array either way, so that the near cache can tell a fence's reply
# from any other). KEYS: the generation, the leases.
CHECK_TRUST = (
    """
local g = redis.call('GET', KEYS[1])
if not g then return {} end
local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if first[2] then
"""
    + _NOW_MS
    + """
  if tonumber(first[2]) <= now then return {} end
end
return {g}
"""
)

# Renews a writer's lease, never one that has expired or is gone (a renewal delayed on the wire
# cannot bring a lapsed lease back). KEYS: the leases. ARGV: the lease ID, its length (ms).
# Returns 1 renewed, 0 lost.
RENEW_LEASE = (
    _NOW_MS
    + """
local expiry = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not expiry or tonumber(expiry) <= now then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
return 1
"""
)

# The leases alive and expired now, and now (ms), on the clock of the node that holds them.
# KEYS: the leases.
SPLIT_LEASES = (
    _NOW_MS
    + """
local alive = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf')
return {alive, redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now), now}
"""
)

# Takes a lease out; with ARGV[2] '1' the generation goes first, in the same step (its holder may
# have left entries unsettled: nothing is trusted until the cache is emptied).
# KEYS: the leases, the generation. ARGV: the lease ID, '1' or '0'.
REMOVE_LEASE = """
if ARGV[2] == '1' then redis.call('DEL', KEYS[2]) end
return redis.call('ZREM', KEYS[1], ARGV[1])
"""

# Keeps the generation (cache/trust_keeper.py) until ARGV[3] (ms, on this node's clock, read before
# the caller read the store): an existing one is renewed, never shortened (a generation with no
# expiry gets one); else a new one is written, only if no emptying is running and the recorded run
# IDs are the ones the caller found (so the cache was emptied since the nodes last changed).
# KEYS: the generation, the run IDs, the emptying's lock. ARGV: the run IDs, a new generation, the
# expiry. Returns 2 renewed, 1 written, 0 neither.
KEEP_TRUST = (
    _NOW_MS
    + """
local expiry = tonumber(ARGV[3])
if expiry <= now then return 0 end
if redis.call('EXISTS', KEYS[1]) == 1 then
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl < 0 or now + ttl < expiry then redis.call('PEXPIREAT', KEYS[1], expiry) end
  return 2
end
if redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('PEXPIREAT', KEYS[1], expiry)
return 1
"""
)

# Deletes a lock only if it is still the caller's. KEYS: the lock. ARGV: the caller's token.
UNLOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

# A new lease (a new ID each time). KEYS: the leases. ARGV: the lease ID, its length (ms).
REGISTER_LEASE = (
    _NOW_MS
    + """
redis.call('ZADD', KEYS[1], 'NX', now + tonumber(ARGV[2]), ARGV[1])
return 1
"""
)

# After a committed follow or unfollow, in one user's slot.
# KEYS: epoch, follow-state key (or the epoch again), list key, the list's tombstones,
#       the relationship entry of the pair, the user's suggestions
# ARGV: add ('1') or remove ('0'), member ('' when there is none), list limit, now (ms), tombstone life (ms)
#
# The follow state is deleted, not set: two writes of one edge may reach Redis in another order
# than they committed, and only a delete commutes. List members are unique per follow (they hold
# its timestamp), so add and remove of one member are made to commute with a short-lived
# tombstone: once removed, a member is never added back. An add of a tombstoned member drops the
# list instead: it is either late (the remove came first) or an account's restore, which puts an
# edge back with the time it was made (SPEC §3b); only the store can tell, and the next read
# refills the list from it.
WRITE_EDGE = (
    _BUMP
    + """
bump(KEYS[1])
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
  else
    redis.call('DEL', KEYS[3])
    return 1
  end
  if redis.call('ZCARD', KEYS[3]) > tonumber(ARGV[3]) + 1 then redis.call('DEL', KEYS[3]) end
end
return 1
"""
)

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
DROP = (
    _BUMP
    + """
bump(KEYS[1])
for i = 2, #KEYS do
  if KEYS[i] ~= KEYS[1] then redis.call('DEL', KEYS[i]) end
end
return 1
"""
)

# Run by the counters consumer for each edge record it sees, in each user's slot.
# KEYS as WRITE_EDGE.  ARGV: '1' made / '0' removed, member.
# It only ever deletes, so a late record cannot make anything stale: a list that disagrees with
# the record is dropped whole, not edited (a restore puts a removed member back with its own time,
# so a late REMOVE record may name a member that is live again; only the store can tell).
REPAIR_EDGE = (
    _BUMP
    + """
bump(KEYS[1])
redis.call('DEL', KEYS[5], KEYS[6])
if KEYS[2] ~= KEYS[1] then
  local state = redis.call('GET', KEYS[2])
  if state and state ~= ARGV[1] then redis.call('DEL', KEYS[2]) end
end
if redis.call('EXISTS', KEYS[3]) == 1 then
  local present = redis.call('ZSCORE', KEYS[3], ARGV[2])
  if ARGV[1] == '0' and present then redis.call('DEL', KEYS[3]) end
  if ARGV[1] == '1' and not present then
    redis.call('DEL', KEYS[3])
  end
end
return 1
"""
)

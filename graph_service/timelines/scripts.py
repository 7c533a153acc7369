"""Lua scripts on the timelines, each atomic. All but ``HOME_WINDOW`` touch the keys of one slot
(one list, or one author's two keys), so they run on a Redis Cluster as well; ``HOME_WINDOW`` reads
keys of many slots and is for a single node only.

Tweet IDs are compared as decimal strings (longer is larger, then lexicographic): Lua numbers
are doubles and cannot tell two 64-bit IDs apart.
"""

from __future__ import annotations

__all__ = ["HOME_WINDOW", "MERGE_IDS", "NOTE_FOLLOW", "OLDER_THAN", "RECORD_TWEET", "REMOVE_IDS"]

# Whether tweet ID a is newer (larger) than b, both decimal strings.
_NEWER = """
local function newer(a, b)
  if #a ~= #b then return #a > #b end
  return a > b
end
"""

# Insert tweet IDs into a newest-first list that holds each ID once, then cap it: merge(key, cap,
# ids, from) takes ids[from..]. Returns how many were added.
# The common case, an ID newer than the head, is LINDEX + LPUSH; an ID that arrives late is put in
# its place (or dropped if the list is full of newer ones); an ID already present changes nothing.
_MERGE = """
local function merge(key, cap, ids, from)
  local added = 0
  for i = from, #ids do
    local id = ids[i]
    local head = redis.call('LINDEX', key, 0)
    if not head or newer(id, head) then
      redis.call('LPUSH', key, id)
      added = added + 1
    elseif id ~= head then
      local tail = redis.call('LINDEX', key, -1)
      if newer(tail, id) then
        if redis.call('LLEN', key) < cap then
          redis.call('RPUSH', key, id)
          added = added + 1
        end
      elseif id ~= tail and not redis.call('LPOS', key, id) then
        local entries = redis.call('LRANGE', key, 0, -1)
        for j = 2, #entries do
          if newer(id, entries[j]) then
            redis.call('LINSERT', key, 'BEFORE', entries[j], id)
            added = added + 1
            break
          end
        end
      end
    end
  end
  if added > 0 and redis.call('LLEN', key) > cap then
    redis.call('LTRIM', key, 0, cap - 1)
  end
  return added
end
"""

# KEYS[1]: the list. ARGV[1]: the cap. ARGV[2..]: tweet IDs, any order. Returns how many were added.
MERGE_IDS = _NEWER + _MERGE + "return merge(KEYS[1], tonumber(ARGV[1]), ARGV, 2)\n"

# The two halves of the backfill handshake (docs/architecture.md, "Fanout worker"), each one atomic
# step on the author's slot. A tweet is recorded among its author's recent tweets in the same step
# that reads who followed the author lately; a follow is noted among those new followers in the
# same step that reads the recent tweets. Whichever of the two runs second sees the other, so a
# tweet posted before a follow reaches the follower by the backfill or by the push, in any order
# of events, even while the follower list the push reads still lags the follow.
#
# RECORD_TWEET: KEYS[1] recent tweets, KEYS[2] new followers. ARGV[1] recent cap, ARGV[2] now
# (seconds), ARGV[3] how long a follow stays new (seconds), ARGV[4] the tweet ID.
# Returns the followers noted within that time.
RECORD_TWEET = (
    _NEWER
    + _MERGE
    + """
merge(KEYS[1], tonumber(ARGV[1]), ARGV, 4)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. (tonumber(ARGV[2]) - tonumber(ARGV[3])))
return redis.call('ZRANGE', KEYS[2], 0, -1)
"""
)

# NOTE_FOLLOW: KEYS[1] recent tweets, KEYS[2] new followers. ARGV[1] now (seconds), ARGV[2] how long
# a follow stays new (seconds), ARGV[3] the follower, ARGV[4] "1" followed, "0" unfollowed (forgotten).
# Returns the author's recent tweets, newest first.
NOTE_FOLLOW = """
local window = tonumber(ARGV[2])
if ARGV[4] == '1' then
  redis.call('ZADD', KEYS[2], tonumber(ARGV[1]), ARGV[3])
  redis.call('EXPIRE', KEYS[2], math.ceil(window))
else
  redis.call('ZREM', KEYS[2], ARGV[3])
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. (tonumber(ARGV[1]) - window))
return redis.call('LRANGE', KEYS[1], 0, -1)
"""

# Remove tweet IDs from a list. KEYS[1]: the list. ARGV: tweet IDs. Returns how many were removed.
REMOVE_IDS = """
local removed = 0
for i = 1, #ARGV do
  removed = removed + redis.call('LREM', KEYS[1], 1, ARGV[i])
end
return removed
"""

# The index of the first entry of a newest-first list older than a tweet ID (the list's length if
# none is): a binary search over the sorted list, so the cursor need not be in it any more.
_FIRST_OLDER = """
local function first_older(key, cursor)
  local lo, hi = 0, redis.call('LLEN', key)
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    local entry = redis.call('LINDEX', key, mid)
    if entry == cursor or newer(entry, cursor) then lo = mid + 1 else hi = mid end
  end
  return lo
end
"""

# The entries of a newest-first list older than a tweet ID, up to a limit: the page after a cursor.
# KEYS[1]: the list. ARGV[1]: the cursor's tweet ID. ARGV[2]: the most entries returned (0: all).
OLDER_THAN = (
    _NEWER
    + _FIRST_OLDER
    + """
local lo = first_older(KEYS[1], ARGV[1])
local limit = tonumber(ARGV[2])
if limit > 0 then return redis.call('LRANGE', KEYS[1], lo, lo + limit - 1) end
return redis.call('LRANGE', KEYS[1], lo, -1)
"""
)

# A window of a home timeline with what its read needs from the timelines' Redis, in one step:
# the home timeline's first ``limit`` entries older than the cursor (from the newest without one);
# the cached author of each of them (a tweet_author key, or false); and, for each author list
# named, the author's recent tweets in the window's range: older than the cursor, and no older than
# the window's oldest entry unless the window holds fewer than ``limit`` entries (then it is the
# timeline's end, and every older tweet belongs to it). That range is what the reader merges into
# the window, so nothing else crosses the wire.
#
# Single node only: its keys are in many slots (a user's, each author's, each tweet's), and the
# authors' keys are built here from the entries, so they cannot be declared in KEYS; a standalone
# server allows both. A Redis Cluster reads the same with several commands (``TimelineStore.window``).
# Read-only: safe to run again, and in any order with the writes.
#
# KEYS[1]: the home timeline. KEYS[2..]: authors' recent-tweet lists. ARGV[1]: limit (> 0).
# ARGV[2]: the cursor's tweet ID, or "" for the newest. ARGV[3], ARGV[4]: what goes before and after
# a tweet ID in its author's key. Returns {entries, authors, recent of KEYS[2], recent of KEYS[3], ...}.
HOME_WINDOW = (
    _NEWER
    + _FIRST_OLDER
    + """
local limit = tonumber(ARGV[1])
local cursor = ARGV[2] ~= '' and ARGV[2] or nil
local start = cursor and first_older(KEYS[1], cursor) or 0
local entries = redis.call('LRANGE', KEYS[1], start, start + limit - 1)
local floor = #entries == limit and entries[#entries] or nil
local authors = {}
for first = 1, #entries, 512 do  -- MGET in parts: unpack's stack is bounded
  local last = math.min(first + 511, #entries)
  local author_keys = {}
  for i = first, last do author_keys[#author_keys + 1] = ARGV[3] .. entries[i] .. ARGV[4] end
  local part = redis.call('MGET', unpack(author_keys))
  for i = 1, #author_keys do authors[first + i - 1] = part[i] end
end
local result = {entries, authors}
for k = 2, #KEYS do
  local key = KEYS[k]
  local from = cursor and first_older(key, cursor) or 0
  local found, step, more = {}, 16, true
  while more do
    local part = redis.call('LRANGE', key, from, from + step - 1)
    more = #part == step
    for i = 1, #part do
      if floor and newer(floor, part[i]) then
        more = false
        break
      end
      found[#found + 1] = part[i]
    end
    from = from + step
    step = step * 2
  end
  result[k + 1] = found
end
return result
"""
)

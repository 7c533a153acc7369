"""Mute, Unmute and ListMutes (SPEC §3b).

A mute is one account's own setting about another: it lives in the muter's partition, touches no
follow, request or count, and hides the muted account's tweets from the muter's home timeline
(``home_timeline.py`` reads it with the relationships it already reads). A mute given a duration
ends by itself: a mute past its end is simply not in force (``Mute.in_force``,
``Relationship.as_of``), whenever DynamoDB's TTL reclaims its items.

A repeat replaces the duration and the notifications flag; a mute still in force keeps when it was
made (its place in ``ListMutes``), one that has ended is made anew. Each write is conditioned on the
mute it read, so concurrent mutes of one pair serialise like the other writes (``races.py``).
"""

from __future__ import annotations

from graph_service.domain.errors import InvalidDuration, Unavailable
from graph_service.domain.ids import require_id, require_pair
from graph_service.domain.models import Mute
from graph_service.domain.ports import GraphChanges, MuteReads, MuteWrites
from graph_service.domain.times import now_us
from graph_service.rules.paging import Page, Pager
from graph_service.rules.races import RACE_ATTEMPTS

__all__ = ["MAX_DURATION_NS", "Mutes", "duration_ns"]

MAX_DURATION_NS = 100 * 366 * 86_400 * 1_000_000_000
"""The longest duration a mute may be given (100 years, counting every year as a leap year)."""
NS_PER_SECOND = 1_000_000_000


def duration_ns(seconds: int, nanos: int) -> int:
    """A ``google.protobuf.Duration``'s length in nanoseconds; ``InvalidDuration`` for one that is
    not well formed (nanos beyond a second, or of the other sign than the seconds)."""
    if abs(nanos) >= NS_PER_SECOND or (seconds > 0 > nanos) or (seconds < 0 < nanos):
        raise InvalidDuration("duration", "is not a well-formed duration (seconds and nanos disagree)")
    return seconds * NS_PER_SECOND + nanos


class Mutes:
    def __init__(self, writes: MuteWrites, reads: MuteReads, changes: GraphChanges, pager: Pager) -> None:
        self._writes = writes
        self._reads = reads
        self._changes = changes
        self._pager = pager

    async def mute(self, muter_id: int, muted_id: int, duration_ns: int, notifications: bool) -> None:
        """``duration_ns`` 0: until unmuted; it ends ``duration_ns`` after the call, rounded up to
        the microsecond (a mute given a duration never becomes one without an end)."""
        require_pair(muter_id, "muter_id", muted_id, "muted_id")
        if duration_ns < 0:
            raise InvalidDuration("duration", "must not be negative")
        if duration_ns > MAX_DURATION_NS:
            raise InvalidDuration("duration", "must be at most 100 years")
        for _ in range(RACE_ATTEMPTS):
            now = now_us()
            stored = await self._writes.mute_of(muter_id, muted_id)
            made_at = stored.at_us if stored is not None and stored.in_force(now) else now
            expires = 0 if duration_ns == 0 else now + -(-duration_ns // 1000)
            mute = Mute(muted_id, made_at, expires, notifications)
            if await self._writes.put_mute(muter_id, mute, replacing=stored):
                await self._changes.mute_settled(muter_id, muted_id)
                return
            # Another mute or unmute of the pair came between the read and the write: read again.
        raise Unavailable("mute kept racing concurrent writes")

    async def mute_for(self, muter_id: int, muted_id: int, seconds: int, nanos: int, notifications: bool) -> None:
        """``mute`` with a ``google.protobuf.Duration``'s fields (both 0: until unmuted); the IDs are
        checked before the duration."""
        require_pair(muter_id, "muter_id", muted_id, "muted_id")
        await self.mute(muter_id, muted_id, duration_ns(seconds, nanos), notifications)

    async def unmute(self, muter_id: int, muted_id: int) -> None:
        require_pair(muter_id, "muter_id", muted_id, "muted_id")
        for _ in range(RACE_ATTEMPTS):
            stored = await self._writes.mute_of(muter_id, muted_id)
            if stored is None or await self._writes.remove_mute(muter_id, stored):
                await self._changes.mute_settled(muter_id, muted_id)
                return
        raise Unavailable("unmute kept racing concurrent writes")

    async def list_mutes(self, user_id: int, page_size: int, page_token: str) -> Page[Mute]:
        """The mutes in force, newest first by when they were made."""
        require_id(user_id, "user_id")
        now = now_us()
        return await self._pager.page(
            f"mutes:{user_id}", page_size, page_token, lambda n, a: self._reads.list_mutes(user_id, n, a, now_us=now)
        )

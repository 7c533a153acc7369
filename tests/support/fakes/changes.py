"""``GraphChanges`` that records the notices, for unit tests of the service layer only (held to the
contract of ``tests/support/contracts/changes.py``, with the cache write-through)."""

from __future__ import annotations

__all__ = ["RecordingChanges"]

Notice = tuple[str, int, int]


class RecordingChanges:
    def __init__(self) -> None:
        self.notices: list[Notice] = []
        """(kind, a, b): ``follow`` / ``unfollow`` (follower, followee), ``pair`` (a, b), ``settings`` (user,
        user), ``mute`` (muter, muted)."""

    def settled_pairs(self) -> set[frozenset[int]]:
        """Every pair of accounts some notice was about."""
        return {frozenset((a, b)) for _, a, b in self.notices}

    async def follow_settled(self, follower_id: int, followee_id: int, at_us: int | None, *, following: bool) -> None:
        self.notices.append(("follow" if following else "unfollow", follower_id, followee_id))

    async def pair_settled(self, a: int, b: int) -> None:
        self.notices.append(("pair", a, b))

    async def settings_settled(self, user_id: int) -> None:
        self.notices.append(("settings", user_id, user_id))

    async def mute_settled(self, muter_id: int, muted_id: int) -> None:
        self.notices.append(("mute", muter_id, muted_id))

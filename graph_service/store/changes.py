"""Turns DynamoDB Stream records of the followers table into edge changes.

Only membership items (``sk = E#<follower>``) count; the ordering items (``T#...``) of the same
transaction are ignored, and so is every other item (requests, blocks, mutes, settings, and their
deletions by TTL), which only names a pair whose cached entries may be stale (``touched_pairs``).
The record shape is the same from GetRecords and from a Lambda event.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from graph_service.store import items as it

__all__ = ["EdgeChange", "edge_change", "edge_changes", "touched_pairs"]

PAIR_ITEMS = (it.REQUEST, it.BLOCK, it.MUTE)
"""Membership items of a pair other than the edge: a pending request (pk asked by other), a block (pk
blocks other), a mute (pk mutes other). Their order items (``RT#``, ``MT#``) start otherwise."""


@dataclass(frozen=True, slots=True)
class EdgeChange:
    follower_id: int
    followee_id: int
    at_us: int
    added: bool
    sequence: str
    event_id: str

    def deltas(self) -> list[tuple[int, int, int]]:
        """(user, followers delta, following delta) for both users of the edge."""
        step = 1 if self.added else -1
        return [(self.followee_id, step, 0), (self.follower_id, 0, step)]


def edge_change(record: dict[str, Any]) -> EdgeChange | None:
    data = record.get("dynamodb", {})
    event = record.get("eventName")
    if event not in {"INSERT", "REMOVE"}:
        return None
    image = data.get("NewImage") if event == "INSERT" else data.get("OldImage")
    keys = data.get("Keys", {})
    sort_key = keys.get("sk", {}).get("S", "")
    if not sort_key.startswith(it.EDGE) or not image:
        return None
    return EdgeChange(
        follower_id=int(image["other"]["N"]),
        followee_id=int(keys["pk"]["N"]),
        at_us=int(image["at"]["N"]),
        added=event == "INSERT",
        sequence=str(data["SequenceNumber"]),
        event_id=str(record.get("eventID", data["SequenceNumber"])),
    )


def edge_changes(records: list[dict[str, Any]]) -> list[EdgeChange]:
    return [c for c in (edge_change(r) for r in records) if c is not None]


def touched_pairs(records: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """The pairs whose request, block or mute items changed, as ``(other, owner)``, and
    ``(user, user)`` for a privacy change: whatever relationship and privacy entries the cache holds
    for them may be stale."""
    pairs: dict[tuple[int, int], None] = {}
    for record in records:
        data = record.get("dynamodb", {})
        keys = data.get("Keys", {})
        sort_key = keys.get("sk", {}).get("S", "")
        owner = int(keys.get("pk", {}).get("N", "0"))
        if sort_key == it.SETTINGS:
            pairs[(owner, owner)] = None
        elif sort_key.startswith(PAIR_ITEMS):
            prefix = next(p for p in PAIR_ITEMS if sort_key.startswith(p))
            pairs[(int(sort_key[len(prefix) :]), owner)] = None
    return list(pairs)

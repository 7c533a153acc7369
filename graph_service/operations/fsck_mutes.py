"""The invariant of one account's mute of another, checked on the items read of it (pure; no I/O).

A mute is two items in the muter's ``followers`` partition (``store/items.py``): ``M#<muted>``
(membership) and ``MT#<at>#<muted>`` (its place in ``ListMutes``), with the same attributes
(``other``, ``at``, ``exp``, ``ntf``), written and deleted in one transaction. So every ``M#`` has
its ``MT#`` at its ``at`` holding the same mute, and every ``MT#`` has its ``M#``, unless the mute
has ended: DynamoDB's TTL reclaims each item on its own, so one may outlive the other for a while,
and an ended mute is in no list or relationship anyway.

A ``MuteView`` is what was read of one (muter, muted): the whole partition (the first look: the
scan or a user's query hands it over whole), or the keys one ``TransactGetItems`` snapshot read
(the confirmation), so that an item nobody read is never taken for a missing one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from graph_service.domain.models import Edge, Mute
from graph_service.dynamodb.operations import Item
from graph_service.operations.fsck_report import Violation
from graph_service.store import items as it

__all__ = ["MuteView", "evaluate_mute", "held", "member_sk", "mute_items", "order_sk"]


def member_sk(muted: int) -> str:
    return f"{it.MUTE}{muted:0{it.ID_DIGITS}d}"


def order_sk(mute: Mute) -> str:
    return f"{it.MUTE_ORDER}{mute.position}"


def _muted_of(sk: str) -> int | None:
    """The muted account an ``M#`` or ``MT#`` sort key names; None for any other item."""
    try:
        if sk.startswith(it.MUTE_ORDER):
            return Edge.from_position(sk[len(it.MUTE_ORDER) :]).user_id
        if sk.startswith(it.MUTE):
            return int(sk[len(it.MUTE) :])
    except ValueError:
        return None
    return None


def held(item: Item, muted: int) -> Mute:
    """The mute an item holds; a missing attribute reads as the muted account or 0 (so an item that
    lost one differs from its pair instead of failing the check)."""
    return Mute(
        user_id=int(item.get("other", {}).get("N", muted)),
        at_us=int(item.get("at", {}).get("N", "0")),
        expires_us=int(item.get("exp", {}).get("N", "0")),
        notifications=bool(item.get("ntf", {}).get("BOOL", False)),
    )


def mute_items(items: Iterable[Item]) -> dict[int, dict[str, Mute]]:
    """A ``followers`` partition's mute items grouped by the muted account: sort key -> the mute held."""
    by_muted: dict[int, dict[str, Mute]] = {}
    for item in items:
        sk = str(item["sk"]["S"])
        muted = _muted_of(sk)
        if muted is not None:
            by_muted.setdefault(muted, {})[sk] = held(item, muted)
    return by_muted


@dataclass(frozen=True)
class MuteView:
    muter: int
    muted: int
    found: dict[str, Mute]
    """The mute items present (sort key -> the mute held)."""
    looked: frozenset[str] | None = None
    """Sort keys read one by one: absent from ``found`` means absent. None: the partition was read whole."""

    def seen(self, sk: str) -> bool:
        return self.looked is None or sk in self.looked


def _text(mute: Mute) -> str:
    return f"at {mute.at_us}, exp {mute.expires_us}, ntf {str(mute.notifications).lower()}"


def _where(view: MuteView, sk: str) -> str:
    prefix = it.MUTE_ORDER if sk.startswith(it.MUTE_ORDER) else it.MUTE
    rest = sk[len(prefix) :]
    shown = f"{int(rest)}" if prefix == it.MUTE else f"{Edge.from_position(rest).at_us}#{view.muted}"
    return f"followers pk={view.muter} {prefix}{shown}"


def evaluate_mute(view: MuteView, now_us: int) -> list[Violation]:
    """Every violation of the mute's invariant that ``view`` shows at ``now_us``."""
    found: list[Violation] = []

    def unpaired(detail: str) -> None:
        found.append(Violation("mute_unpaired", view.muter, view.muted, detail))

    member_key = member_sk(view.muted)
    member = view.found.get(member_key)
    judged: str | None = None
    if member is not None and member.in_force(now_us):
        judged = order_sk(member)
        order = view.found.get(judged)
        if view.seen(judged) and order is None:
            unpaired(f"{_where(view, member_key)} ({_text(member)}) has no {it.MUTE_ORDER}")
        elif view.seen(judged) and order != member:
            assert order is not None
            unpaired(f"{_where(view, member_key)} ({_text(member)}), its {it.MUTE_ORDER}: {_text(order)}")
    if not view.seen(member_key):
        return found
    for sk, mute in view.found.items():
        if not sk.startswith(it.MUTE_ORDER) or sk == judged or not mute.in_force(now_us):
            continue
        if member is None:
            unpaired(f"{_where(view, sk)} ({_text(mute)}) has no {it.MUTE}{view.muted}")
        elif order_sk(member) != sk or member != mute:
            unpaired(f"{_where(view, sk)} ({_text(mute)}) has no {it.MUTE}{view.muted} alike ({_text(member)})")
    return found

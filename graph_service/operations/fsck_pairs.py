"""The invariants of one pair of accounts, checked on the items read of it (pure; no I/O).

Every item of the edge tables (``store/items.py``) belongs to one pair: ``followers`` pk=B holds
``E#A``/``T#<t>#A`` (A follows B), ``R#A``/``RT#<t>#A`` (A's request), ``B#A`` (B blocks A);
``following`` pk=A mirrors the follow as ``E#B``/``T#<t>#B`` and the request as ``R#B`` (with the
same ``at``, and no order item: A's own requests are found by it, not listed in order). A
``PairView`` is what was read
of one pair: the items found (key -> ``at``) and which keys were looked at, so that an item
nobody read is never taken for a missing one. ``evaluate`` gives every violation the view shows.

A view comes from one partition plus consistent reads of the other side (cheap, the first
look), or from one TransactGetItems of every key of the pair (a serializable snapshot, the
confirmation): only what the snapshot shows is reported.

Mutes (``M#``/``MT#``, both in the muter's partition) are not pair items here: ``fsck_mutes.py``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from graph_service.domain.models import Edge
from graph_service.dynamodb.operations import Item
from graph_service.dynamodb.tables import FOLLOWERS, FOLLOWING
from graph_service.operations.fsck_report import Violation
from graph_service.store import items as it

__all__ = [
    "ItemKey",
    "PairView",
    "evaluate",
    "first_look_keys",
    "implied_orders",
    "item_key",
    "member_keys",
    "pair_items",
    "parse_sk",
    "request_partners",
]

ItemKey = tuple[str, int, str]
"""(table: ``followers`` or ``following``, pk, sk)."""

ORDER_OF = {it.EDGE: it.EDGE_ORDER, it.REQUEST: it.REQUEST_ORDER}
MEMBER_OF = {order: member for member, order in ORDER_OF.items()}
PAIR_PREFIXES = (it.REQUEST_ORDER, it.EDGE_ORDER, it.EDGE, it.REQUEST, it.BLOCK)  # RT# before R#, T#


def parse_sk(sk: str) -> tuple[str, int, int | None] | None:
    """(prefix, other account, the ``at`` in the key for order items) of a pair item; None for the
    owner's own items (``P``, ``O``), mute items (``fsck_mutes.py``) and anything unknown."""
    for prefix in PAIR_PREFIXES:
        if sk.startswith(prefix):
            rest = sk[len(prefix) :]
            try:
                if prefix in MEMBER_OF:
                    edge = Edge.from_position(rest)
                    return prefix, edge.user_id, edge.at_us
                return prefix, int(rest), None
            except ValueError:
                return None
    return None


def member_key(table: str, owner: int, prefix: str, other: int) -> ItemKey:
    return table, owner, f"{prefix}{other:0{it.ID_DIGITS}d}"


def order_key(table: str, owner: int, prefix: str, other: int, at: int) -> ItemKey:
    return table, owner, f"{prefix}{Edge(other, at).position}"


def member_keys(a: int, b: int, *, mirrors: bool = True) -> list[ItemKey]:
    """The ten membership items of a pair: both follows in both tables, both requests in both
    tables, both blocks (``mirrors=False``: the eight without the requests' mirrors in ``following``)."""
    keys: list[ItemKey] = []
    for f, g in ((a, b), (b, a)):
        keys += [
            member_key(FOLLOWERS, g, it.EDGE, f),
            member_key(FOLLOWING, f, it.EDGE, g),
            member_key(FOLLOWERS, g, it.REQUEST, f),
            member_key(FOLLOWERS, g, it.BLOCK, f),
        ]
        if mirrors:
            keys.append(member_key(FOLLOWING, f, it.REQUEST, g))
    return keys


def item_key(table: str, item: Item) -> ItemKey:
    return table, int(item["pk"]["N"]), str(item["sk"]["S"])


def item_at(item: Item) -> int:
    return int(item.get("at", {}).get("N", "0"))


def pair_items(table: str, owner: int, items: Iterable[Item]) -> dict[int, dict[ItemKey, int]]:
    """A partition's pair items grouped by the other account: key -> ``at``."""
    by_other: dict[int, dict[ItemKey, int]] = {}
    for item in items:
        parsed = parse_sk(str(item["sk"]["S"]))
        if parsed is not None:
            by_other.setdefault(parsed[1], {})[(table, owner, str(item["sk"]["S"]))] = item_at(item)
    return by_other


def implied_orders(found: dict[ItemKey, int]) -> set[ItemKey]:
    """The order items the found membership items require: ``T#`` beside each ``E#`` (and beside
    its mirror in the other table), ``RT#`` beside each ``R#`` in ``followers`` (a request's mirror
    in ``following`` has none)."""
    keys: set[ItemKey] = set()
    for (table, owner, sk), at in found.items():
        parsed = parse_sk(sk)
        if parsed is None or parsed[0] not in ORDER_OF:
            continue
        prefix, other, _ = parsed
        if prefix == it.REQUEST and table == FOLLOWING:
            continue
        keys.add(order_key(table, owner, ORDER_OF[prefix], other, at))
        if prefix == it.EDGE:
            mirror = FOLLOWING if table == FOLLOWERS else FOLLOWERS
            keys.add(order_key(mirror, other, it.EDGE_ORDER, owner, at))
    return keys


def request_partners(found: dict[ItemKey, int]) -> set[ItemKey]:
    """The other half of each request found: the mirror (``following`` pk=A ``R#B``) of a request
    (``followers`` pk=B ``R#A``), and the request of a mirror."""
    keys: set[ItemKey] = set()
    for table, owner, sk in found:
        parsed = parse_sk(sk)
        if parsed is None or parsed[0] != it.REQUEST:
            continue
        partner = FOLLOWING if table == FOLLOWERS else FOLLOWERS
        keys.add(member_key(partner, parsed[1], it.REQUEST, owner))
    return keys


def first_look_keys(table: str, owner: int, other: int, local: dict[ItemKey, int], *, scanning: bool) -> set[ItemKey]:
    """The keys outside the partition (``table``, ``owner``) to read for the pair with ``other``,
    given the partition's items of that pair (``local``).

    A user's partitions checked alone need every item of the pair, but a request's mirror only
    beside a request (or a mirror) of the partition: a mirror in the other account's ``following``
    whose request is gone names nothing in this user's partitions, and is found when that account
    is checked (or by ``--all``), so a pair without requests costs no more than before the mirror.
    When ``scanning`` (every partition of both tables is checked, ``--all``), each partition reads
    only what its own items need: a follower item its mirror, its order item and the follower's
    block; a request its mirror and its requester's block; a block the other direction's items; a
    following item its mirror; a request's mirror its request. The other items of the pair are
    read when their own partition is checked."""
    needed = implied_orders(local) | request_partners(local)
    if not scanning:
        keys = set(member_keys(owner, other, mirrors=False)) | needed
        return {k for k in keys if k[:2] != (table, owner)}
    keys = {k for k in needed if k[:2] != (table, owner)}
    if table == FOLLOWING:
        if member_key(FOLLOWING, owner, it.EDGE, other) in local:
            keys.add(member_key(FOLLOWERS, other, it.EDGE, owner))
        return keys
    if member_key(FOLLOWERS, owner, it.EDGE, other) in local:
        keys |= {member_key(FOLLOWING, other, it.EDGE, owner), member_key(FOLLOWERS, other, it.BLOCK, owner)}
    if member_key(FOLLOWERS, owner, it.REQUEST, other) in local:
        keys.add(member_key(FOLLOWERS, other, it.BLOCK, owner))
    if member_key(FOLLOWERS, owner, it.BLOCK, other) in local:
        keys |= {
            member_key(FOLLOWERS, other, it.EDGE, owner),
            member_key(FOLLOWERS, other, it.REQUEST, owner),
            member_key(FOLLOWING, owner, it.EDGE, other),
            member_key(FOLLOWING, other, it.EDGE, owner),
        }
    return keys


@dataclass(frozen=True)
class PairView:
    a: int
    b: int
    found: dict[ItemKey, int]
    """Items present: key -> ``at``."""
    looked: frozenset[ItemKey] = field(default_factory=frozenset)
    """Keys read one by one: absent from ``found`` means absent."""
    complete: frozenset[tuple[str, int]] = field(default_factory=frozenset)
    """(table, owner) partitions read whole: every item of the pair in them is in ``found``."""

    def seen(self, key: ItemKey) -> bool:
        return key in self.looked or key[:2] in self.complete

    def at(self, key: ItemKey) -> int | None:
        return self.found.get(key)


def _describe(key: ItemKey) -> str:
    table, owner, sk = key
    parsed = parse_sk(sk)
    if parsed is None:
        return f"{table} pk={owner} {sk}"
    prefix, other, at = parsed
    where = f"{prefix}{other}" if at is None else f"{prefix}{at}#{other}"
    return f"{table} pk={owner} {where}"


def _mirror_checks(view: PairView, f: int, g: int) -> list[Violation]:
    """The follow f -> g: present in both tables with the same time."""
    fe_key, ge_key = member_key(FOLLOWERS, g, it.EDGE, f), member_key(FOLLOWING, f, it.EDGE, g)
    if not (view.seen(fe_key) and view.seen(ge_key)):
        return []
    fe, ge = view.at(fe_key), view.at(ge_key)
    if fe is not None and ge is None:
        return [Violation("edge_one_sided", g, f, f"{_describe(fe_key)} (at {fe}) has no {_describe(ge_key)}")]
    if ge is not None and fe is None:
        return [Violation("edge_one_sided", f, g, f"{_describe(ge_key)} (at {ge}) has no {_describe(fe_key)}")]
    if fe is not None and ge is not None and fe != ge:
        return [Violation("edge_time_mismatch", g, f, f"{_describe(fe_key)} at {fe}, {_describe(ge_key)} at {ge}")]
    return []


def _request_mirror_checks(view: PairView, f: int, g: int) -> list[Violation]:
    """f's pending request to g: its ``R#`` in ``followers`` pk=g and its mirror in ``following``
    pk=f, both there with the same time, or neither."""
    request_key, mirror_key = member_key(FOLLOWERS, g, it.REQUEST, f), member_key(FOLLOWING, f, it.REQUEST, g)
    if not (view.seen(request_key) and view.seen(mirror_key)):
        return []
    request, mirror = view.at(request_key), view.at(mirror_key)
    kind = "request_mirror_unpaired"
    if request is not None and mirror is None:
        return [Violation(kind, g, f, f"{_describe(request_key)} (at {request}) has no {_describe(mirror_key)}")]
    if mirror is not None and request is None:
        return [Violation(kind, f, g, f"{_describe(mirror_key)} (at {mirror}) has no {_describe(request_key)}")]
    if request is not None and mirror is not None and request != mirror:
        return [Violation(kind, g, f, f"{_describe(request_key)} at {request}, {_describe(mirror_key)} at {mirror}")]
    return []


def _order_checks(view: PairView, table: str, owner: int, member: str, other: int) -> list[Violation]:
    """A membership item and its order items in one partition: exactly one order item, at its time."""
    found: list[Violation] = []
    m_key = member_key(table, owner, member, other)
    at = view.at(m_key)
    order = ORDER_OF[member]
    if at is not None:
        o_key = order_key(table, owner, order, other, at)
        if view.seen(o_key) and view.at(o_key) is None:
            found.append(Violation("order_unpaired", owner, other, f"{_describe(m_key)} (at {at}) has no {order}"))
    if not view.seen(m_key):
        return found
    for key in view.found:
        parsed = parse_sk(key[2])
        if key[:2] != (table, owner) or parsed is None or parsed[0] != order or parsed[1] != other:
            continue
        if parsed[2] != at:
            detail = f"{_describe(key)} has no {member}{other}"
            if at is not None:
                detail += f" at that time ({member}{other} is at {at})"
            found.append(Violation("order_unpaired", owner, other, detail))
    return found


def _block_checks(view: PairView) -> list[Violation]:
    """Nothing between a and b while either blocks the other."""
    found: list[Violation] = []
    for blocker, blocked in ((view.a, view.b), (view.b, view.a)):
        if view.at(member_key(FOLLOWERS, blocker, it.BLOCK, blocked)) is None:
            continue
        across = []
        for f, g in ((view.a, view.b), (view.b, view.a)):
            for key in (
                member_key(FOLLOWERS, g, it.EDGE, f),
                member_key(FOLLOWING, f, it.EDGE, g),
                member_key(FOLLOWERS, g, it.REQUEST, f),
            ):
                if view.at(key) is not None:
                    across.append(_describe(key))
        if across:
            found.append(
                Violation("across_block", blocker, blocked, f"{blocker} blocks {blocked}, yet: {', '.join(across)}")
            )
    return found


def evaluate(view: PairView) -> list[Violation]:
    """Every violation of the pair's invariants that ``view`` shows."""
    if view.a == view.b:
        return []  # an account's items about itself are corrupt in ways these rules do not name
    found: list[Violation] = []
    for f, g in ((view.a, view.b), (view.b, view.a)):
        found += _mirror_checks(view, f, g)
        found += _request_mirror_checks(view, f, g)
        found += _order_checks(view, FOLLOWERS, g, it.EDGE, f)
        found += _order_checks(view, FOLLOWING, f, it.EDGE, g)
        found += _order_checks(view, FOLLOWERS, g, it.REQUEST, f)
        edge, request = view.at(member_key(FOLLOWERS, g, it.EDGE, f)), view.at(member_key(FOLLOWERS, g, it.REQUEST, f))
        if edge is not None and request is not None:
            found.append(
                Violation(
                    "edge_and_request", g, f, f"followers pk={g} holds E#{f} (at {edge}) and R#{f} (at {request})"
                )
            )
    found += _block_checks(view)
    return list(dict.fromkeys(found))

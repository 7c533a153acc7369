"""Packing an import's rows into TransactWriteItems batches, and reading a cancelled batch.

A row is the seven elements of a new follow (``items.follow_elements``: two membership puts that
must be new, two order items, no pending request, no block either way); a batch adds ONE update
of each follower's outgoing count, by the number of that follower's rows, conditioned on the
following cap. DynamoDB allows 100 elements and each item once per transaction, so a batch:

* holds at most ``MAX_TRANSACTION_ITEMS`` elements (12 to 14 rows);
* never holds a pair twice in either direction: (a, b) and (b, a) check the same two block items.
  A repeated (a, b) is a ``DUPLICATE`` reject before packing; (b, a) after (a, b) starts a new batch.

Batches are cut in file order, so a batch is a contiguous range of lines (``Unit``): the import's
watermark is the last line of the last of the contiguous finished units.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum

from graph_service.dynamodb.operations import MAX_TRANSACTION_ITEMS, Item
from graph_service.operations.import_rows import Reason, Reject, Row
from graph_service.store import items as it

__all__ = ["Settled", "Unit", "classify", "pack", "transaction"]

FAILED = "ConditionalCheckFailed"


class Settled(StrEnum):
    """A row that is not a reject: its edge is now there."""

    WRITTEN = "written"
    PRESENT = "already_present"
    """The pair already had a follow (any time): left as it is, so a second import adds nothing."""


Outcome = Settled | Reason


@dataclass(slots=True)
class Unit:
    """Lines ``first_line..last_line`` of the file: the rows of one batch and the lines rejected
    while reading them."""

    first_line: int
    last_line: int
    rows: list[Row] = field(default_factory=list)
    rejects: list[Reject] = field(default_factory=list)

    @property
    def followers(self) -> set[int]:
        return {row.follower_id for row in self.rows}


def elements_of(rows: int, followers: int) -> int:
    return rows * it.FOLLOW_ELEMENTS + followers


def pack(
    parsed: Iterable[tuple[int, Row | Reject | None]], *, max_elements: int = MAX_TRANSACTION_ITEMS
) -> Iterator[Unit]:
    """Cut the parsed lines (line number, what it holds) into units, in file order."""
    unit: Unit | None = None
    followers: set[int] = set()
    pairs: set[tuple[int, int]] = set()
    for line, what in parsed:
        if isinstance(what, Row):
            pair = (min(what.follower_id, what.followee_id), max(what.follower_id, what.followee_id))
            grown = elements_of(len(unit.rows) + 1 if unit else 1, len(followers | {what.follower_id}))
            if unit is not None and unit.rows and (grown > max_elements or pair in pairs):
                yield unit
                unit, followers, pairs = None, set(), set()
        if unit is None:
            unit = Unit(first_line=line, last_line=line)
        unit.last_line = line
        if isinstance(what, Row):
            unit.rows.append(what)
            followers.add(what.follower_id)
            pairs.add((min(what.follower_id, what.followee_id), max(what.follower_id, what.followee_id)))
        elif isinstance(what, Reject):
            unit.rejects.append(what)
    if unit is not None:
        yield unit


def transaction(
    rows: list[Row], followers_table: str, following_table: str, cap: int
) -> tuple[list[Item], dict[int, int]]:
    """The batch's elements (row ``i`` at ``7*i .. 7*i+6``, then one outgoing-count update per
    follower) and where each follower's update is."""
    elements: list[Item] = []
    for row in rows:
        elements += it.follow_elements(followers_table, following_table, row.follower_id, row.followee_id, row.at_us)
    where: dict[int, int] = {}
    for follower, delta in Counter(row.follower_id for row in rows).items():
        where[follower] = len(elements)
        elements.append(it.count_outgoing(following_table, follower, delta, cap=cap))
    return elements, where


def classify(codes: list[str], index: int) -> Outcome | None:
    """What the cancellation codes say of row ``index``'s own elements; None when they passed."""
    own = codes[index * it.FOLLOW_ELEMENTS : (index + 1) * it.FOLLOW_ELEMENTS]
    if FAILED in (own[0], own[2]):
        return Settled.PRESENT
    if FAILED in (own[5], own[6]):
        return Reason.BLOCKED
    if own[4] == FAILED:
        return Reason.REQUEST_PENDING
    return None

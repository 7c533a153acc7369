"""The rows of an import file: ``follower_id,followee_id[,followed_at]``, one follow a line.

Everything that can be decided from the file alone is decided here, before anything is written:
a line that is not two or three fields, an ID that is not a user ID (SPEC §2), a self-follow, a
time that cannot be read or lies after the import started, and a pair already given on an earlier
line. Such a line becomes a ``Reject`` with a stable reason code; the others become ``Row``s.

Choices (documented for operators in the README):

* Line numbers are physical lines of the file, from 1. Blank lines are skipped (not rows).
* A header is optional: the first non-blank line is one when its fields are the column names
  (``follower_id``, ``followee_id`` and optionally ``followed_at``, in any order, any case); it
  then says the columns' order. A first line that is neither a header nor a row is rejected.
* Fields are CSV (quotes allowed), surrounding spaces ignored. IDs are decimal digits only.
* ``followed_at`` is ISO-8601 with a timezone (``2024-05-01T12:00:00Z``) or integer Unix seconds;
  it may not be after the import's start. Missing or empty: the import's start time plus the line
  number in microseconds, so rows without a time keep the file's order in the lists and a resumed
  import gives every row the same time as one uninterrupted run would.
* A pair given again on a later line is a ``DUPLICATE`` of the first line (whatever became of it).
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from graph_service.domain.ids import is_id

__all__ = ["Reason", "Reject", "Row", "RowParser", "count_rows", "parse_time"]

COLUMNS = ("follower_id", "followee_id", "followed_at")
DIGITS = re.compile(r"[0-9]+")
UNIX_SECONDS = re.compile(r"-?[0-9]+")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)


class Reason(StrEnum):
    """Why a line was not imported (the reject file's ``reason`` column)."""

    MALFORMED = "MALFORMED"
    """Not two or three CSV fields (or not text)."""
    INVALID_ID = "INVALID_ID"
    """An ID that is not an integer in 1..2**64-1."""
    SELF_FOLLOW = "SELF_FOLLOW"
    INVALID_TIME = "INVALID_TIME"
    """Not ISO-8601 with a timezone nor integer Unix seconds, before 1970, or after the import started."""
    DUPLICATE = "DUPLICATE"
    """The same pair on an earlier line of the file."""
    BLOCKED = "BLOCKED"
    """One of the two blocks the other."""
    REQUEST_PENDING = "REQUEST_PENDING"
    """The follower has a pending follow request to the followee (accept or withdraw it first)."""
    FOLLOW_LIMIT = "FOLLOW_LIMIT"
    """The follower would pass ``SG_MAX_FOLLOWING`` (follows plus pending requests)."""
    ACCOUNT_AWAY = "ACCOUNT_AWAY"
    """One of the two is deactivated or deleted (SPEC §3b): a Follow would be refused too."""


@dataclass(frozen=True, slots=True)
class Row:
    line: int
    follower_id: int
    followee_id: int
    at_us: int
    raw: str
    """The line as it was (for the reject file, should the store refuse the row)."""


@dataclass(frozen=True, slots=True)
class Reject:
    line: int
    reason: Reason
    detail: str
    raw: str


def parse_time(text: str, *, not_after_us: int) -> int | str:
    """Microseconds since the epoch, or why ``text`` is not a usable follow time."""
    if UNIX_SECONDS.fullmatch(text):
        at_us = int(text) * 1_000_000
    else:
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            return "not ISO-8601 or Unix seconds"
        if moment.tzinfo is None:
            return "no timezone"
        at_us = (moment - EPOCH) // MICROSECOND
    if at_us < 0:
        return "before 1970"
    if at_us > not_after_us:
        return "in the future"
    return at_us


_SPACE_AFTER_QUOTE = re.compile(r'"[ \t]+(?=,|$)')


def _fields(text: str) -> list[str] | None:
    """The line's CSV fields, spaces around each ignored (``"204" , "205"`` too: strict CSV allows
    none after a closing quote, so they are dropped first); None for a line CSV cannot read."""
    try:
        parsed = list(csv.reader([_SPACE_AFTER_QUOTE.sub('"', text)], strict=True, skipinitialspace=True))
    except csv.Error:
        return None
    return [f.strip() for f in parsed[0]] if parsed else []


def _text(line: int, raw: bytes) -> str | Reject:
    """The line as text without its line break; not UTF-8: a ``MALFORMED`` reject."""
    try:
        return raw.decode("utf-8-sig" if line == 1 else "utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        shown = raw.decode("utf-8", "backslashreplace").rstrip("\r\n")
        return Reject(line, Reason.MALFORMED, "not UTF-8 text", shown)


def _header_order(fields: list[str]) -> tuple[int, int, int] | None:
    """Where each column is, if ``fields`` are the column names (a header); else None."""
    names = [f.lower() for f in fields]
    if sorted(names) not in (sorted(COLUMNS[:2]), sorted(COLUMNS)):
        return None
    follower, followee, at = (names.index(c) if c in names else 2 for c in COLUMNS)
    return follower, followee, at


def count_rows(lines: Iterable[tuple[int, bytes]]) -> int:
    """How many of the numbered lines are rows (each becomes a row or a reject): neither blank nor
    the header, by ``RowParser.parse``'s own rules. The import's progress total, read before it
    starts: a pass over the file that decodes each line and parses only the first."""
    rows = 0
    first = True
    for line, raw in lines:
        text = _text(line, raw)
        if isinstance(text, str):
            if not text.strip():
                continue
            if first:  # as in ``parse``, a line that is not UTF-8 is a reject, and the header may follow it
                first = False
                fields = _fields(text)
                if fields is not None and _header_order(fields) is not None:
                    continue
        rows += 1
    return rows


class RowParser:
    """Turns lines into rows or rejects, in file order; holds the pairs seen so far (about 100
    bytes a row) so that a repeated pair is found wherever it is."""

    def __init__(self, started_us: int) -> None:
        self._started_us = started_us
        self._order = (0, 1, 2)
        self._first = True
        self._seen: dict[int, int] = {}

    def parse(self, line: int, raw: bytes) -> Row | Reject | None:
        """The line's row or reject; None for a blank line or the header."""
        text = _text(line, raw)
        if isinstance(text, Reject):
            return text
        if not text.strip():
            return None
        fields = _fields(text)
        first, self._first = self._first, False
        if fields is not None and first and self._header(fields):
            return None
        if fields is None or not 2 <= len(fields) <= 3:
            return Reject(line, Reason.MALFORMED, "expected follower_id,followee_id[,followed_at]", text)
        return self._row(line, fields, text)

    def _header(self, fields: list[str]) -> bool:
        order = _header_order(fields)
        if order is None:
            return False
        self._order = order
        return True

    def _row(self, line: int, fields: list[str], text: str) -> Row | Reject:
        if max(self._order[:2]) >= len(fields):
            return Reject(line, Reason.MALFORMED, "fewer fields than the header names", text)
        ids: list[int] = []
        for index, column in zip(self._order[:2], COLUMNS[:2], strict=True):
            value = fields[index]
            if not DIGITS.fullmatch(value) or not is_id(int(value)):
                return Reject(line, Reason.INVALID_ID, f"{column} {value!r} is not an ID in 1..2**64-1", text)
            ids.append(int(value))
        follower, followee = ids
        if follower == followee:
            return Reject(line, Reason.SELF_FOLLOW, f"{follower} follows itself", text)
        stamp = fields[self._order[2]] if len(fields) > self._order[2] else ""
        at_us = self._started_us + line
        if stamp:
            read = parse_time(stamp, not_after_us=self._started_us)
            if isinstance(read, str):
                return Reject(line, Reason.INVALID_TIME, f"followed_at {stamp!r}: {read}", text)
            at_us = read
        pair = follower << 64 | followee
        earlier = self._seen.setdefault(pair, line)
        if earlier != line:
            return Reject(line, Reason.DUPLICATE, f"same pair as line {earlier}", text)
        return Row(line, follower, followee, at_us, text)

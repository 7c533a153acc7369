"""A call's arguments, checked before anything is built or sent, and the request message built from them.

A method's parameters are named as the request fields they fill, so one rule per kind of field,
picked by the field's name, checks every method: ``*_id`` is a user ID, ``*_ids`` a list of them,
``page_size`` and ``limit`` a count from 0, ``page_token`` a string, ``private`` and
``notifications`` a bool, ``duration`` a ``timedelta`` or None. A wrong one is a ``ValueError``
naming the argument (``follower_id must be a positive integer, not '5'``) rather than protobuf's
``TypeError`` or "Value out of range" without a name. ``tests/unit/client/test_arguments.py`` checks
that every field of every request the clients send has a rule.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any, SupportsIndex, TypeVar

from google.protobuf import duration_pb2
from google.protobuf.message import Message

__all__ = ["MAX_USER_ID", "request", "rule_for"]

M = TypeVar("M", bound=Message)

MAX_USER_ID = 2**64 - 1
"""User IDs are unsigned 64-bit integers above 0."""
MAX_COUNT = 2**31 - 1
"""``page_size`` and ``limit`` are 32-bit integers (the server clamps or refuses far lower)."""


def request(message: type[M], **fields: object) -> M:
    """``message(**fields)``, each field checked (and converted) by its rule first."""
    return message(**{name: rule_for(name)(name, value) for name, value in fields.items()})


def rule_for(name: str) -> Callable[[str, Any], object]:
    """The rule of a request field; a field without one is a bug of the client (the test finds it)."""
    rule = _RULES.get(name)
    if rule is None:
        if name.endswith("_ids"):
            return user_ids
        if name.endswith("_id"):
            return user_id
        raise LookupError(f"no argument rule for the request field {name!r}")
    return rule


def _integer(value: object) -> int | None:
    """``value`` as an int when it is an integer (``int``, ``numpy.int64``: anything with
    ``__index__``), but not a bool; else None."""
    if type(value) is int:
        return value
    if isinstance(value, bool) or not isinstance(value, SupportsIndex):
        return None
    return operator.index(value)


def user_id(name: str, value: object) -> int:
    number = _integer(value)
    if number is None or number < 1:
        raise ValueError(f"{name} must be a positive integer, not {value!r}")
    if number > MAX_USER_ID:
        raise ValueError(f"{name} must be at most 2**64-1 (user IDs are unsigned 64-bit integers), not {value!r}")
    return number


def user_ids(name: str, values: object) -> list[int]:
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise ValueError(f"{name} must be a list of user IDs, not {values!r}")
    return [user_id(f"{name}[{index}]", value) for index, value in enumerate(values)]


def count(name: str, value: object) -> int:
    number = _integer(value)
    if number is None or number < 0:
        raise ValueError(f"{name} must be an integer from 0 up (0: the default), not {value!r}")
    if number > MAX_COUNT:
        raise ValueError(f"{name} must be at most 2**31-1, not {value!r}")
    return number


def page_token(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a str (a page's next_page_token, or '' for the first page), not {value!r}")
    return value


def flag(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, not {value!r}")
    return value


def duration(name: str, value: object) -> duration_pb2.Duration | None:
    """A ``timedelta`` as sent: exact to the microsecond, the sign kept (the server refuses a negative
    one with its reason); None stays unset."""
    if value is None:
        return None
    if not isinstance(value, timedelta):
        raise ValueError(f"{name} must be a datetime.timedelta or None, not {value!r}")
    sent = duration_pb2.Duration()
    sent.FromTimedelta(value)
    return sent


_RULES: dict[str, Callable[[str, Any], object]] = {
    "page_size": count,
    "limit": count,
    "page_token": page_token,
    "private": flag,
    "notifications": flag,
    "duration": duration,
}

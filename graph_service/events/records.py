"""The envelope of every event record: key, value and two headers, and its checked opening.

Every record carries two headers, ``event-type`` (the message's full name) and ``schema-version``;
a consumer refuses what it does not know instead of guessing. Nothing here knows a kind of event:
what each kind puts in the envelope, and how it is read back, is ``graph_service.events.kinds``.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import DecodeError, Message

__all__ = [
    "EVENT_TYPE_HEADER",
    "SCHEMA_VERSION",
    "VERSION_HEADER",
    "OutgoingRecord",
    "UnreadableEvent",
    "headers",
    "opened",
    "parse",
]

EVENT_TYPE_HEADER = "event-type"
VERSION_HEADER = "schema-version"
SCHEMA_VERSION = b"1"


@dataclass(frozen=True, slots=True)
class OutgoingRecord:
    key: bytes
    value: bytes
    headers: list[tuple[str, bytes]]


class UnreadableEvent(Exception):
    """A record no consumer of this version can use; ``reason`` is the counter it is skipped under."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


def headers(event_type: bytes) -> list[tuple[str, bytes]]:
    """The headers of a record of ``event_type`` (a message's full name), at this schema version."""
    return [(EVENT_TYPE_HEADER, event_type), (VERSION_HEADER, SCHEMA_VERSION)]


def opened(found_headers: Any, value: bytes | None, known: Container[bytes]) -> tuple[bytes, bytes]:
    """The event type and value of one consumed record, or ``UnreadableEvent``: a type not in ``known``
    (or none), another schema version (or none), no value."""
    found = dict(found_headers or ())
    event_type, version = found.get(EVENT_TYPE_HEADER), found.get(VERSION_HEADER)
    if event_type is None or event_type not in known:
        raise UnreadableEvent("unknown_type", f"event-type header {event_type!r}")
    if version != SCHEMA_VERSION:
        raise UnreadableEvent("unknown_version", f"schema-version header {version!r}")
    if value is None:
        raise UnreadableEvent("malformed", "no value")
    return event_type, value


def parse(message: Message, value: bytes) -> None:
    """Fill ``message`` from ``value``; ``UnreadableEvent("malformed")`` if they are not one."""
    try:
        message.ParseFromString(value)
    except DecodeError as exc:
        raise UnreadableEvent("malformed", f"not a {message.DESCRIPTOR.full_name}: {exc}") from exc

"""Time as the project stores it: integer microseconds since the epoch; protobuf ``Timestamp`` on the wire."""

from __future__ import annotations

import time

from google.protobuf.timestamp_pb2 import Timestamp

__all__ = ["from_timestamp", "now_us", "to_timestamp"]


def now_us() -> int:
    """Microseconds since the epoch: the follow timestamp and the list order."""
    return time.time_ns() // 1000


def to_timestamp(at_us: int) -> Timestamp:
    stamp = Timestamp()
    stamp.FromMicroseconds(at_us)
    return stamp


def from_timestamp(stamp: Timestamp) -> int:
    return stamp.ToMicroseconds()

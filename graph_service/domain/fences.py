"""Fences: what makes a batch of counter updates apply at most once.

A fence is committed in the same transaction as the counters. The stream consumer's fence moves
its shard checkpoint from the position the batch was read at; the Lambda's puts one marker per
stream event. Either refuses a replay, and then nothing of the transaction is written.
"""

from __future__ import annotations

from dataclasses import dataclass

from graph_service.domain.models import Counts

__all__ = ["CheckpointMove", "CounterUpdate", "EventMarkers", "Fence", "FenceRejected"]


@dataclass(frozen=True, slots=True)
class CheckpointMove:
    """Move ``consumer``'s checkpoint of ``shard_id`` from ``previous`` (None: never set) to ``sequence``."""

    consumer: str
    shard_id: str
    previous: str | None
    sequence: str
    note: str = ""
    """What a restarted consumer must redo in the cache for this batch."""


@dataclass(frozen=True, slots=True)
class EventMarkers:
    """One marker per stream event; a marker that exists means the event was applied before."""

    consumer: str
    event_ids: tuple[str, ...]
    expires_at: int
    """Epoch seconds after which the markers may be deleted (longer than the stream keeps records)."""


Fence = CheckpointMove | EventMarkers


class FenceRejected(Exception):
    """The fence refused the batch: (some of) it was applied before. ``positions`` says which of
    the fence's parts refused (the event's index for ``EventMarkers``, 0 for ``CheckpointMove``)."""

    def __init__(self, positions: list[int]) -> None:
        super().__init__(positions)
        self.positions = positions


@dataclass(frozen=True, slots=True)
class CounterUpdate:
    """New counters of one user, to be written only if they are still at ``old`` (by version)."""

    user_id: int
    old: Counts
    new: Counts

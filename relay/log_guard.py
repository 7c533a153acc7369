"""Notices that a topic's log went backwards, and has the relay produce the streams again.

A broker can lose records it acknowledged: an unclean leader election, a topic deleted and created
again, or a broker without persistent storage restarted (the test suite's in-memory one). The
relay had moved its stream checkpoints past them, so nobody would ever send them again. Two signs show it:

- an acknowledgement whose offset is not above one this process saw before on the same partition
  (``note_acks``: offsets of a partition only grow);
- a partition whose high-water mark is not above the offset the relay recorded with its checkpoints
  for it: the first offset of the last batch it produced there (``compare``, at start and at every
  topic check). The first, not the last: a log keeps or loses a producer batch whole, and the local
  broker (tansu) reports a partition's end as one past the start of its last batch.

Either way every checkpoint of the topic's stream is sent back to the start of what the stream
retains (24 h; ``CheckpointStore.rewind``) and the reader restarts its shards from there: every
retained record is produced again, which the fanout's idempotent merge makes harmless. A rewind is
logged (``relay_log_went_backwards``) and counted (``socialgraph_relay_rewinds``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

import structlog

from graph_service.streams.checkpoints import Checkpoint, CheckpointStore
from graph_service.telemetry.topics import TopicMetrics

__all__ = ["LogGuard", "Restartable", "behind"]

log = structlog.get_logger(__name__)


class Restartable(Protocol):
    def restart_shards(self) -> None:
        """Restart every shard task from its stored checkpoint (``StreamReader``)."""
        ...


def behind(produced: Mapping[int, int], high_water: Mapping[int, int]) -> dict[int, tuple[int, int]]:
    """Partitions whose log ends at or before the offset recorded as produced there: partition ->
    (high-water mark, offset produced). A partition that no longer exists has a mark of 0."""
    return {p: (high_water.get(p, 0), o) for p, o in sorted(produced.items()) if high_water.get(p, 0) <= o}


def produced_by_partition(checkpoints: Mapping[str, Checkpoint]) -> dict[int, int]:
    """The highest offset recorded as produced on each partition, over every shard of the stream."""
    produced: dict[int, int] = {}
    for checkpoint in checkpoints.values():
        for partition, offset in checkpoint.produced.items():
            produced[partition] = max(offset, produced.get(partition, -1))
    return produced


class LogGuard:
    """One per topic the relay produces to (one per stream)."""

    def __init__(self, topic: str, checkpoints: CheckpointStore, metrics: TopicMetrics | None = None) -> None:
        self.topic = topic
        self._checkpoints = checkpoints
        self._metrics = metrics if metrics is not None else TopicMetrics()
        self._readers: list[Restartable] = []
        self._acked: dict[int, int] = {}
        """Last offset acknowledged on each partition, as seen by this process since the last rewind."""
        self._backwards: dict[int, tuple[int, int]] = {}
        self._shards: dict[str, tuple[str, dict[int, int]]] = {}
        """Per shard: the sequence this process last moved its checkpoint to, and what it had
        produced then (``Checkpoint.produced``)."""
        self._lock = asyncio.Lock()
        self.rewinds = 0

    def attach(self, reader: Restartable) -> None:
        self._readers.append(reader)

    async def produced_of(self, shard_id: str, committed: str | None) -> dict[int, int]:
        """What the shard produced up to ``committed`` (its checkpoint, as the batch about to be
        handled starts from it): kept here from this process's last move of it, else read from the
        checkpoint (another instance moved it meanwhile, or this process never did)."""
        kept = self._shards.get(shard_id)
        if kept is not None and kept[0] == committed:
            return dict(kept[1])
        return dict((await self._checkpoints.load(shard_id)).produced)

    def remember(self, shard_id: str, sequence: str, produced: Mapping[int, int]) -> None:
        """This process moved the shard's checkpoint to ``sequence`` with ``produced``."""
        self._shards[shard_id] = (sequence, dict(produced))

    def forget(self, shard_id: str) -> None:
        """The shard's checkpoint moved under this process: read it again next time."""
        self._shards.pop(shard_id, None)

    def note_ack(self, partition: int, offset: int) -> None:
        """One acknowledgement, in the order the producer resolved them. A partition has one batch in
        flight at a time, so its acknowledgements come in offset order: one not above the last seen
        means the log went backwards (kept for ``take_backwards``)."""
        before = self._acked.get(partition, -1)
        if offset <= before:
            self._backwards.setdefault(partition, (before, offset))
        self._acked[partition] = offset

    def take_backwards(self) -> dict[int, tuple[int, int]]:
        """The partitions seen going backwards since the last call (partition -> (before, now))."""
        found, self._backwards = self._backwards, {}
        return found

    async def compare(self, high_water: Callable[[], Awaitable[dict[int, int]]]) -> bool:
        """Rewind if a partition's high-water mark is at or below what was produced there; True if it did.
        The checkpoints are read before the marks: a batch acknowledged in between only raises a mark."""
        checkpoints = await self._checkpoints.load_all()
        lost = behind(produced_by_partition(checkpoints), await high_water())
        if not lost:
            return False
        await self.rewind("high-water mark at or below an offset produced", lost, checkpoints)
        return True

    async def rewind(
        self,
        why: str,
        partitions: Mapping[int, tuple[int, int]],
        checkpoints: Mapping[str, Checkpoint] | None = None,
    ) -> None:
        """Send every checkpoint of the stream back to its start and restart the shards. Every one,
        unconditionally: a shard committing a batch meanwhile has its move refused and starts again
        from the start too (``ShardReset``), so none escapes with the old log's offsets."""
        async with self._lock:
            found = checkpoints if checkpoints is not None else await self._checkpoints.load_all()
            rewound = 0
            for shard_id in found:
                rewound += await self._checkpoints.rewind(shard_id)
            self._acked.clear()
            self._backwards.clear()
            self._shards.clear()
            for reader in self._readers:
                reader.restart_shards()
            if rewound:  # another relay may have rewound them all already
                self.rewinds += 1
                self._metrics.rewinds.labels(self.topic).inc()
            log.error(
                "relay_log_went_backwards",
                topic=self.topic,
                why=why,
                partitions={str(p): {"log_end": hw, "produced": o} for p, (hw, o) in partitions.items()},
                shards_rewound=rewound,
            )

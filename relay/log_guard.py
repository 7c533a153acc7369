"""Notices that a topic's log went backwards, and has the relay produce the streams again.

A broker can lose records it acknowledged: an unclean leader election, a topic deleted and created
again, or a broker without persistent storage restarted (the test suite's in-memory one). The
relay had moved its stream checkpoints past them, so nobody would ever send them again. Two signs
make the relay suspect it:

- an acknowledgement whose offset is not above one this process saw before on the same partition
  (``note_ack``: offsets of a partition only grow);
- a partition whose high-water mark, as ListOffsets answers it, is not above the offset the relay
  recorded with its checkpoints for it: the first offset of the last batch it produced there
  (``compare``, at start and at every topic check). The first, not the last: a log keeps or loses a
  producer batch whole, and the local broker (tansu) reports a partition's end as one past the start
  of its last batch.

A sign is a suspicion, not a verdict: the local broker's ListOffsets answers the start of its last
batch, which can sit below the relay's first record there when one producer batch holds records of
two shards. So each suspicion is looked at again before anything is rewound (``confirm``): with
production held (``until_open``), the ``LogProbe`` reads at each offset that must be there, a fetch
whose answer carries the partition's own high-water mark. Held: the suspicion is cleared, counted
(``socialgraph_relay_log_suspicions``) and logged (``relay_log_suspected``, rate-limited). Not held
(the mark at or below it, the offset out of range, the partition gone), or no answer within
``confirm_within`` seconds: the loss is confirmed.

A confirmed loss sends every checkpoint of the topic's stream back to the start of what the stream
retains (24 h; ``CheckpointStore.rewind``) and the reader restarts its shards from there: every
retained record is produced again, which the fanout's idempotent merge makes harmless. A rewind is
logged (``relay_log_went_backwards``) and counted (``socialgraph_relay_rewinds``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

import structlog

from graph_service.domain.retry import Backoff
from graph_service.streams.checkpoints import Checkpoint, CheckpointStore
from graph_service.telemetry.failures import FailureLog
from graph_service.telemetry.relay import RelayMetrics
from graph_service.telemetry.topics import TopicMetrics

__all__ = [
    "ACKNOWLEDGEMENT",
    "HIGH_WATER",
    "LogGuard",
    "LogProbe",
    "Restartable",
    "behind",
    "produced_by_partition",
]

log = structlog.get_logger(__name__)

HIGH_WATER = "high-water mark at or below an offset produced"
ACKNOWLEDGEMENT = "an acknowledgement at or below an earlier offset"
Suspected = Mapping[int, tuple[int, int]]
"""Partition -> (what was seen: the high-water mark or the new acknowledgement, the offset that
must still be in the log)."""


class Restartable(Protocol):
    def restart_shards(self) -> None:
        """Restart every shard task from its stored checkpoint (``StreamReader``)."""
        ...


class LogProbe(Protocol):
    """The second look at a suspected loss: the topic's log, read at an offset."""

    async def holds(self, partition: int, offset: int) -> bool | None:
        """True if the log holds the record at ``offset`` of ``partition`` (the partition's
        high-water mark is above it); False if it does not (the mark is at or below it, the offset is
        out of range, the topic or partition is unknown); None if the brokers gave no answer."""
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

    def __init__(
        self,
        topic: str,
        checkpoints: CheckpointStore,
        metrics: TopicMetrics | None = None,
        *,
        probe: LogProbe | None = None,
        relay_metrics: RelayMetrics | None = None,
        confirm_within: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``probe`` and ``relay_metrics`` may come later (``use``: the relay hands its producer's);
        without a probe a suspicion is confirmed at once. ``confirm_within``: how long a suspicion
        may go without an answer before it counts as a loss."""
        self.topic = topic
        self._checkpoints = checkpoints
        self._metrics = metrics if metrics is not None else TopicMetrics()
        self._probe = probe
        self._suspicions = (relay_metrics if relay_metrics is not None else RelayMetrics()).log_suspicions
        self._suspicions.labels(topic)  # shown at 0 from the start
        self._confirm_within = confirm_within
        self._clock = clock
        self._suspicion_lines = FailureLog(log)
        self._readers: list[Restartable] = []
        self._acked: dict[int, int] = {}
        """Last offset acknowledged on each partition, as seen by this process since the last rewind."""
        self._backwards: dict[int, tuple[int, int]] = {}
        self._shards: dict[str, tuple[str, dict[int, int]]] = {}
        """Per shard: the sequence this process last moved its checkpoint to, and what it had
        produced then (``Checkpoint.produced``)."""
        self._lock = asyncio.Lock()
        self._open = asyncio.Event()
        self._open.set()
        self._closed = 0
        """Confirmations under way: while any runs, nothing new is produced (``until_open``)."""
        self.rewinds = 0
        self.suspicions = 0
        self.cleared = 0

    def use(self, probe: LogProbe, relay_metrics: RelayMetrics | None = None) -> None:
        """The probe (and the relay's metrics) to confirm suspicions with, unless given already."""
        if self._probe is None:
            self._probe = probe
        if relay_metrics is not None:
            self._suspicions = relay_metrics.log_suspicions
            self._suspicions.labels(self.topic)

    def attach(self, reader: Restartable) -> None:
        self._readers.append(reader)

    async def until_open(self) -> None:
        """Return once no suspicion is being confirmed: a batch produced meanwhile could lift a
        partition that lost records past the offsets that show the loss."""
        await self._open.wait()

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
        means the log may have gone backwards (kept for ``take_backwards``)."""
        before = self._acked.get(partition, -1)
        if offset <= before:
            self._backwards.setdefault(partition, (before, offset))
        self._acked[partition] = offset

    def take_backwards(self) -> dict[int, tuple[int, int]]:
        """The partitions seen going backwards since the last call (partition -> (before, now))."""
        found, self._backwards = self._backwards, {}
        return found

    async def compare(self, high_water: Callable[[], Awaitable[dict[int, int]]]) -> bool:
        """Rewind if a partition's high-water mark is at or below what was produced there and a second
        look confirms it; True if it rewound. The checkpoints are read before the marks: a batch
        acknowledged in between only raises a mark."""
        checkpoints = await self._checkpoints.load_all()
        suspected = behind(produced_by_partition(checkpoints), await high_water())
        if not suspected:
            return False
        lost = await self.confirm(HIGH_WATER, suspected)
        if not lost:
            return False
        await self.rewind(HIGH_WATER, lost, checkpoints)
        return True

    async def confirm(self, why: str, suspected: Suspected) -> dict[int, tuple[int, int]]:
        """Look again at a suspected loss; returns the partitions where it is confirmed (empty: none).

        Production is held meanwhile (``until_open``). Each partition's offset is read with the
        probe, again with backoff while the brokers give no answer, until ``confirm_within`` has
        passed; one partition found without its record confirms the loss (the rewind is the
        stream's), and so does a partition still unanswered at the deadline: a rewind costs records
        produced again, a missed loss costs them for good."""
        self.suspicions += 1
        self._suspicions.labels(self.topic).inc()
        if self._probe is None:
            self._say(why, "confirmed", suspected, {}, {})
            return dict(suspected)
        self._closed += 1
        self._open.clear()
        try:
            held, lost, unanswered = await self._look_again(self._probe, suspected)
        finally:
            self._closed -= 1
            if not self._closed:
                self._open.set()
        lost.update(unanswered)
        self._say(why, "confirmed" if lost else "cleared", suspected, held, unanswered)
        if not lost:
            self.cleared += 1
        return lost

    async def _look_again(
        self, probe: LogProbe, suspected: Suspected
    ) -> tuple[dict[int, tuple[int, int]], dict[int, tuple[int, int]], dict[int, tuple[int, int]]]:
        """(held, lost, unanswered) after reading every suspected partition, until one is lost, all
        are answered, or the deadline passes."""
        deadline = self._clock() + self._confirm_within
        backoff = Backoff(base=0.1, cap=2.0)
        pending = dict(suspected)
        held: dict[int, tuple[int, int]] = {}
        lost: dict[int, tuple[int, int]] = {}
        while True:
            for partition, (seen, offset) in list(pending.items()):
                answer = await probe.holds(partition, offset)
                if answer is None:
                    continue
                del pending[partition]
                if not answer:
                    lost[partition] = (seen, offset)
                    return held, lost, {}
                held[partition] = (seen, offset)
            remaining = deadline - self._clock()
            if not pending or remaining <= 0:
                return held, lost, pending
            await asyncio.sleep(min(backoff.next_delay(), remaining))

    def _say(
        self,
        why: str,
        outcome: str,
        suspected: Suspected,
        held: Mapping[int, tuple[int, int]],
        unanswered: Mapping[int, tuple[int, int]],
    ) -> None:
        """One ``relay_log_suspected`` line per kind of suspicion and outcome per interval, with a count."""
        kind = f"{'acknowledgement' if why == ACKNOWLEDGEMENT else 'high_water'}:{outcome}"
        self._suspicion_lines.failure(
            "relay_log_suspected",
            kind,
            topic=self.topic,
            why=why,
            outcome=outcome,
            partitions={
                str(p): {"seen": seen, "produced": o, "held": p in held, "answered": p not in unanswered}
                for p, (seen, o) in sorted(suspected.items())
            },
        )

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

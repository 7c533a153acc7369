"""The stream reader's leases and restarts, over an in-memory stream and checkpoint table.

The fakes keep the lease rules of ``ShardLeases`` (whose DynamoDB conditions are tested against
DynamoDB Local in ``tests/integration/counters/test_failover.py``); what is tested here is what the
reader does with them: one reader per shard, a takeover after a crash, a release on a clean stop,
and the restarts the relay asks for (``ShardReset``, ``restart_shards``, a rewind seen by a renewal).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Any

from prometheus_client import CollectorRegistry

from graph_service.domain.fences import FenceRejected
from graph_service.streams.checkpoints import Checkpoint
from graph_service.streams.leases import LeaseClock, Renewal
from graph_service.streams.reader import ShardReset, StreamReader
from graph_service.telemetry.streams import StreamMetrics
from tests.support.logs import capture_every_level
from tests.support.polling import eventually

LEASE_SECONDS = 1.0


@dataclass
class FakeShard:
    parent: str | None = None
    sequences: list[str] = field(default_factory=list)
    closed: bool = False


class FakeStream:
    """A stream's shards, answering ``describe_stream``, ``get_shard_iterator`` and ``get_records``."""

    def __init__(self, **shards: FakeShard) -> None:
        self.shards = shards
        self._next = 1

    def append(self, shard_id: str, count: int = 1) -> None:
        for _ in range(count):
            self.shards[shard_id].sequences.append(f"{self._next:06d}")
            self._next += 1

    async def call(self, operation: str, **kwargs: Any) -> dict[str, Any]:
        await asyncio.sleep(0)
        if operation == "describe_stream":
            shards = [{"ShardId": s, "ParentShardId": f.parent} for s, f in self.shards.items()]
            return {"StreamDescription": {"Shards": [{k: v for k, v in s.items() if v} for s in shards]}}
        if operation == "get_shard_iterator":
            shard = self.shards[kwargs["ShardId"]]
            start = 0
            if kwargs["ShardIteratorType"] == "AFTER_SEQUENCE_NUMBER":
                start = shard.sequences.index(kwargs["SequenceNumber"]) + 1
            return {"ShardIterator": f"{kwargs['ShardId']}|{start}"}
        assert operation == "get_records"
        shard_id, start = kwargs["ShardIterator"].split("|")
        shard = self.shards[shard_id]
        sequences = shard.sequences[int(start) :]
        end = int(start) + len(sequences)
        records = [{"dynamodb": {"SequenceNumber": s}} for s in sequences]
        at_end = shard.closed and end == len(shard.sequences)
        return {"Records": records, "NextShardIterator": None if at_end else f"{shard_id}|{end}"}


class FakeCheckpoints:
    """The checkpoint table of one consumer; the lease lives on the same items, as in DynamoDB."""

    consumer = "test"

    def __init__(self) -> None:
        self.items: dict[str, Checkpoint] = {}

    def get(self, shard_id: str) -> Checkpoint:
        return self.items.get(shard_id, Checkpoint())

    async def load(self, shard_id: str) -> Checkpoint:
        return self.get(shard_id)

    async def load_all(self) -> dict[str, Checkpoint]:
        return dict(self.items)

    async def mark_done(self, shard_id: str, sequence: str | None) -> None:
        if self.get(shard_id).sequence != sequence:
            raise FenceRejected([0])
        self.items[shard_id] = replace(self.get(shard_id), done=True, note="")

    def commit(self, shard_id: str, sequence: str) -> None:
        self.items[shard_id] = replace(self.get(shard_id), sequence=sequence)

    def rewind(self, shard_id: str) -> None:
        """As ``CheckpointStore.rewind``: back to the start, not done; the lease stays."""
        self.items[shard_id] = replace(self.get(shard_id), sequence=None, done=False, note="")


class FakeLeases:
    """``ShardLeases``' rules on the fake table."""

    def __init__(self, table: FakeCheckpoints, owner: str) -> None:
        self._table = table
        self.owner = owner
        self.timing = LeaseClock(LEASE_SECONDS)

    def now(self) -> float:
        return time.time()

    def _set(self, shard_id: str, owner: str | None, until: float) -> None:
        self._table.items[shard_id] = replace(self._table.get(shard_id), owner=owner, lease_until=until)

    async def acquire(self, shard_id: str) -> bool:
        item = self._table.get(shard_id)
        if item.done or (item.owner not in (None, self.owner) and item.lease_until >= self.now()):
            return False
        self._set(shard_id, self.owner, self.now() + self.timing.grant_seconds)
        return True

    async def renew(self, shard_id: str) -> Renewal | None:
        item = self._table.get(shard_id)
        if item.owner != self.owner:
            return None
        self._set(shard_id, self.owner, self.now() + self.timing.grant_seconds)
        return Renewal(sequence=item.sequence)

    async def release(self, shard_id: str) -> bool:
        if self._table.get(shard_id).owner != self.owner:
            return False
        self._set(shard_id, None, 0.0)
        return True


class Handler:
    """Commits each batch to the fake table and remembers who handled which record."""

    def __init__(self, table: FakeCheckpoints, name: str) -> None:
        self._table = table
        self.name = name
        self.seen: list[tuple[str, str]] = []
        self.resets: list[str] = []
        """Shards whose next batch raises ``ShardReset`` (after rewinding the checkpoint)."""

    async def __call__(self, shard_id: str, records: list[dict[str, Any]], committed: str | None) -> str | None:
        if shard_id in self.resets:
            self.resets.remove(shard_id)
            self._table.rewind(shard_id)
            raise ShardReset(f"shard {shard_id} rewound")
        self.seen += [(shard_id, r["dynamodb"]["SequenceNumber"]) for r in records]
        last = str(records[-1]["dynamodb"]["SequenceNumber"])
        self._table.commit(shard_id, last)
        return last


@dataclass
class Running:
    reader: StreamReader
    handler: Handler
    registry: CollectorRegistry
    stop: asyncio.Event
    task: asyncio.Task[None]

    def sample(self, name: str) -> float | None:
        return self.registry.get_sample_value(name, {"consumer": "test"})


@contextlib.asynccontextmanager
async def reading(stream: FakeStream, table: FakeCheckpoints, name: str) -> AsyncIterator[Running]:
    """A reader named ``name`` running until the block ends (then stopped cleanly, if still running)."""
    handler = Handler(table, name)
    registry = CollectorRegistry()
    reader = StreamReader(
        stream,  # type: ignore[arg-type]  # a FakeStream for the AsyncDynamo
        "arn",
        table,  # type: ignore[arg-type]  # FakeCheckpoints for the CheckpointStore
        handler,
        leases=FakeLeases(table, name),  # type: ignore[arg-type]  # for the ShardLeases
        poll_seconds=0.01,
        refresh_seconds=0.1,
        metrics=StreamMetrics(registry).consumer("test"),
    )
    stop = asyncio.Event()
    task = asyncio.create_task(reader.run(stop))
    try:
        yield Running(reader, handler, registry, stop, task)
    finally:
        stop.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, timeout=5)


async def owners(table: FakeCheckpoints) -> dict[str, str | None]:
    return {s: c.owner for s, c in table.items.items()}


def crash(running: Running) -> None:
    """Stands for kill -9: the run is cancelled, so nothing is released."""
    running.task.cancel()


async def test_each_shard_has_one_reader_and_a_survivor_takes_a_crashed_readers_shards_in_time() -> None:
    stream = FakeStream(a=FakeShard(), b=FakeShard())
    stream.append("a", 3)
    stream.append("b", 3)
    table = FakeCheckpoints()
    async with reading(stream, table, "first") as first:
        await eventually(lambda: owners(table), lambda o: o == {"a": "first", "b": "first"})
        async with reading(stream, table, "second") as second:
            await eventually(lambda: asyncio.sleep(0, len(first.handler.seen)), lambda n: n == 6)
            await asyncio.sleep(LEASE_SECONDS)  # several rounds and renewals: the second takes nothing
            assert await owners(table) == {"a": "first", "b": "first"}
            assert second.reader.held_shards() == set()
            assert second.handler.seen == []
            crashed_at = time.monotonic()
            crash(first)
            await eventually(lambda: owners(table), lambda o: o == {"a": "second", "b": "second"}, interval=0.01)
            took = time.monotonic() - crashed_at
            assert LEASE_SECONDS * 0.3 < took <= LEASE_SECONDS  # it waited for the expiry, and no longer
            stream.append("a")
            await eventually(lambda: asyncio.sleep(0, second.handler.seen), lambda s: s == [("a", "000007")])
            assert second.sample("socialgraph_stream_lease_takeovers_total") == 2
            assert second.sample("socialgraph_stream_leases_held") == 2


async def test_a_clean_stop_releases_every_lease_so_the_other_reader_takes_over_at_once() -> None:
    stream = FakeStream(a=FakeShard())
    table = FakeCheckpoints()
    async with reading(stream, table, "first") as first:
        await eventually(lambda: owners(table), lambda o: o == {"a": "first"})
        async with reading(stream, table, "second") as second:
            first.stop.set()
            await first.task
            stopped_at = time.monotonic()
            await eventually(lambda: owners(table), lambda o: o == {"a": "second"}, interval=0.01)
            assert time.monotonic() - stopped_at < LEASE_SECONDS * 0.5  # one round, no expiry to wait for
            assert second.sample("socialgraph_stream_lease_takeovers_total") == 0


async def test_a_lease_taken_by_another_stops_the_shard_task() -> None:
    stream = FakeStream(a=FakeShard())
    stream.append("a")
    table = FakeCheckpoints()
    with capture_every_level() as logs:
        async with reading(stream, table, "first") as first:
            await eventually(lambda: asyncio.sleep(0, len(first.handler.seen)), lambda n: n == 1)
            table.items["a"] = replace(table.items["a"], owner="intruder", lease_until=time.time() + 60)
            await eventually(lambda: asyncio.sleep(0, first.sample("socialgraph_stream_leases_lost_total")), bool)
            stream.append("a")
            await asyncio.sleep(LEASE_SECONDS / 3)  # several rounds
            assert first.handler.seen == [("a", "000001")]  # the new record is the intruder's to read
            assert first.reader.held_shards() == set()
    assert [e["why"] for e in logs if e["event"] == "shard_lease_lost"] == ["taken by another instance"]


async def test_shard_reset_restarts_the_shard_from_its_stored_checkpoint_without_a_failure() -> None:
    stream = FakeStream(a=FakeShard())
    stream.append("a", 2)
    table = FakeCheckpoints()
    with capture_every_level() as logs:
        async with reading(stream, table, "first") as first:
            await eventually(lambda: asyncio.sleep(0, len(first.handler.seen)), lambda n: n == 2)
            first.handler.resets.append("a")  # the next batch finds its checkpoint rewound
            stream.append("a")
            await eventually(lambda: asyncio.sleep(0, len(first.handler.seen)), lambda n: n == 5)
    assert [s for _, s in first.handler.seen] == ["000001", "000002", "000001", "000002", "000003"]
    assert [e["event"] for e in logs if e["log_level"] in ("warning", "error")] == []
    assert [e["log_level"] for e in logs if e["event"] == "shard_reset_will_resume"] == ["info"]


async def test_restart_shards_reads_every_shard_again_from_its_stored_checkpoint() -> None:
    stream = FakeStream(a=FakeShard(), b=FakeShard(closed=True))
    stream.append("a", 2)
    stream.append("b", 1)
    table = FakeCheckpoints()
    async with reading(stream, table, "first") as first:
        await eventually(lambda: asyncio.sleep(0, len(first.handler.seen)), lambda n: n == 3)
        await eventually(lambda: asyncio.sleep(0, table.get("b").done), bool)
        table.rewind("a")
        table.rewind("b")  # a done shard that lost `done` is read again
        first.reader.restart_shards()
        await eventually(lambda: asyncio.sleep(0, len(first.handler.seen)), lambda n: n == 6)
    assert sorted(first.handler.seen[3:]) == [("a", "000001"), ("a", "000002"), ("b", "000003")]


async def test_a_renewal_that_finds_the_checkpoint_rewound_by_another_process_restarts_the_shard() -> None:
    stream = FakeStream(a=FakeShard())
    stream.append("a", 2)
    table = FakeCheckpoints()
    async with reading(stream, table, "first") as first:
        await eventually(lambda: asyncio.sleep(0, len(first.handler.seen)), lambda n: n == 2)
        table.rewind("a")  # another relay rewound it; nobody tells this reader
        await eventually(lambda: asyncio.sleep(0, len(first.handler.seen)), lambda n: n == 4)
    assert [s for _, s in first.handler.seen] == ["000001", "000002", "000001", "000002"]


async def test_a_child_shard_waits_for_its_parent_and_the_parents_lease_is_released() -> None:
    stream = FakeStream(parent=FakeShard(closed=True), child=FakeShard(parent="parent"))
    stream.append("parent", 2)
    stream.append("child", 1)
    table = FakeCheckpoints()
    async with reading(stream, table, "first") as first:
        await eventually(lambda: asyncio.sleep(0, len(first.handler.seen)), lambda n: n == 3)
        assert [s for s, _ in first.handler.seen] == ["parent", "parent", "child"]
        assert table.get("parent").done
        assert table.get("parent").owner is None
        assert first.reader.held_shards() == {"child"}

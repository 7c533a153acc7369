"""The relay's log guard: what counts as a log that went backwards, and what a rewind does."""

from __future__ import annotations

import asyncio
from typing import cast

from prometheus_client import CollectorRegistry

from graph_service.streams.checkpoints import Checkpoint, CheckpointStore
from graph_service.telemetry.relay import RelayMetrics
from graph_service.telemetry.topics import TopicMetrics
from relay.log_guard import ACKNOWLEDGEMENT, LogGuard, behind, produced_by_partition


class Checkpoints:
    """The part of ``CheckpointStore`` the guard uses, in memory."""

    def __init__(self, stored: dict[str, Checkpoint]) -> None:
        self.stored = stored

    async def load(self, shard_id: str) -> Checkpoint:
        return self.stored.get(shard_id, Checkpoint())

    async def load_all(self) -> dict[str, Checkpoint]:
        return dict(self.stored)

    async def rewind(self, shard_id: str) -> bool:
        was = self.stored[shard_id]
        self.stored[shard_id] = Checkpoint()
        return was != Checkpoint()


class Reader:
    def __init__(self) -> None:
        self.restarts = 0

    def restart_shards(self) -> None:
        self.restarts += 1


def guard_over(stored: dict[str, Checkpoint]) -> tuple[LogGuard, Checkpoints, Reader]:
    checkpoints = Checkpoints(stored)
    guard = LogGuard("tweet-events", cast(CheckpointStore, checkpoints))
    reader = Reader()
    guard.attach(reader)
    return guard, checkpoints, reader


def test_a_partition_is_behind_when_its_log_ends_at_or_below_the_last_offset_produced() -> None:
    assert behind({0: 9, 1: 4}, {0: 10, 1: 5}) == {}  # log end = last offset + 1: intact
    assert behind({0: 9, 1: 4}, {0: 9, 1: 7}) == {0: (9, 9)}
    assert behind({5: 2}, {0: 100}) == {5: (0, 2)}  # the partition is gone


def test_produced_offsets_are_the_highest_over_every_shard() -> None:
    shards = {"a": Checkpoint("1", produced={0: 5, 1: 9}), "b": Checkpoint("2", done=True, produced={0: 7})}
    assert produced_by_partition(shards) == {0: 7, 1: 9}


def test_acknowledgements_that_go_backwards_are_noticed_once() -> None:
    guard, _, _ = guard_over({})
    for offset in (10, 11, 12):
        guard.note_ack(0, offset)
    guard.note_ack(1, 3)
    assert guard.take_backwards() == {}
    guard.note_ack(0, 2)  # the partition's log restarted
    guard.note_ack(0, 3)
    assert guard.take_backwards() == {0: (12, 2)}
    assert guard.take_backwards() == {}


async def test_compare_rewinds_every_shard_and_restarts_the_reader_only_when_behind() -> None:
    stored = {
        "a": Checkpoint("100", produced={0: 41, 3: 7}),
        "b": Checkpoint("200", done=True, produced={3: 9}),
        "c": Checkpoint(None),
    }
    guard, checkpoints, reader = guard_over(stored)

    async def intact() -> dict[int, int]:
        return {0: 42, 3: 10}

    assert not await guard.compare(intact)
    assert reader.restarts == 0

    async def lost() -> dict[int, int]:
        return {0: 42, 3: 4}  # partition 3 lost records 4..9

    assert await guard.compare(lost)
    assert reader.restarts == 1
    assert guard.rewinds == 1
    assert checkpoints.stored == {"a": Checkpoint(), "b": Checkpoint(), "c": Checkpoint()}
    assert await guard.produced_of("a", None) == {}  # nothing remembered from before the rewind


async def test_a_rewind_that_found_every_shard_at_its_start_is_not_counted() -> None:
    guard, _, reader = guard_over({"a": Checkpoint()})
    await guard.rewind("an acknowledgement at or below an earlier offset", {0: (5, 0)})
    assert guard.rewinds == 0  # another relay rewound them all already
    assert reader.restarts == 1  # this process's shards start again all the same


async def test_produced_offsets_are_kept_from_this_process_s_last_move_of_the_shard() -> None:
    guard, checkpoints, _ = guard_over({"a": Checkpoint("1", produced={2: 5})})
    assert await guard.produced_of("a", "1") == {2: 5}  # read from the checkpoint
    guard.remember("a", "9", {2: 8})
    checkpoints.stored["a"] = Checkpoint("12", produced={2: 20})
    assert await guard.produced_of("a", "9") == {2: 8}  # the batch starts where this process left it
    assert await guard.produced_of("a", "12") == {2: 20}  # another instance moved it: read again
    guard.remember("a", "13", {2: 21})
    guard.forget("a")
    assert await guard.produced_of("a", "13") == {2: 20}


# -- a suspicion is looked at again -----------------------------------------------------------------


class Probe:
    """The ``LogProbe`` port in memory: the log's high-water mark per partition as a fetch reads it
    (None: the brokers do not answer), and the reads it was asked for."""

    def __init__(self, high_water: dict[int, int | None]) -> None:
        self.high_water = high_water
        self.reads: list[tuple[int, int]] = []
        self.asked = asyncio.Event()
        self.answering = asyncio.Event()
        self.answering.set()

    async def holds(self, partition: int, offset: int) -> bool | None:
        self.reads.append((partition, offset))
        self.asked.set()
        await self.answering.wait()
        mark = self.high_water.get(partition, 0)
        return None if mark is None else mark > offset


def counted(registry: CollectorRegistry, name: str) -> float:
    """A counter of the guard's topic as /metrics shows it."""
    return registry.get_sample_value(f"socialgraph_relay_{name}_total", {"topic": "tweet-events"}) or 0.0


def probed_guard(
    stored: dict[str, Checkpoint], probe: Probe, *, confirm_within: float = 10.0
) -> tuple[LogGuard, Checkpoints, Reader, CollectorRegistry]:
    checkpoints = Checkpoints(stored)
    registry = CollectorRegistry()
    guard = LogGuard(
        "tweet-events",
        cast(CheckpointStore, checkpoints),
        TopicMetrics(registry),
        probe=probe,
        relay_metrics=RelayMetrics(registry),
        confirm_within=confirm_within,
    )
    reader = Reader()
    guard.attach(reader)
    return guard, checkpoints, reader, registry


async def lagging() -> dict[int, int]:
    """ListOffsets of a broker whose marks lag (or, as the local broker's, stop at the start of the
    last batch): partition 0 at the offset produced, partition 3 below it."""
    return {0: 41, 3: 4}


STORED = {"a": Checkpoint("100", produced={0: 41, 3: 7}), "b": Checkpoint("200", done=True, produced={3: 9})}


async def test_a_lagging_high_water_mark_is_a_suspicion_cleared_by_reading_the_offsets() -> None:
    probe = Probe({0: 42, 3: 10})  # the log holds both offsets
    guard, checkpoints, reader, registry = probed_guard(dict(STORED), probe)

    assert not await guard.compare(lagging)

    assert sorted(probe.reads) == [(0, 41), (3, 9)]
    assert (guard.suspicions, guard.cleared, guard.rewinds, reader.restarts) == (1, 1, 0, 0)
    assert (counted(registry, "log_suspicions"), counted(registry, "rewinds")) == (1, 0)
    assert checkpoints.stored == STORED  # nothing sent back
    assert await guard.produced_of("a", "100") == {0: 41, 3: 7}


async def test_a_suspicion_confirmed_by_the_second_look_rewinds() -> None:
    probe = Probe({0: 42, 3: 4})  # partition 3 lost records 4..9
    guard, checkpoints, reader, registry = probed_guard(dict(STORED), probe)

    assert await guard.compare(lagging)

    assert (guard.suspicions, guard.cleared, guard.rewinds, reader.restarts) == (1, 0, 1, 1)
    assert (counted(registry, "log_suspicions"), counted(registry, "rewinds")) == (1, 1)
    assert checkpoints.stored == {"a": Checkpoint(), "b": Checkpoint()}


async def test_a_log_that_gives_no_answer_within_the_window_counts_as_lost() -> None:
    probe = Probe({0: 42, 3: None})  # partition 3: no answer
    guard, _, reader, _ = probed_guard(dict(STORED), probe, confirm_within=0)

    assert await guard.compare(lagging)
    assert (guard.suspicions, guard.rewinds, reader.restarts) == (1, 1, 1)


async def test_a_partition_unanswered_at_first_is_read_again() -> None:
    probe = Probe({0: 42, 3: None})
    answers = iter([None, True])

    async def holds(partition: int, offset: int) -> bool | None:
        probe.reads.append((partition, offset))
        return True if partition == 0 else next(answers)

    probe.holds = holds  # type: ignore[method-assign]  # the probe's answers, scripted
    guard, _, reader, _ = probed_guard(dict(STORED), probe)

    assert not await guard.compare(lagging)
    assert probe.reads.count((3, 9)) == 2
    assert (guard.cleared, guard.rewinds, reader.restarts) == (1, 0, 0)


async def test_nothing_is_produced_while_a_suspicion_is_looked_at() -> None:
    probe = Probe({0: 42, 3: 10})
    probe.answering.clear()
    guard, _, _, _ = probed_guard(dict(STORED), probe)
    await asyncio.wait_for(guard.until_open(), 1)  # open before

    comparing = asyncio.create_task(guard.compare(lagging))
    await asyncio.wait_for(probe.asked.wait(), 1)
    producing = asyncio.create_task(guard.until_open())
    await asyncio.sleep(0)
    assert not producing.done()  # held while the probe has not answered

    probe.answering.set()
    assert not await asyncio.wait_for(comparing, 1)
    await asyncio.wait_for(producing, 1)


async def test_an_acknowledgement_below_an_earlier_one_is_confirmed_by_reading_the_earlier_offset() -> None:
    probe = Probe({0: 13})
    guard, _, _, registry = probed_guard({}, probe)
    guard.note_ack(0, 12)
    guard.note_ack(0, 2)
    before_now = guard.take_backwards()

    held = await guard.confirm(ACKNOWLEDGEMENT, {p: (now, before) for p, (before, now) in before_now.items()})
    assert held == {}  # the record at 12 is still there: not lost
    assert probe.reads == [(0, 12)]

    probe.high_water[0] = 3  # the log restarted: 12 is gone
    assert await guard.confirm(ACKNOWLEDGEMENT, {0: (2, 12)}) == {0: (2, 12)}
    assert counted(registry, "log_suspicions") == 2


async def test_without_a_probe_a_suspicion_is_confirmed_at_once() -> None:
    guard, _, reader = guard_over(dict(STORED))
    assert await guard.compare(lagging)
    assert (guard.suspicions, guard.rewinds, reader.restarts) == (1, 1, 1)

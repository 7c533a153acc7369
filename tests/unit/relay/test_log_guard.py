"""The relay's log guard: what counts as a log that went backwards, and what a rewind does."""

from __future__ import annotations

from typing import cast

from graph_service.streams.checkpoints import Checkpoint, CheckpointStore
from relay.log_guard import LogGuard, behind, produced_by_partition


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

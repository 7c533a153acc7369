"""Mute items in the followers table's stream (mutes, replaces, unmutes, TTL deletions of ended
mutes): never counted, and the pair's cached relationships dropped in both slots, as a block
change's are, by the stream consumer and the Lambda alike."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from counters.applier import CounterApplier
from counters.consumer import CountersConsumer
from counters.lambda_batches import LambdaBatches
from counters.repairs import CacheRepairer
from graph_service.domain.fences import CheckpointMove, EventMarkers, FenceRejected
from graph_service.domain.models import Counts, Mute, Relationship
from graph_service.streams.checkpoints import Checkpoint
from tests.support.fakes.counters import FakeCounterTable
from tests.support.fakes.graph_cache import FakeGraphCache
from tests.support.mute_records import mute_record

AT = 1_700_000_000_000_000
MUTE = Mute(4, AT, AT + 60_000_000, True)  # 9 mutes 4 for a minute
ENDED = Mute(5, AT - 1, AT, False)  # 9 muted 5, reclaimed by TTL


class Checkpoints:
    """What the consumers ask of ``CheckpointStore`` when no counter moves, in memory."""

    def __init__(self) -> None:
        self.sequences: dict[str, str | None] = {}

    def move(self, shard_id: str, previous: str | None, sequence: str, note: str = "") -> CheckpointMove:
        return CheckpointMove("counters", shard_id, previous, sequence, note)

    def markers(self, event_ids: list[str], expires_at: int) -> EventMarkers:
        return EventMarkers("counters-lambda", tuple(event_ids), expires_at)

    async def advance(
        self,
        shard_id: str,
        previous: str | None,
        sequence: str,
        note: str = "",
        *,
        produced: Mapping[int, int] | None = None,
    ) -> None:
        if self.sequences.get(shard_id) != previous:
            raise FenceRejected([0])
        self.sequences[shard_id] = sequence

    async def load(self, shard_id: str) -> Checkpoint:
        return Checkpoint(sequence=self.sequences.get(shard_id))


def follow_record(follower: int, followee: int, sequence: str) -> dict[str, Any]:
    image = {
        "pk": {"N": str(followee)},
        "sk": {"S": f"E#{follower:020d}"},
        "other": {"N": str(follower)},
        "at": {"N": str(AT)},
    }
    return {
        "eventID": f"edge-{sequence}",
        "eventName": "INSERT",
        "dynamodb": {"Keys": {"pk": image["pk"], "sk": image["sk"]}, "NewImage": image, "SequenceNumber": sequence},
    }


def mute_records(*sequences: int) -> list[dict[str, Any]]:
    """A mute, its replace, and the TTL deletion of another, ended, mute (each with its order item)."""
    s = iter(str(n) for n in sequences)
    return [
        mute_record("INSERT", 9, MUTE, sequence=next(s)),
        mute_record("INSERT", 9, MUTE, order=True, sequence=next(s)),
        mute_record("MODIFY", 9, MUTE, sequence=next(s)),
        mute_record("REMOVE", 9, ENDED, ttl=True, sequence=next(s)),
        mute_record("REMOVE", 9, ENDED, order=True, ttl=True, sequence=next(s)),
    ]


def cached_pairs() -> FakeGraphCache:
    """A cache holding the relationships of the muter with both muted accounts, and of a bystander pair."""
    cache = FakeGraphCache()
    for pair in ((9, 4), (4, 9), (9, 5), (5, 9), (7, 8)):
        cache.relationships[pair] = Relationship()
    return cache


async def test_the_stream_consumer_counts_the_follow_alone_and_drops_the_muters_pairs() -> None:
    table, cache = FakeCounterTable(), cached_pairs()
    applier = CounterApplier(table)
    consumer = CountersConsumer(applier, Checkpoints(), CacheRepairer(cache, applier))  # type: ignore[arg-type]  # Checkpoints: the CheckpointStore calls this consumer makes
    records = [*mute_records(10, 11, 12, 14, 15)[:3], follow_record(1, 2, "13"), *mute_records(16, 17, 18, 19, 20)[3:]]

    assert await consumer.handle("shard-1", records, None) == "20"

    assert consumer.applied_changes == 1
    assert table.counts == {1: Counts(0, 1, 1), 2: Counts(1, 0, 1)}
    assert table.checkpoints == {("counters", "shard-1"): "20"}  # moved with the follow's counts
    assert set(cache.relationships) == {(7, 8)}


async def test_a_batch_of_mutes_alone_moves_the_checkpoint_and_counts_nothing() -> None:
    table, cache, checkpoints = FakeCounterTable(), cached_pairs(), Checkpoints()
    applier = CounterApplier(table)
    consumer = CountersConsumer(applier, checkpoints, CacheRepairer(cache, applier))  # type: ignore[arg-type]  # Checkpoints: the CheckpointStore calls this consumer makes

    assert await consumer.handle("shard-1", mute_records(1, 2, 3, 4, 5), "0") == "5"

    assert (consumer.applied_changes, table.commits, table.counts) == (0, 0, {})
    assert checkpoints.sequences == {"shard-1": "5"}
    assert set(cache.relationships) == {(7, 8)}


async def test_the_lambda_marks_and_counts_the_follow_alone_and_drops_the_muters_pairs() -> None:
    table, cache = FakeCounterTable(), cached_pairs()
    applier = CounterApplier(table)
    batches = LambdaBatches(applier, CacheRepairer(cache, applier), Checkpoints())  # type: ignore[arg-type]  # Checkpoints: the CheckpointStore calls this consumer makes

    done = await batches.apply({"Records": [*mute_records(1, 2, 3, 4, 5), follow_record(1, 2, "6")]})

    assert done == {"applied": 1, "skipped": 0}
    assert table.markers == {("counters-lambda", "edge-6")}
    assert table.counts == {1: Counts(0, 1, 1), 2: Counts(1, 0, 1)}
    assert set(cache.relationships) == {(7, 8)}

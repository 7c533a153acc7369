"""When ``fsck`` and ``reconcile`` take the counters consumer to be behind: a shard whose checkpoint
has not reached, ``--settle-seconds`` later, the newest record it held at the first look."""

from __future__ import annotations

from graph_service.operations.consumer_lag import Behind, shards_behind
from graph_service.streams.checkpoints import Checkpoint


def test_a_checkpoint_that_reached_the_newest_record_seen_is_caught_up() -> None:
    newest = {"shard-a": "300", "shard-b": "1200", "shard-c": "40"}
    later = {
        "shard-a": Checkpoint(sequence="300"),  # exactly there
        "shard-b": Checkpoint(sequence="1500"),  # past it (sequence numbers compare as numbers: "1500" < "300" as text)
        "shard-c": Checkpoint(sequence="40", done=True),
    }
    assert shards_behind(newest, later) == []


def test_a_checkpoint_short_of_it_or_none_at_all_is_behind() -> None:
    newest = {"shard-b": "1200", "shard-a": "300", "shard-new": "7"}
    later = {"shard-a": Checkpoint(sequence="299"), "shard-b": Checkpoint(sequence="1200")}
    assert shards_behind(newest, later) == ["shard-a", "shard-new"]  # shard-new: never read, no checkpoint


def test_finished_shards_count_whatever_their_position() -> None:
    assert shards_behind({"s": "10"}, {"s": Checkpoint(sequence=None, done=True)}) == []


def test_the_line_says_how_far_behind_in_whole_seconds() -> None:
    assert Behind(149.6, 2).line() == "counters consumer 150 s behind"

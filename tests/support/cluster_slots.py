"""Moving slots between the masters of a test's own Redis Cluster by hand, the way ``redis-cli
--cluster reshard`` does: the target imports, the source migrates, the keys go over one by one
(``MIGRATE``), then every node is told the slot's new owner (the target first)."""

from __future__ import annotations

from collections.abc import Sequence

import redis

__all__ = ["finish_migration", "move_keys", "move_slots", "node", "start_migration"]


def node(port: int) -> redis.Redis:
    return redis.Redis(port=port, decode_responses=True)


def start_migration(slots: set[int], source: int, target: int) -> None:
    with node(source) as src, node(target) as dst:
        source_id, target_id = src.execute_command("CLUSTER MYID"), dst.execute_command("CLUSTER MYID")
        for slot in slots:
            dst.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", source_id)
            src.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", target_id)


def move_keys(slots: set[int], source: int, target: int, only: Sequence[str] | None = None) -> None:
    """MIGRATE ``only`` these keys, or every key the source still holds in ``slots``."""
    with node(source) as src:
        moving = list(only) if only is not None else []
        if only is None:
            for slot in slots:
                moving += src.execute_command("CLUSTER GETKEYSINSLOT", slot, 1000)
        for key in moving:  # one at a time: MIGRATE takes the keys of one slot
            src.migrate("127.0.0.1", target, key, 0, 5000)


def finish_migration(slots: set[int], target: int, nodes: Sequence[int]) -> None:
    """``CLUSTER SETSLOT <slot> NODE <target>`` on the target first, then on every other node."""
    with node(target) as dst:
        target_id = dst.execute_command("CLUSTER MYID")
    for port in sorted(nodes, key=lambda p: p != target):
        with node(port) as other:
            for slot in slots:
                other.execute_command("CLUSTER SETSLOT", slot, "NODE", target_id)


def move_slots(slots: set[int], source: int, target: int, nodes: Sequence[int]) -> None:
    """Move ``slots`` with their keys from master ``source`` to master ``target``."""
    start_migration(slots, source, target)
    move_keys(slots, source, target)
    finish_migration(slots, target, nodes)

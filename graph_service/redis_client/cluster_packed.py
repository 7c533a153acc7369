"""A fanout batch on Redis Cluster, packed per node: ``packed.evalsha_each_key`` for a Cluster.

redis-py's cluster pipeline costs what its single-node pipeline does (every argument of every
command encoded again, a command object and a callback each, a reply parsed under a timeout of its
own) and more: each command is routed on its own. Here the batch's keys are grouped by the master
that owns their slot (the slot map redis-py's client keeps), each group is packed once
(``packed.pack``) and written as one write on one connection of that node's pool, the nodes'
writes at once, and every reply is read under one timeout for the whole batch.

Redirects, in rounds until no key is redirected (``REDIRECT_ROUNDS`` at most, redis-py's own TTL):

- ``MOVED`` (the slot has a new owner): the client's slot map is patched, as redis-py does
  (``NodesManager.move_slot``), and those keys are sent again to the new owner.
- ``ASK`` (the slot is being migrated, and the old owner no longer has that key): those keys go to
  the named node, each preceded by ``ASKING`` in the same write on the same connection, which is
  what ``ASKING`` needs (it allows the next command of its connection only). redis-py 8's client
  sends it as a call of its own, on whichever pooled connection comes next: once a node's pool
  holds two connections, its call into a migrating slot fails with "TTL exhausted". A node not in
  the slot map yet (one that joined and is importing its first slots) is added to it, as
  ``move_slot`` adds one; it may lack the script, which NOSCRIPT then loads on every master.

Errors: a ``NoScriptError`` is raised before any other (the caller loads the script on every master
and sends the batch again: every call is idempotent); other error replies are raised after the
redirected keys landed. A connection that failed or timed out midway is closed, never given back
with replies unread; a node whose connection failed has its pooled connections renewed and the
slot map is read again (a failover moves its slots), as redis-py does before its own retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.cluster import PRIMARY
from redis.crc import key_slot
from redis.exceptions import (
    AskError,
    ClusterError,
    MaxConnectionsError,
    MovedError,
    NoScriptError,
    RedisError,
    ResponseError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from graph_service.redis_client.observed import observe
from graph_service.redis_client.packed import BATCH_TIMEOUT_FACTOR, pack

__all__ = ["REDIRECT_ROUNDS", "Redirects", "evalsha_each_key_on_cluster", "group_by_node", "sort_replies"]

REDIRECT_ROUNDS = RedisCluster.RedisClusterRequestTTL
"""Writes of one batch at most: the first, then the redirected keys again (redis-py's bound)."""

ASKING = b"*1\r\n$6\r\nASKING\r\n"

N = TypeVar("N", bound=Hashable)


def group_by_node(keys: Iterable[str], node_of_slot: Callable[[int], N]) -> dict[N, list[str]]:
    """The keys by the node that owns their slot, each node's in the order given."""
    groups: dict[N, list[str]] = {}
    for key in keys:
        groups.setdefault(node_of_slot(key_slot(key.encode())), []).append(key)
    return groups


@dataclass
class Redirects:
    """What the error replies of one round ask for next."""

    moved: list[tuple[str, MovedError]] = field(default_factory=list)
    """Keys whose slot has a new owner, with the reply that names it."""
    asked: dict[tuple[str, int], list[str]] = field(default_factory=dict)
    """Keys to send to another node, ``ASKING`` first, by that node's host and port."""
    error: ResponseError | None = None
    """The first other error reply, a ``NoScriptError`` before any other."""


def sort_replies(errors: Iterable[tuple[str, ResponseError]]) -> Redirects:
    """Sort the error replies of a round (each with its key) into redirects and the error to raise."""
    sorted_ = Redirects()
    for key, error in errors:
        if isinstance(error, MovedError):  # before AskError: MovedError is one
            sorted_.moved.append((key, error))
        elif isinstance(error, AskError):
            sorted_.asked.setdefault((error.host, error.port), []).append(key)
        elif sorted_.error is None or (
            isinstance(error, NoScriptError) and not isinstance(sorted_.error, NoScriptError)
        ):
            sorted_.error = error
    return sorted_


@dataclass(frozen=True)
class _Write:
    """One node's share of a round: its keys, asked for (``ASKING`` first) or its own."""

    node: ClusterNode
    keys: list[str]
    asking: bool = False


async def evalsha_each_key_on_cluster(
    cluster: RedisCluster, sha: str, keys: Sequence[str], args: Sequence[str | int]
) -> None:
    """Run the loaded script ``sha`` once per key (one key each, the same ``args``) on the masters
    that own the keys: one write per node, the nodes at once, redirected keys sent again. Every
    reply is read, then the first error reply is raised (a ``NoScriptError`` before any other:
    the caller loads the script and sends the batch again). One ``PIPELINE`` call to the metrics
    and traces."""
    if keys:
        await cluster.initialize()  # the slot map, read once (a no-op once read)
        await observe(cluster, "PIPELINE", _run(cluster, sha, keys, args), len(keys))


async def _run(cluster: RedisCluster, sha: str, keys: Sequence[str], args: Sequence[str | int]) -> None:
    timeout = cluster.get_connection_kwargs().get("socket_timeout")
    try:
        async with asyncio.timeout(None if timeout is None else timeout * BATCH_TIMEOUT_FACTOR):
            error = await _rounds(cluster, sha, keys, args)
    except TimeoutError as exc:
        raise RedisTimeoutError(f"a batch of {len(keys)} script calls was not answered in time") from exc
    if error is not None:
        raise error


async def _rounds(
    cluster: RedisCluster, sha: str, keys: Sequence[str], args: Sequence[str | int]
) -> ResponseError | None:
    """Write the batch, then the redirected keys again, until none is; the error reply to raise."""
    manager = cluster.nodes_manager
    writes = [_Write(node, group) for node, group in group_by_node(keys, manager.get_node_from_slot).items()]
    first_error: ResponseError | None = None
    for _ in range(REDIRECT_ROUNDS):
        replies = await _write_all(cluster, writes, sha, args)
        if isinstance(replies.error, NoScriptError):
            raise replies.error  # the whole batch is sent again once the script is loaded
        first_error = first_error or replies.error
        writes = await _redirected(cluster, replies)
        if not writes:
            return first_error
    raise ClusterError(f"keys of a batch still redirected after {REDIRECT_ROUNDS} writes")


async def _write_all(cluster: RedisCluster, writes: Sequence[_Write], sha: str, args: Sequence[str | int]) -> Redirects:
    """Every node's write at once; each node's replies are all read even if another node failed."""
    outcomes = await asyncio.gather(*(_write(w, sha, args) for w in writes), return_exceptions=True)
    errors: list[tuple[str, ResponseError]] = []
    failure: BaseException | None = None
    for write, outcome in zip(writes, outcomes, strict=True):
        if isinstance(outcome, BaseException):
            failure = failure or outcome
            if isinstance(outcome, RedisConnectionError | OSError) and not isinstance(outcome, MaxConnectionsError):
                await _renew(cluster, write.node)
        else:
            errors += outcome
    if failure is not None:
        raise failure
    return sort_replies(errors)


async def _write(write: _Write, sha: str, args: Sequence[str | int]) -> list[tuple[str, ResponseError]]:
    """One write of a node's share on one of its pooled connections; its error replies, by key."""
    if write.asking:
        payload, step = b"".join(ASKING + pack(sha, [key], args) for key in write.keys), 2
    else:
        payload, step = pack(sha, write.keys, args), 1
    node = write.node
    connection = node.acquire_connection()
    errors: list[tuple[str, ResponseError]] = []
    try:
        await node.disconnect_if_needed(connection)  # marked by a slot map read since it was used
        await connection.send_packed_command(payload)
        for index in range(len(write.keys) * step):
            try:
                await connection.read_response(timeout=math.inf)  # the batch's timeout covers it
            except ResponseError as exc:
                if index % step == step - 1:  # a script call's reply (ASKING's fails only off a Cluster)
                    errors.append((write.keys[index // step], exc))
    except BaseException:
        await connection.disconnect()
        raise
    finally:
        node.release(connection)
    return errors


async def _redirected(cluster: RedisCluster, replies: Redirects) -> list[_Write]:
    """The next round's writes: moved keys to their slot's new owner, asked keys to the named node."""
    manager = cluster.nodes_manager
    patched: set[int] = set()
    for _, moved in replies.moved:
        if moved.slot_id not in patched:
            patched.add(moved.slot_id)
            await manager.move_slot(moved)
    grouped = group_by_node((key for key, _ in replies.moved), manager.get_node_from_slot)
    writes = [_Write(node, group) for node, group in grouped.items()]
    for (host, port), asked in replies.asked.items():
        writes.append(_Write(_node_at(cluster, host, port), asked, asking=True))
    return writes


def _node_at(cluster: RedisCluster, host: str, port: int) -> ClusterNode:
    """The node at ``host:port``, added to the client's nodes if it holds no slot yet."""
    manager = cluster.nodes_manager
    node = manager.get_node(host=host, port=port)
    if node is None:
        node = ClusterNode(host, port, PRIMARY, **manager.connection_kwargs)
        manager.set_nodes(manager.nodes_cache, {node.name: node})
    return node


async def _renew(cluster: RedisCluster, node: ClusterNode) -> None:
    """A node's connection failed: its pooled connections are renewed and the slot map is read
    again, the failed node asked last (a failover gave its slots to another). If no node answers,
    the failure the caller raises says enough."""
    node.update_active_connections_for_reconnect()
    await node.disconnect_free_connections()
    with contextlib.suppress(RedisError, OSError):
        await cluster.nodes_manager.initialize(last_failed_node_name=node.name)

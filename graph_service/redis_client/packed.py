"""Script calls on a single Redis node, packed by hand and sent as one write.

- ``evalsha_each_key``: a fanout batch is up to ``SG_FANOUT_BATCH_SIZE`` ``EVALSHA`` calls that
  differ only in their key. redis-py's pipeline encodes every argument of every command again,
  keeps a command object and a callback per command, and reads each reply under a timeout of its
  own: about three quarters of a fanout's time in Python. Here the fixed parts are encoded once,
  each command is its key spliced between them, and the replies are read and dropped.
- ``evalsha_calls``: a few calls of one script with keys and arguments of their own (a follow's
  write-through in both users' slots), in one write instead of one round trip each.

Every reply is read under one timeout for the whole write. Single node only: on Redis Cluster the
keys live on several nodes. There a fanout batch is packed per node with ``pack`` and
``BATCH_TIMEOUT_FACTOR`` from here (``cluster_packed.py``, which routes by slot and follows MOVED
and ASK); a follow's write-through calls its script in each slot through redis-py's cluster client.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from graph_service.redis_client.observed import observe

__all__ = ["BATCH_TIMEOUT_FACTOR", "command", "evalsha_calls", "evalsha_each_key", "pack", "script_calls"]

BATCH_TIMEOUT_FACTOR = 4
"""A fanout batch may take this many socket timeouts (it is many commands)."""


def _bulk(value: bytes) -> bytes:
    return b"$%d\r\n%b\r\n" % (len(value), value)


def pack(sha: str, keys: Sequence[str], args: Sequence[str | int]) -> bytes:
    """``EVALSHA sha 1 key *args`` for each key, in RESP."""
    head = b"*%d\r\n" % (4 + len(args)) + _bulk(b"EVALSHA") + _bulk(sha.encode()) + _bulk(b"1")
    tail = b"".join(_bulk(str(a).encode()) for a in args)
    return b"".join([head + _bulk(key.encode()) + tail for key in keys])


def command(*parts: str | int) -> bytes:
    """One command in RESP, as a connection would write it."""
    return b"*%d\r\n" % len(parts) + b"".join(_bulk(str(part).encode()) for part in parts)


def pack_call(sha: str, keys: Sequence[str], args: Sequence[str | int]) -> bytes:
    """``EVALSHA sha len(keys) *keys *args`` in RESP."""
    return command("EVALSHA", sha, len(keys), *keys, *args)


async def evalsha_each_key(redis: Redis, sha: str, keys: Sequence[str], args: Sequence[str | int]) -> None:
    """Run the loaded script ``sha`` once per key (one key each, the same ``args``), all in one
    write on one pooled connection. Every reply is read, then the first error reply is raised
    (a ``NoScriptError`` before any other: the caller loads the script and sends the batch again).
    A connection that failed or timed out midway is closed, never given back with replies unread."""
    if keys:
        await _send_and_read(redis, pack(sha, keys, args), len(keys), keep=False, timeouts=BATCH_TIMEOUT_FACTOR)


async def evalsha_calls(
    redis: Redis, sha: str, calls: Sequence[tuple[Sequence[str], Sequence[str | int]]]
) -> list[Any]:
    """Run the loaded script ``sha`` once per ``(keys, args)`` of ``calls``, in one write on one
    pooled connection; the replies in order, under one socket timeout (a few calls: as long as one
    command may take, so a write-through waits no longer than it did as separate calls). Errors as
    ``evalsha_each_key``."""
    payload = b"".join(pack_call(sha, keys, args) for keys, args in calls)
    return await _send_and_read(redis, payload, len(calls), keep=True, timeouts=1)


async def script_calls(
    redis: Redis, script: AsyncScript, calls: Sequence[tuple[Sequence[str], Sequence[str | int]]]
) -> list[Any]:
    """``evalsha_calls`` of a registered script, loaded and sent again if Redis lost it (a restart,
    a failover, ``SCRIPT FLUSH``)."""
    try:
        return await evalsha_calls(redis, script.sha, calls)
    except NoScriptError:
        await redis.script_load(script.script)
        return await evalsha_calls(redis, script.sha, calls)


async def _send_and_read(redis: Redis, payload: bytes, count: int, *, keep: bool, timeouts: int) -> list[Any]:
    """One write of ``count`` commands and their replies: one ``PIPELINE`` call to the metrics and traces."""
    return await observe(redis, "PIPELINE", _round_trip(redis, payload, count, keep=keep, timeouts=timeouts), count)


async def _round_trip(redis: Redis, payload: bytes, count: int, *, keep: bool, timeouts: int) -> list[Any]:
    pool = redis.connection_pool
    connection: Any = await pool.get_connection()  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated
    timeout = connection.socket_timeout
    first_error: ResponseError | None = None
    replies: list[Any] = []
    try:
        async with asyncio.timeout(None if timeout is None else timeout * timeouts):
            await connection.send_packed_command(payload)
            for _ in range(count):
                try:
                    reply = await connection.read_response(timeout=math.inf)  # the batch's timeout covers it
                except ResponseError as exc:
                    if first_error is None or (
                        isinstance(exc, NoScriptError) and not isinstance(first_error, NoScriptError)
                    ):
                        first_error = exc  # NOSCRIPT first: the caller loads the script and sends again
                    continue
                if keep:
                    replies.append(reply)
    except TimeoutError as exc:
        await connection.disconnect()
        raise RedisTimeoutError(f"a batch of {count} script calls was not answered in time") from exc
    except BaseException:
        await connection.disconnect()
        raise
    finally:
        await pool.release(connection)
    if first_error is not None:
        raise first_error
    return replies

"""Shutting the server's adapters down: each is closed, in order, even when one of them fails."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from redis.exceptions import TimeoutError as RedisTimeoutError

from graph_service.entrypoints.server import close_all


async def test_a_failing_close_does_not_stop_the_later_adapters_closing_or_fail_the_shutdown() -> None:
    closed: list[str] = []

    def closer(name: str, error: Exception | None = None) -> Callable[[], Awaitable[None]]:
        async def close() -> None:
            closed.append(name)
            if error is not None:
                raise error

        return close

    await close_all(
        [
            closer("store"),
            closer("graph_cache", RedisTimeoutError("Timed out closing connection after 0.005")),
            closer("lease"),
        ]
    )
    assert closed == ["store", "graph_cache", "lease"]

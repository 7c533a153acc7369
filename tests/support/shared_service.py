"""One set of tables and one serving process for every test of a module, each test on user IDs of
its own, instead of fresh tables and servers per test.

Fresh tables, a server, a cache-less server and the counters consumer cost about 0.7 s of wall time
and 0.6 s of CPU per test (measured alone on the CI machine, DynamoDB Local included; more on a
loaded one): more than many tests spend on their calls. A test whose subject needs empty tables, a
Redis of its own or other settings keeps its own (``runtimes.settings``).

Redis is flushed once, when the module's first service starts; no test of the module may flush it
again (so none asks for ``redis_url``): each test's keys are its own users'.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest
import pytest_asyncio
import redis
from socialgraph_devstack.processes import ManagedProcess

from graph_service.entrypoints.server import ServerRuntime
from graph_service.settings import Settings
from tests.support.graph_calls import Stub
from tests.support.runtimes import make_settings, running_counters, running_server, stub_for
from tests.support.servers import trust_as_reset
from tests.support.tables import create_tables, drop_tables

__all__ = ["SharedService", "UserIds", "flushed_redis", "module_fixtures", "shared_service"]


@dataclass(frozen=True)
class SharedService:
    settings: Settings
    server: ServerRuntime
    stub: Stub


def flushed_redis(redis_node: ManagedProcess) -> str:
    """The session's Redis, flushed and its cache trusted (as ``redis_url`` leaves it), for a module."""
    client = redis.Redis(port=redis_node.port)
    try:
        client.flushall()
        trust_as_reset(client)
    finally:
        client.close()
    return f"redis://127.0.0.1:{redis_node.port}/0"


@contextlib.asynccontextmanager
async def shared_service(dynamodb_local: str, redis_url: str, *, streams: bool) -> AsyncIterator[SharedService]:
    """Tables (with change streams if ``streams``: ``tests/support/tables.py``) and a server on them;
    the tables are deleted afterwards. (A second server on them, a cache-less one say, would also take
    account jobs: add one only where a test expects it.)"""
    settings = make_settings(dynamodb_local, redis_url)
    await create_tables(settings, streams=streams)
    try:
        async with running_server(settings) as server, stub_for(server.port) as stub:
            yield SharedService(settings, server, stub)
    finally:
        await drop_tables(settings)


class UserIds:
    """Blocks of user IDs that no other test of the module uses: ``next_block()`` is the first ID of
    a block of ``size``, so a test's IDs are that plus the offsets it always used."""

    def __init__(self, size: int = 1_000_000) -> None:
        self._starts = itertools.count(size, size)

    def next_block(self) -> int:
        return next(self._starts)


S = TypeVar("S")
OpenService = Callable[..., AbstractAsyncContextManager[S]]
"""``(dynamodb_local, redis_url, streams=...)`` -> a module's service, while the block runs
(``shared_service``, or one built on it)."""


def module_fixtures(open_service: OpenService[S], settings_of: Callable[[S], Settings]) -> tuple[Any, ...]:
    """The fixtures of a module whose tests share its services, each test on user IDs of its own,
    to be assigned to the module's names ``module_redis, streamed, plain, service, user_ids,
    settings, counters``:

    - ``module_redis``: the session's Redis, flushed once for the module (``flushed_redis``);
    - ``streamed`` and ``plain``: the module's service (``open_service``) on tables with change
      streams, for the tests that run the counters consumer, and on tables without;
    - ``service``: the one of the test: ``streamed`` if it asks for ``counters``, else ``plain``;
    - ``user_ids``: the module's ``UserIds``;
    - ``settings``: the settings of the test's service (``settings_of``);
    - ``counters``: the counters consumer on the streamed tables, for the test that asks for it."""

    @pytest.fixture(scope="module", name="module_redis")
    def module_redis(redis_node: ManagedProcess) -> str:
        return flushed_redis(redis_node)

    @pytest_asyncio.fixture(scope="module", loop_scope="module", name="streamed")
    async def streamed(dynamodb_local: str, module_redis: str) -> AsyncIterator[Any]:
        async with open_service(dynamodb_local, module_redis, streams=True) as service:
            yield service

    @pytest_asyncio.fixture(scope="module", loop_scope="module", name="plain")
    async def plain(dynamodb_local: str, module_redis: str) -> AsyncIterator[Any]:
        async with open_service(dynamodb_local, module_redis, streams=False) as service:
            yield service

    @pytest.fixture(name="service")
    def service(request: pytest.FixtureRequest) -> Any:
        return request.getfixturevalue("streamed" if "counters" in request.fixturenames else "plain")

    @pytest.fixture(scope="module", name="user_ids")
    def user_ids() -> UserIds:
        return UserIds()

    @pytest.fixture(name="settings")
    def settings(service: S) -> Settings:
        return settings_of(service)

    @pytest_asyncio.fixture(loop_scope="module", name="counters")
    async def counters(streamed: S) -> AsyncIterator[asyncio.Task[None]]:
        async with running_counters(settings_of(streamed)) as task:
            yield task

    return module_redis, streamed, plain, service, user_ids, settings, counters

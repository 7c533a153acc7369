"""In-memory doubles of the clients, for the unit tests of code that calls the service.

``FakeSocialGraphClient`` and ``FakeAsyncSocialGraphClient`` are the real clients over a
``FakeGraph`` instead of a channel: the same methods and keyword arguments (``timeout=``,
``metadata=``, ``retry=`` are checked as the client checks them, then have nothing to act on), the
same checks of arguments (``ValueError``), values, pages and iterators, and the same errors (class,
``code``, ``reason``, ``metadata``) where the service would refuse. The graph follows the service's
rules for follows, privacy and requests, blocks, mutes, counts, relationships, known and mutual
followers, suggestions and pages; the account lifecycle and the home timeline answer
``Unimplemented``. ``FakeGraph.fail_next`` makes the next call fail with a code of your choice (an
outage, a deadline, a rate limit), to test how your code handles it.
``tests/integration/client/test_testing_double.py`` runs one set of calls against a double and
against a real server and asserts the same answers.

    from socialgraph_client.testing import FakeGraph, FakeSocialGraphClient

    client = FakeSocialGraphClient()  # or FakeSocialGraphClient(FakeGraph(max_following=10))
    client.follow(1, 2)
    assert client.is_following(1, 2)
"""

from __future__ import annotations

from typing import Any, NoReturn, TypeVar

import grpc
from google.protobuf import duration_pb2
from google.protobuf.any_pb2 import Any as AnyMessage
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2

from socialgraph_client.aio import AsyncSocialGraphClient
from socialgraph_client.aio_transport import AsyncTransport
from socialgraph_client.calls import Lifecycle, Planner, Retry
from socialgraph_client.errors import DETAILS_KEY, REQUEST_ID_KEY, error_from_rpc
from socialgraph_client.fake_graph import Refusal
from socialgraph_client.fake_service import FakeGraph
from socialgraph_client.options import USE_CLIENT_DEFAULT, Deadlines, Metadata, RetryPolicy
from socialgraph_client.reasons import DOMAIN
from socialgraph_client.rpcs import Rpc
from socialgraph_client.sync import SocialGraphClient
from socialgraph_client.sync_transport import SyncTransport

__all__ = ["FakeAsyncSocialGraphClient", "FakeGraph", "FakeSocialGraphClient"]

Req = TypeVar("Req", bound=Message)
Rep = TypeVar("Rep", bound=Message)


class FakeSocialGraphClient(SocialGraphClient):
    """``SocialGraphClient`` answered by ``graph`` (a new, empty one when not given; give the same
    one to several clients to share it). ``close()`` and ``with`` work as on the real client."""

    def __init__(self, graph: FakeGraph | None = None) -> None:
        self.graph = FakeGraph() if graph is None else graph
        """The graph this client calls."""
        super().__init__(_FakeSyncTransport(self.graph))

    @classmethod
    def connect(cls, *args: Any, **kwargs: Any) -> NoReturn:
        """A double is made, not connected: ``FakeSocialGraphClient(graph)``."""
        raise TypeError(f"{cls.__name__} has no server to connect to: make one with {cls.__name__}(graph)")


class FakeAsyncSocialGraphClient(AsyncSocialGraphClient):
    """``AsyncSocialGraphClient`` answered by ``graph`` (a new, empty one when not given; give the
    same one to several clients, blocking ones included, to share it)."""

    def __init__(self, graph: FakeGraph | None = None) -> None:
        self.graph = FakeGraph() if graph is None else graph
        """The graph this client calls."""
        super().__init__(_FakeAsyncTransport(self.graph))

    @classmethod
    async def connect(cls, *args: Any, **kwargs: Any) -> NoReturn:
        """A double is made, not connected: ``FakeAsyncSocialGraphClient(graph)``."""
        raise TypeError(f"{cls.__name__} has no server to connect to: make one with {cls.__name__}(graph)")


class _Calls:
    """What both doubles' transports do for a call: refuse one on a closed client, check the call's
    options as the client's planner does (a ``timeout`` not above 0, bad metadata or ``retry``: a
    ``ValueError``), then ask the graph, and turn its refusal into the client's error."""

    def __init__(self, graph: FakeGraph) -> None:
        self.graph = graph
        self.planner = Planner(Deadlines(), RetryPolicy(), ())
        self.lifecycle = Lifecycle()

    def call(
        self, rpc: Rpc[Req, Rep], request: Req, timeout: float | None, metadata: Metadata | None, retry: Retry
    ) -> Rep:
        self.lifecycle.check()
        plan = self.planner.plan(rpc, timeout, metadata, retry)
        try:
            return self.graph.answer(rpc, request)
        except Refusal as refusal:
            raise error_from_rpc(_Refused(refusal, plan.request_id), plan.request_id) from None


class _FakeSyncTransport(SyncTransport):
    """The blocking client's transport, over a graph instead of a channel (no channel is opened, so
    the real transport's constructor is not run)."""

    def __init__(self, graph: FakeGraph) -> None:
        self._fake = _Calls(graph)

    def call(
        self,
        rpc: Rpc[Req, Rep],
        request: Req,
        timeout: float | None,
        metadata: Metadata | None,
        retry: Retry = USE_CLIENT_DEFAULT,
    ) -> Rep:
        return self._fake.call(rpc, request, timeout, metadata, retry)

    def close(self) -> None:
        self._fake.lifecycle.closed = True


class _FakeAsyncTransport(AsyncTransport):
    """The asyncio client's transport, over a graph instead of a channel (no channel is opened)."""

    def __init__(self, graph: FakeGraph) -> None:
        self._fake = _Calls(graph)

    async def call(
        self,
        rpc: Rpc[Req, Rep],
        request: Req,
        timeout: float | None,
        metadata: Metadata | None,
        retry: Retry = USE_CLIENT_DEFAULT,
    ) -> Rep:
        return self._fake.call(rpc, request, timeout, metadata, retry)

    async def close(self) -> None:
        self._fake.lifecycle.closed = True


class _Refused(grpc.RpcError):
    """A refusal as the client receives it from a server: code, message, the ``google.rpc.Status``
    details (``ErrorInfo``) in the trailer, and the request ID echoed, for ``error_from_rpc``."""

    def __init__(self, refusal: Refusal, request_id: str) -> None:
        self._refusal = refusal
        self._request_id = request_id

    def code(self) -> grpc.StatusCode:
        return self._refusal.code

    def details(self) -> str:
        return self._refusal.message

    def initial_metadata(self) -> tuple[tuple[str, str], ...]:
        return ((REQUEST_ID_KEY, self._request_id),)

    def trailing_metadata(self) -> tuple[tuple[str, bytes], ...]:  # type: ignore[override]  # grpc-stubs' _Metadatum: the same pairs
        refusal = self._refusal
        details = []
        if refusal.reason:
            info = AnyMessage()
            info.Pack(error_details_pb2.ErrorInfo(reason=refusal.reason, domain=DOMAIN, metadata=refusal.metadata))
            details.append(info)
        if refusal.retry_after is not None:
            delay = duration_pb2.Duration()
            delay.FromNanoseconds(round(refusal.retry_after * 1e9))
            retry = AnyMessage()
            retry.Pack(error_details_pb2.RetryInfo(retry_delay=delay))
            details.append(retry)
        if not details:
            return ()
        status = status_pb2.Status(code=refusal.code.value[0], message=refusal.message, details=details)
        return ((DETAILS_KEY, status.SerializeToString()),)

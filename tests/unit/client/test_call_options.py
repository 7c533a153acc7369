"""Every method of both clients hands its ``timeout``, ``metadata`` and ``retry`` to the call it makes
(each page's call, for the ``iter_*`` methods; each poll's, for ``wait_for_account``)."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, cast

import pytest
from google.protobuf.message import Message
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph_client import USE_CLIENT_DEFAULT, AsyncSocialGraphClient, RetryPolicy, SocialGraphClient, rpcs
from socialgraph_client.rpcs import Rpc

from tests.unit.client.test_arguments import methods, valid_arguments

OWN = RetryPolicy(max_attempts=7)
METADATA = {"x-tenant": "feed"}


class Recorder:
    """Stands for a transport: records what each call was given, and answers an empty reply (an
    active account for ``GetAccountState``)."""

    def __init__(self) -> None:
        self.given: list[tuple[str, float | None, Any, Any]] = []

    def call(self, rpc: Rpc[Any, Any], request: Message, timeout: float | None, metadata: Any, retry: Any) -> Message:
        self.given.append((rpc.name, timeout, metadata, retry))
        if rpc is rpcs.GET_ACCOUNT_STATE:
            return pb.GetAccountStateResponse(state=pb.ACCOUNT_STATE_ACTIVE)
        reply: Message = rpc.response()
        return reply


class AsyncRecorder:
    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    async def call(
        self,
        rpc: Rpc[Any, Any],
        request: Message,
        timeout: float | None,  # noqa: ASYNC109 - AsyncTransport.call's signature
        metadata: Any,
        retry: Any,
    ) -> Message:
        return self.recorder.call(rpc, request, timeout, metadata, retry)


def run_sync(name: str, **arguments: Any) -> list[tuple[str, float | None, Any, Any]]:
    recorder = Recorder()
    outcome = getattr(SocialGraphClient(cast(Any, recorder)), name)(**arguments)
    if inspect.isgenerator(outcome):
        list(outcome)
    return recorder.given


def run_async(name: str, **arguments: Any) -> list[tuple[str, float | None, Any, Any]]:
    recorder = Recorder()
    outcome = getattr(AsyncSocialGraphClient(cast(Any, AsyncRecorder(recorder))), name)(**arguments)

    async def drive() -> None:
        if inspect.isasyncgen(outcome):
            _ = [item async for item in outcome]
        else:
            await outcome

    asyncio.run(drive())
    return recorder.given


@pytest.mark.parametrize("name", list(methods()))
def test_every_method_hands_its_call_options_to_the_transport(name: str) -> None:
    arguments = valid_arguments(name)
    for run in (run_sync, run_async):
        given = run(name, **arguments, timeout=3.0, metadata=METADATA, retry=OWN)
        assert given, name
        assert all((metadata, retry) == (METADATA, OWN) for _, _, metadata, retry in given), given
        # wait_for_account's timeout is the whole wait's: each poll gets what is left of it
        timeouts = [timeout or 0.0 for _, timeout, _, _ in given]
        assert all(0 < timeout <= 3.0 if name == "wait_for_account" else timeout == 3.0 for timeout in timeouts)
        assert all(retry is USE_CLIENT_DEFAULT for *_, retry in run(name, **arguments)), name

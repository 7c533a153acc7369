"""Caller authentication and scopes on a real server (SPEC §7.1): every RPC against every kind of
caller, bad tokens, the callers file reloaded live, the caller's name in the logs and the token never.

Each test runs a server of its own (its callers file), on the module's tables (``shared_tables``):
the tests that write use user IDs no other test of the module uses."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path

import grpc
import pytest
from google.protobuf import message_factory
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph.v1 import timeline_pb2 as tpb
from socialgraph_client import AsyncSocialGraphClient, PermissionDenied, Reason, Unauthenticated

from graph_service.api.auth import SCOPE_OF
from graph_service.api.callers import caller_entry, mint_token
from graph_service.entrypoints.server import ServerRuntime
from graph_service.settings import Settings
from tests.support.graph_calls import error_info
from tests.support.logs import capture_every_level
from tests.support.polling import eventually
from tests.support.runtimes import running_server

UNAUTHENTICATED = grpc.StatusCode.UNAUTHENTICATED
DENIED = grpc.StatusCode.PERMISSION_DENIED


@dataclass
class AuthServer:
    runtime: ServerRuntime
    channel: grpc.aio.Channel
    callers_file: Path
    tokens: dict[str, str]
    """caller name -> token: ``reader`` (read), ``writer`` (write), ``both`` (read, write), ``admin``
    (admin only)."""

    async def call(self, method: str, token: str | None, request: object | None = None) -> grpc.StatusCode:
        """The status of one call of ``method`` (an empty request unless given) with ``token``."""
        if request is None:
            request = _empty_request(method)
        metadata = None if token is None else (("authorization", f"Bearer {token}"),)
        return await self.raw(method, metadata, request)

    async def raw(self, method: str, metadata: tuple[tuple[str, str], ...] | None, request: object) -> grpc.StatusCode:
        rpc = self.channel.unary_unary(method, request_serializer=lambda m: m.SerializeToString())
        try:
            await rpc(request, metadata=metadata, timeout=10)
        except grpc.aio.AioRpcError as error:
            return error.code()
        return grpc.StatusCode.OK


def _empty_request(method: str) -> object:
    """The method's request message with every field unset: past the auth check, it is refused as
    INVALID_ARGUMENT (user ID 0) or answered empty, and never writes anything."""
    service, name = method.strip("/").rsplit("/", 1)
    for module in (pb, tpb):
        found = module.DESCRIPTOR.services_by_name.get(service.rsplit(".", 1)[1])
        if found is not None and found.full_name == service:
            return message_factory.GetMessageClass(found.methods_by_name[name].input_type)()
    raise AssertionError(f"no such method {method}")


def write_callers(path: Path, callers: dict[str, tuple[list[str], str]]) -> None:
    text = "\n".join(caller_entry(name, scopes, token) for name, (scopes, token) in callers.items())
    path.write_text(text, encoding="utf-8")


SCOPES = {"reader": {"read"}, "writer": {"write"}, "both": {"read", "write"}, "admin": {"admin"}}
"""The callers of ``serving_callers`` and their scopes."""


@contextlib.asynccontextmanager
async def serving_callers(settings: Settings, tmp_path: Path, reload_seconds: float) -> AsyncIterator[AuthServer]:
    """A server whose callers file holds ``reader`` (read), ``writer`` (write) and ``both``."""
    tokens = {name: mint_token() for name in SCOPES}
    scopes = {name: sorted(granted) for name, granted in SCOPES.items()}
    callers_file = tmp_path / "callers.toml"
    write_callers(callers_file, {name: (scopes[name], tokens[name]) for name in tokens})
    secured = replace(settings, auth_tokens_file=str(callers_file), auth_reload_seconds=reload_seconds)
    async with running_server(secured) as runtime, grpc.aio.insecure_channel(f"127.0.0.1:{runtime.port}") as channel:
        yield AuthServer(runtime, channel, callers_file, tokens)


@pytest.fixture
def settings(shared_tables: Settings, redis_url: str) -> Settings:
    """The module's tables (creating five per test cost more than most tests here) and this test's
    flushed Redis."""
    return replace(shared_tables, redis_url=redis_url)


@pytest.fixture
async def auth(settings: Settings, tmp_path: Path) -> AsyncIterator[AuthServer]:
    async with serving_callers(settings, tmp_path, reload_seconds=0.05) as server:
        yield server


ALLOWED = {grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT}
"""Past the auth check, an empty request is answered or refused as a bad argument."""


async def test_each_scope_against_each_rpc(auth: AuthServer) -> None:
    """A caller reaches an RPC exactly when its scopes include the one the scope table names; no
    token or an unknown one reaches none; every RPC of both services is in the table."""
    served = [
        f"/{service.full_name}/{method.name}"
        for module in (pb, tpb)
        for service in module.DESCRIPTOR.services_by_name.values()
        for method in service.methods
    ]
    assert sorted(served) == sorted(SCOPE_OF)
    for method, scope in SCOPE_OF.items():
        for name, token in auth.tokens.items():
            code = await auth.call(method, token)
            may = scope in SCOPES[name]
            assert (code in ALLOWED) if may else (code == DENIED), (method, name, code)
        assert await auth.call(method, None) == UNAUTHENTICATED, method
        assert await auth.call(method, mint_token()) == UNAUTHENTICATED, method


async def test_a_missing_scope_is_permission_denied_naming_the_scope(auth: AuthServer) -> None:
    """PERMISSION_DENIED carries reason MISSING_SCOPE and the scope in ErrorInfo; nothing is written."""
    follow = pb.FollowRequest(follower_id=1, followee_id=2)
    stub_call = auth.channel.unary_unary(
        "/socialgraph.v1.SocialGraphService/Follow",
        request_serializer=pb.FollowRequest.SerializeToString,
        response_deserializer=pb.FollowResponse.FromString,
    )
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stub_call(follow, metadata=(("authorization", f"Bearer {auth.tokens['reader']}"),))
    assert refused.value.code() == DENIED
    info = error_info(refused.value)
    assert info.reason == "MISSING_SCOPE"
    assert dict(info.metadata) == {"scope": "write"}
    is_following = pb.IsFollowingRequest(follower_id=1, followee_id=2)
    assert await auth.call("/socialgraph.v1.SocialGraphService/IsFollowing", auth.tokens["reader"], is_following) == (
        grpc.StatusCode.OK
    )
    reply = await auth.channel.unary_unary(
        "/socialgraph.v1.SocialGraphService/IsFollowing",
        request_serializer=pb.IsFollowingRequest.SerializeToString,
        response_deserializer=pb.IsFollowingResponse.FromString,
    )(is_following, metadata=(("authorization", f"Bearer {auth.tokens['both']}"),))
    assert not reply.following


async def test_the_lifecycle_changes_need_admin_and_admin_grants_nothing_else(auth: AuthServer) -> None:
    """A write caller cannot deactivate an account (MISSING_SCOPE naming ``admin``, nothing
    changes); an admin caller can, and cannot follow (``admin`` is no ``write``)."""
    deactivate = auth.channel.unary_unary(
        "/socialgraph.v1.SocialGraphService/DeactivateAccount",
        request_serializer=pb.DeactivateAccountRequest.SerializeToString,
        response_deserializer=pb.DeactivateAccountResponse.FromString,
    )
    request = pb.DeactivateAccountRequest(user_id=5)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await deactivate(request, metadata=(("authorization", f"Bearer {auth.tokens['both']}"),))
    assert refused.value.code() == DENIED
    assert dict(error_info(refused.value).metadata) == {"scope": "admin"}
    state = pb.GetAccountStateRequest(user_id=5)
    method = "/socialgraph.v1.SocialGraphService/GetAccountState"
    assert await auth.call(method, auth.tokens["reader"], state) == grpc.StatusCode.OK
    reader = (("authorization", f"Bearer {auth.tokens['reader']}"),)
    get_state = auth.channel.unary_unary(
        method,
        request_serializer=pb.GetAccountStateRequest.SerializeToString,
        response_deserializer=pb.GetAccountStateResponse.FromString,
    )
    assert (await get_state(state, metadata=reader)).state == pb.ACCOUNT_STATE_ACTIVE
    await deactivate(request, metadata=(("authorization", f"Bearer {auth.tokens['admin']}"),))
    assert (await get_state(state, metadata=reader)).state in {
        pb.ACCOUNT_STATE_DEACTIVATING,
        pb.ACCOUNT_STATE_DEACTIVATED,
    }
    follow = pb.FollowRequest(follower_id=6, followee_id=7)
    assert await auth.call("/socialgraph.v1.SocialGraphService/Follow", auth.tokens["admin"], follow) == DENIED


GARBLED = [
    "",
    "Bearer",
    "Bearer ",
    "Basic dXNlcjpwYXNz",
    "Token abc",
    "bearer-abc",
    "Bearer sgt_" + "A" * 43,
    "Bearer " + "x" * 5000,
]
"""Empty, scheme only, scheme and blank, basic, another scheme, no space, unknown, huge."""


async def test_garbled_or_unknown_authorization_is_unauthenticated(auth: AuthServer) -> None:
    """Every malformed or unknown authorization value is UNAUTHENTICATED with an ErrorInfo; the
    message never repeats what was sent."""
    rpc = auth.channel.unary_unary(
        "/socialgraph.v1.SocialGraphService/GetCounts", request_serializer=pb.GetCountsRequest.SerializeToString
    )
    for header in GARBLED:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await rpc(pb.GetCountsRequest(user_id=1), metadata=(("authorization", header),))
        assert refused.value.code() == UNAUTHENTICATED, header
        assert error_info(refused.value).reason == "UNAUTHENTICATED"
        secret = header.partition(" ")[2]
        assert not secret or secret not in (refused.value.details() or "")


async def test_the_scheme_is_case_insensitive(auth: AuthServer) -> None:
    """``bearer`` and ``BEARER`` are the same scheme (RFC 7235)."""
    request = pb.GetCountsRequest(user_id=1)
    for scheme in ("bearer", "BEARER"):
        code = await auth.raw(
            "/socialgraph.v1.SocialGraphService/GetCounts",
            (("authorization", f"{scheme} {auth.tokens['reader']}"),),
            request,
        )
        assert code == grpc.StatusCode.OK


async def test_health_and_reflection_need_no_token(auth: AuthServer) -> None:
    """Load balancers and grpcurl's list/describe work without credentials."""
    health = await health_pb2_grpc.HealthStub(auth.channel).Check(health_pb2.HealthCheckRequest())
    assert health.status == health_pb2.HealthCheckResponse.SERVING
    stream = reflection_pb2_grpc.ServerReflectionStub(auth.channel).ServerReflectionInfo(
        iter([reflection_pb2.ServerReflectionRequest(list_services="")])
    )
    services = [s.name async for reply in stream for s in reply.list_services_response.service]
    assert "socialgraph.v1.SocialGraphService" in services


async def test_the_file_is_reloaded_when_it_changes_and_a_bad_version_keeps_the_old(auth: AuthServer) -> None:
    """A caller added to the file is let in, a removed one is shut out, without a restart and
    without failing a call of a caller in both versions; a file that does not parse is logged and
    the callers in force stay."""
    method = "/socialgraph.v1.SocialGraphService/ListFollowers"
    newcomer = mint_token()
    staying: list[grpc.StatusCode] = []
    done = asyncio.Event()

    async def keep_calling() -> None:
        while not done.is_set():
            staying.append(await auth.call(method, auth.tokens["reader"]))

    caller = asyncio.create_task(keep_calling())
    write_callers(auth.callers_file, {"reader": (["read"], auth.tokens["reader"]), "new": (["read"], newcomer)})
    await eventually(lambda: auth.call(method, newcomer), lambda code: code in ALLOWED, timeout=10)
    done.set()
    await caller
    assert staying
    assert set(staying) <= ALLOWED
    await eventually(lambda: auth.call(method, auth.tokens["both"]), lambda code: code == UNAUTHENTICATED, timeout=10)
    with capture_every_level() as logs:
        bad = caller_entry("fine", ["read"], mint_token()) + "\n" + caller_entry("x", ["owner"], mint_token())
        auth.callers_file.write_text(bad, encoding="utf-8")
        await eventually(
            lambda: asyncio.sleep(0), lambda _: any(e["event"] == "callers_file_rejected" for e in logs), timeout=10
        )
    rejected = next(e for e in logs if e["event"] == "callers_file_rejected")
    assert "line 6" in rejected["error"]
    assert "owner" in rejected["error"]
    assert await auth.call(method, newcomer) in ALLOWED
    assert await auth.call(method, auth.tokens["reader"]) in ALLOWED
    with capture_every_level() as logs:
        auth.callers_file.write_text("", encoding="utf-8")  # emptied, as a non-atomic rewrite leaves it a moment
        await eventually(
            lambda: asyncio.sleep(0), lambda _: any(e["event"] == "callers_file_rejected" for e in logs), timeout=10
        )
    assert await auth.call(method, newcomer) in ALLOWED


async def test_reload_on_demand_takes_effect_at_once(settings: Settings, tmp_path: Path) -> None:
    """SIGHUP's action (``reload``) applies the file before the next call, long before the next look."""
    async with serving_callers(settings, tmp_path, reload_seconds=3600) as auth:
        late = mint_token()
        write_callers(auth.callers_file, {"late": (["write"], late)})
        assert await auth.call("/socialgraph.v1.SocialGraphService/Unfollow", late) == UNAUTHENTICATED
        auth.runtime.reload()
        assert await auth.call("/socialgraph.v1.SocialGraphService/Unfollow", late) in ALLOWED
        assert await auth.call("/socialgraph.v1.SocialGraphService/Unfollow", auth.tokens["both"]) == UNAUTHENTICATED


async def test_the_callers_name_is_in_every_log_line_of_its_call_and_the_token_in_none(auth: AuthServer) -> None:
    """A call's own log lines (here the sweep of SetPrivacy) and its access line carry the caller's
    name; no line holds the token, whether it was accepted, refused or unknown."""
    token = auth.tokens["both"]
    write = (("authorization", f"Bearer {token}"),)
    with capture_every_level() as logs:
        await auth.raw(
            "/socialgraph.v1.SocialGraphService/SetPrivacy", write, pb.SetPrivacyRequest(user_id=9, private=True)
        )
        await auth.raw(
            "/socialgraph.v1.SocialGraphService/Follow", write, pb.FollowRequest(follower_id=8, followee_id=9)
        )
        await auth.raw(
            "/socialgraph.v1.SocialGraphService/SetPrivacy", write, pb.SetPrivacyRequest(user_id=9, private=False)
        )
        await auth.call("/socialgraph.v1.SocialGraphService/Follow", auth.tokens["reader"])
        await auth.call("/socialgraph.v1.SocialGraphService/Follow", "sgt_unknown-token-value")
    sweep = [e for e in logs if e["event"] == "pending_requests_accepted"]
    assert sweep
    assert sweep[0]["caller"] == "both"
    access = [e for e in logs if e["event"] == "rpc"]
    assert {e.get("caller") for e in access if e["method"].endswith("SetPrivacy")} == {"both"}
    assert any(e.get("caller") == "reader" and e["outcome"] == "MISSING_SCOPE" for e in access)
    text = json.dumps([{k: str(v) for k, v in e.items()} for e in logs])
    for secret in (token, auth.tokens["reader"], "sgt_unknown-token-value"):
        assert secret not in text


async def test_the_python_client_sends_its_token(auth: AuthServer) -> None:
    """``connect(token=...)`` is let in with the caller's scopes, and so is a token given as the
    client's own ``metadata``; without a token the client raises ``Unauthenticated``, and a
    read-only caller's write raises ``PermissionDenied`` / ``MISSING_SCOPE``."""
    target = f"127.0.0.1:{auth.runtime.port}"
    async with await AsyncSocialGraphClient.connect(target, token=auth.tokens["both"]) as client:
        assert await client.follow(11, 12) == "FOLLOWING"
        assert await client.is_following(11, 12)
    header = {"authorization": f"Bearer {auth.tokens['both']}"}
    async with await AsyncSocialGraphClient.connect(target, metadata=header) as client:
        await client.unfollow(11, 13)
    async with await AsyncSocialGraphClient.connect(target) as client:
        await client.unfollow(11, 13, metadata=header)  # per call
    async with await AsyncSocialGraphClient.connect(target, token=auth.tokens["reader"]) as client:
        assert await client.is_following(11, 12)
        with pytest.raises(PermissionDenied) as denied:
            await client.unfollow(11, 12)
        assert (denied.value.code, denied.value.reason) == (DENIED, Reason.MISSING_SCOPE)
        assert denied.value.attempts == 1
    async with await AsyncSocialGraphClient.connect(target) as client:
        with pytest.raises(Unauthenticated) as refused:
            await client.is_following(11, 12)
        assert refused.value.code == UNAUTHENTICATED

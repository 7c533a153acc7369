"""The service as a real process, driven with the grpcurl binary and signals, as an operator would."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc
from socialgraph_devstack.processes import ManagedProcess, free_port

from graph_service.api.callers import caller_entry, mint_token
from graph_service.domain.models import Edge
from tests.support.commands import REPO, socialgraph
from tests.support.declared_rpcs import GRAPH
from tests.support.grpcurl import grpcurl_binary
from tests.support.polling import eventually, wait_until

SERVICE = GRAPH.full_name


@dataclass
class Service:
    address: str
    env: dict[str, str]
    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def service_env(dynamodb_endpoint: str, redis_url: str, address: str, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        "SG_DYNAMODB_ENDPOINT": dynamodb_endpoint,
        "SG_REDIS_URL": redis_url,
        "SG_TABLE_PREFIX": f"e{uuid.uuid4().hex[:10]}_",
        "SG_GRPC_ADDRESS": address,
        "SG_LOG_LEVEL": "warning",
        **extra,
    }


def health_status(address: str) -> int | None:
    with grpc.insecure_channel(address) as channel:
        try:
            return int(health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=1).status)
        except grpc.RpcError:
            return None


def start_service(env: dict[str, str], log_path: Path) -> Service:
    """Create the tables, start `serve` and poll the health service until it says SERVING."""
    created = socialgraph(env, "create-tables")
    assert created.returncode == 0, created.stderr
    with log_path.open("ab") as log_file:
        process = subprocess.Popen(
            [sys.executable, "-m", "graph_service", "serve"], env=env, cwd=REPO, stdout=log_file, stderr=log_file
        )
    service = Service(env["SG_GRPC_ADDRESS"], env, process, log_path)

    def serving() -> bool:
        assert process.poll() is None, f"serve exited with {process.returncode}: {service.log()}"
        return bool(health_status(service.address) == health_pb2.HealthCheckResponse.SERVING)

    wait_until(serving, timeout=60, what="health SERVING")
    return service


def stop_service(service: Service) -> int:
    if service.process.poll() is None:
        service.process.send_signal(signal.SIGTERM)
        try:
            service.process.wait(20)
        except subprocess.TimeoutExpired:
            service.process.kill()
            service.process.wait()
    return service.process.returncode


@pytest.fixture(scope="module")
def service(
    dynamodb_local: str, redis_node: ManagedProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Service]:
    """`python -m graph_service serve` on a free port, against the session's DynamoDB Local and Redis."""
    env = service_env(
        dynamodb_local, f"redis://127.0.0.1:{redis_node.port}/0", f"127.0.0.1:{free_port()}", SG_LOG_LEVEL="debug"
    )
    running = start_service(env, tmp_path_factory.mktemp("serve") / "serve.log")
    yield running
    assert stop_service(running) == 0, running.log()
    for line in running.log().splitlines():  # a line per call at debug, an error or two: all JSON
        entry = json.loads(line)
        assert {"event", "level", "logger", "timestamp"} <= entry.keys(), line


def grpcurl(service: Service, *args: str, data: dict[str, object] | None = None) -> subprocess.CompletedProcess[str]:
    """``grpcurl -plaintext [-d JSON] <address> <args>``: reflection only, no proto files."""
    command = [grpcurl_binary(), "-plaintext"]
    if data is not None:
        command += ["-d", json.dumps(data)]
    if args and args[0].startswith("-"):
        command += [args[0]]
        args = args[1:]
    return subprocess.run([*command, service.address, *args], capture_output=True, text=True, timeout=30, check=False)


def call(service: Service, method: str, data: dict[str, object]) -> dict[str, Any]:
    result = grpcurl(service, f"{SERVICE}/{method}", data=data)
    assert result.returncode == 0, result.stderr
    reply: dict[str, Any] = json.loads(result.stdout)
    return reply


# -- grpcurl through reflection --------------------------------------------------------------


def test_grpcurl_lists_the_service_and_health_through_reflection(service: Service) -> None:
    """`grpcurl list` names the graph service and the health service with no proto files at hand."""
    result = grpcurl(service, "list")
    assert result.returncode == 0, result.stderr
    listed = result.stdout.split()
    assert SERVICE in listed
    assert "grpc.health.v1.Health" in listed


def test_grpcurl_describes_the_service_and_its_messages(service: Service) -> None:
    """`grpcurl describe` shows every RPC of the contract and the request fields with their types."""
    described = grpcurl(service, "describe", SERVICE)
    assert described.returncode == 0, described.stderr
    for rpc in (method.name for method in GRAPH.methods):  # every RPC the proto declares
        assert f"rpc {rpc} ( .socialgraph.v1.{rpc}Request ) returns ( .socialgraph.v1.{rpc}Response );" in (
            described.stdout
        )
    message = grpcurl(service, "describe", "socialgraph.v1.FollowRequest")
    assert message.returncode == 0, message.stderr
    assert "uint64 follower_id = 1;" in message.stdout
    assert "uint64 followee_id = 2;" in message.stdout


def test_grpcurl_follow_then_is_following_and_list_in_json(service: Service) -> None:
    """Follow and IsFollowing work through reflection with JSON in and out; uint64 IDs come back as strings."""
    assert call(service, "Follow", {"follower_id": 7001, "followee_id": 7002}) == {"state": "FOLLOW_STATE_FOLLOWING"}
    assert call(service, "Follow", {"follower_id": "7001", "followee_id": "7002"}) == {
        "state": "FOLLOW_STATE_FOLLOWING"
    }
    assert call(service, "IsFollowing", {"follower_id": 7001, "followee_id": 7002}) == {"following": True}
    reverse = grpcurl(
        service, "-emit-defaults", f"{SERVICE}/IsFollowing", data={"follower_id": 7002, "followee_id": 7001}
    )
    assert reverse.returncode == 0, reverse.stderr
    assert json.loads(reverse.stdout) == {"following": False}
    listed = call(service, "ListFollowers", {"user_id": 7002})
    assert [f["user_id"] for f in listed["followers"]] == ["7001"]  # uint64 as a JSON string
    assert listed["followers"][0]["followed_at"].endswith("Z")  # a Timestamp in RFC 3339


def test_grpcurl_shows_invalid_argument_for_a_bad_call(service: Service) -> None:
    """A self-follow through grpcurl fails with INVALID_ARGUMENT and the SELF_FOLLOW reason."""
    result = grpcurl(service, f"{SERVICE}/Follow", data={"follower_id": 7003, "followee_id": 7003})
    assert result.returncode != 0
    assert "Code: InvalidArgument" in result.stderr
    assert "SELF_FOLLOW" in result.stderr
    formatted = grpcurl(service, "-format-error", f"{SERVICE}/Follow", data={"follower_id": 0, "followee_id": 7003})
    assert formatted.returncode != 0
    status = json.loads(formatted.stdout or formatted.stderr)
    assert status["code"] == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert status["details"][0]["reason"] == "INVALID_USER_ID"


def test_grpcurl_relationship_walkthrough_of_the_readme(service: Service) -> None:
    """The README's private-account, block, relationship, mute and account lifecycle examples, with
    the replies it shows."""
    a, b, c, d = 7030, 7031, 7032, 7033
    assert call(service, "SetPrivacy", {"user_id": a, "private": True}) == {}
    assert call(service, "Follow", {"follower_id": b, "followee_id": a}) == {"state": "FOLLOW_STATE_REQUESTED"}
    requests = call(service, "ListFollowRequests", {"user_id": a})["requests"]
    assert [r["user_id"] for r in requests] == [str(b)]
    assert requests[0]["requested_at"].endswith("Z")
    assert call(service, "AcceptFollowRequest", {"user_id": a, "requester_id": b}) == {}
    for follower, followee in ((a, b), (b, c), (c, d), (b, d)):
        assert call(service, "Follow", {"follower_id": follower, "followee_id": followee}) == {
            "state": "FOLLOW_STATE_FOLLOWING"
        }
    assert call(service, "GetRelationships", {"actor_id": a, "target_ids": [b, c]}) == {
        "relationships": [{"target_id": str(b), "following": True, "followed_by": True}, {"target_id": str(c)}]
    }
    assert call(service, "ListMutualFollows", {"user_id": a}) == {"users": [{"user_id": str(b)}]}
    known = call(service, "ListKnownFollowers", {"viewer_id": a, "user_id": d})["followers"]
    assert [f["user_id"] for f in known] == [str(b)]
    assert call(service, "SuggestFollows", {"user_id": a, "limit": 5}) == {
        "suggestions": [
            {"user_id": str(c), "score": 1, "mutual_count": 1},
            {"user_id": str(d), "score": 1, "mutual_count": 1},
        ]
    }
    assert call(service, "Block", {"blocker_id": a, "blocked_id": b}) == {}
    blocked = grpcurl(service, f"{SERVICE}/Follow", data={"follower_id": b, "followee_id": a})
    assert blocked.returncode != 0
    assert "Code: FailedPrecondition" in blocked.stderr
    assert '"reason":"BLOCKED"' in blocked.stderr
    assert call(service, "Unblock", {"blocker_id": a, "blocked_id": b}) == {}
    assert call(service, "RemoveFollower", {"user_id": d, "follower_id": c}) == {}
    assert call(service, "IsFollowing", {"follower_id": c, "followee_id": d}) == {}
    mute = {"muter_id": b, "muted_id": c, "duration": "3600s", "notifications": True}
    assert call(service, "Mute", mute) == {}
    assert call(service, "GetRelationships", {"actor_id": b, "target_ids": [c]}) == {
        "relationships": [{"target_id": str(c), "following": True, "muting": True, "muting_notifications": True}]
    }
    (listed,) = call(service, "ListMutes", {"user_id": b})["mutes"]
    assert (listed["user_id"], listed["notifications"]) == (str(c), True)
    assert listed["muted_at"].endswith("Z")
    assert listed["expires_at"].endswith("Z")
    negative = grpcurl(service, f"{SERVICE}/Mute", data={"muter_id": b, "muted_id": d, "duration": "-5s"})
    assert negative.returncode != 0
    assert "Code: InvalidArgument" in negative.stderr
    assert "Message: duration must not be negative" in negative.stderr
    assert '"reason":"INVALID_DURATION"' in negative.stderr
    assert call(service, "Unmute", {"muter_id": b, "muted_id": c}) == {}
    assert call(service, "ListMutes", {"user_id": b}) == {}
    assert call(service, "DeactivateAccount", {"user_id": d}) == {}
    wait_until(
        lambda: (
            call(service, "GetAccountState", {"user_id": d})
            == {"state": "ACCOUNT_STATE_DEACTIVATED", "edges_done": "1", "edges_total": "1"}
        ),
        timeout=30,
        what="the deactivation's job archived b's follow of d",
    )
    away = grpcurl(service, f"{SERVICE}/Follow", data={"follower_id": a, "followee_id": d})
    assert "Code: FailedPrecondition" in away.stderr
    assert f"Message: account {d} is deactivated" in away.stderr
    assert '"reason":"ACCOUNT_DEACTIVATED"' in away.stderr
    assert call(service, "ReactivateAccount", {"user_id": d}) == {}


# -- process lifecycle -----------------------------------------------------------------------


def test_grpcurl_with_bearer_tokens_and_a_sighup_reload(
    dynamodb_local: str, redis_node: ManagedProcess, tmp_path: Path
) -> None:
    """With SG_AUTH_TOKENS_FILE: grpcurl ``-H 'authorization: Bearer ...'`` is let in with its scopes,
    without it only reflection and health answer; SIGHUP to the process applies an edited file at
    once; the service's log never holds a token."""
    reader, writer = mint_token(), mint_token()
    callers = tmp_path / "callers.toml"
    callers.write_text(caller_entry("feed", ["read"], reader))
    env = service_env(
        dynamodb_local,
        f"redis://127.0.0.1:{redis_node.port}/0",
        f"127.0.0.1:{free_port()}",
        SG_AUTH_TOKENS_FILE=str(callers),
        SG_AUTH_RELOAD_SECONDS="3600",  # only the SIGHUP can apply the edit within this test
        SG_LOG_LEVEL="debug",
    )
    service = start_service(env, tmp_path / "serve.log")
    try:

        def as_caller(token: str | None, method: str, data: dict[str, object]) -> subprocess.CompletedProcess[str]:
            header = ["-H", f"authorization: Bearer {token}"] if token else []
            command = [grpcurl_binary(), "-plaintext", *header, "-d", json.dumps(data), service.address]
            return subprocess.run([*command, f"{SERVICE}/{method}"], capture_output=True, text=True, timeout=30)

        follow = {"follower_id": 1, "followee_id": 2}
        assert as_caller(reader, "GetCounts", {"user_id": 2}).returncode == 0
        denied = as_caller(reader, "Follow", follow)
        assert "PermissionDenied" in denied.stderr
        assert "lacks the 'write' scope" in denied.stderr
        assert "Unauthenticated" in as_caller(None, "GetCounts", {"user_id": 2}).stderr
        assert "Unauthenticated" in as_caller(writer, "Follow", follow).stderr
        listed = grpcurl(service, "list")
        assert listed.returncode == 0
        assert SERVICE in listed.stdout
        callers.write_text(caller_entry("feed", ["read"], reader) + "\n" + caller_entry("fanout", ["write"], writer))
        service.process.send_signal(signal.SIGHUP)
        wait_until(lambda: as_caller(writer, "Follow", follow).returncode == 0, timeout=20, what="SIGHUP reload")
        assert json.loads(as_caller(reader, "IsFollowing", follow).stdout) == {"following": True}
    finally:
        assert stop_service(service) == 0, service.log()
    log = service.log()
    assert '"caller": "fanout"' in log
    assert reader not in log
    assert writer not in log


def test_second_server_on_a_taken_port_fails_with_a_clear_error(service: Service) -> None:
    """Starting `serve` on the address another server holds exits non-zero and names the address."""
    result = socialgraph(service.env, "serve", timeout=60)
    assert result.returncode != 0
    assert service.address in result.stderr
    assert health_status(service.address) == health_pb2.HealthCheckResponse.SERVING  # the first one is unharmed


def test_create_tables_twice_succeeds_both_times(dynamodb_local: str) -> None:
    """`create-tables` is idempotent: the second run finds every table and still exits 0."""
    env = service_env(dynamodb_local, "", "127.0.0.1:0")
    prefix = env["SG_TABLE_PREFIX"]
    first = socialgraph(env, "create-tables")
    assert first.returncode == 0, first.stderr
    second = socialgraph(env, "create-tables")
    assert second.returncode == 0, second.stderr
    for table in ("followers", "following", "users", "stream_checkpoints"):
        assert f"{prefix}{table}" in first.stdout
        assert f"{prefix}{table}" not in second.stdout
    client = boto3.client("dynamodb", endpoint_url=dynamodb_local, region_name="us-east-1")
    try:
        names = set(client.list_tables(Limit=100, ExclusiveStartTableName=prefix)["TableNames"])
        followers = client.describe_table(TableName=f"{prefix}followers")["Table"]
    finally:
        client.close()
    assert {f"{prefix}{t}" for t in ("followers", "following", "users", "stream_checkpoints")} <= names
    assert followers["StreamSpecification"]["StreamEnabled"] is True


def seed_followers(env: dict[str, str], user_id: int, count: int) -> None:
    """Put ``count`` followers of ``user_id`` straight into the followers table (both item kinds)."""
    client = boto3.client("dynamodb", endpoint_url=env["SG_DYNAMODB_ENDPOINT"], region_name="us-east-1")
    table = f"{env['SG_TABLE_PREFIX']}followers"
    items = []
    for n in range(count):
        edge = Edge(user_id=100_000 + n, at_us=1_700_000_000_000_000 + n)
        common = {"pk": {"N": str(user_id)}, "other": {"N": str(edge.user_id)}, "at": {"N": str(edge.at_us)}}
        items += [{**common, "sk": {"S": f"E#{edge.user_id:020d}"}}, {**common, "sk": {"S": f"T#{edge.position}"}}]
    try:
        for start in range(0, len(items), 25):
            request: dict[str, Any] = {table: [{"PutRequest": {"Item": i}} for i in items[start : start + 25]]}
            while request:
                request = client.batch_write_item(RequestItems=request).get("UnprocessedItems") or {}
    finally:
        client.close()


@dataclass
class Outcome:
    started: float
    ended: float
    code: grpc.StatusCode
    entries: int
    details: str = ""


async def list_repeatedly(address: str, user_id: int, outcomes: list[Outcome]) -> None:
    """ListFollowers of a 1000-entry list, again and again, until a call fails."""
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.SocialGraphServiceStub(channel)
        while True:
            started = time.monotonic()
            try:
                reply = await stub.ListFollowers(pb.ListFollowersRequest(user_id=user_id, page_size=1000), timeout=30)
            except grpc.aio.AioRpcError as exc:
                outcomes.append(Outcome(started, time.monotonic(), exc.code(), 0, exc.details() or ""))
                return
            outcomes.append(Outcome(started, time.monotonic(), grpc.StatusCode.OK, len(reply.followers)))


async def test_sigterm_lets_in_flight_calls_finish_and_exits_zero(dynamodb_local: str, tmp_path: Path) -> None:
    """On SIGTERM the server finishes the calls it is serving, refuses new ones, and exits 0 within the grace period."""
    grace = 10.0
    env = service_env(
        dynamodb_local, "", f"127.0.0.1:{free_port()}", SG_SHUTDOWN_GRACE_SECONDS=str(grace)
    )  # no cache: every list is read from DynamoDB, so calls take a while
    service = start_service(env, tmp_path / "serve.log")
    try:
        seed_followers(env, 424_242, 1000)
        outcomes: list[Outcome] = []
        workers = [asyncio.create_task(list_repeatedly(service.address, 424_242, outcomes)) for _ in range(6)]

        async def flowing() -> int:
            assert not any(w.done() for w in workers), outcomes
            return len(outcomes)

        await eventually(flowing, lambda n: n >= 6, timeout=60, interval=0.01)  # calls are flowing
        terminated_at = time.monotonic()
        service.process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(asyncio.gather(*workers), timeout=grace + 20)
        code = await asyncio.to_thread(service.process.wait, grace + 10)
        exited_after = time.monotonic() - terminated_at
    finally:
        stop_service(service)
    assert code == 0, service.log()
    assert exited_after < grace + 5
    # Refused: UNAVAILABLE. A call that reached the server just as it stopped taking calls (not yet
    # handed to a handler) is CANCELLED by gRPC; a call that had been running for a while never is.
    # "Just": sent less than a second before, which on a loaded machine may still be on its way in
    # (a server that cancelled its running calls would leave none drained: checked below).
    just_sent = 1.0
    refused = [
        (o.code.name, round(o.started - terminated_at, 3), o.details)
        for o in outcomes
        if o.code != grpc.StatusCode.OK
        and not (o.code == grpc.StatusCode.UNAVAILABLE and o.ended >= terminated_at)
        and not (o.code == grpc.StatusCode.CANCELLED and o.started > terminated_at - just_sent)
    ]
    assert refused == []
    assert all(o.entries == 1000 for o in outcomes if o.code == grpc.StatusCode.OK)  # never a cut-off page
    drained = [o for o in outcomes if o.code == grpc.StatusCode.OK and o.started < terminated_at < o.ended]
    assert drained, "no call was in flight across the SIGTERM"
    assert health_status(service.address) is None  # nothing listens any more

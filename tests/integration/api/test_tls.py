"""TLS, mTLS and certificate rotation of the real server, seen by the Python client and grpcurl.

Each refused client is a fresh channel with a subchannel of its own, so every probe is a new TCP
connection and a new handshake (gRPC would otherwise share one connection among equal channels),
and it fails fast: a call that is not ``wait_for_ready`` gets UNAVAILABLE when the handshake fails.
grpcurl runs as a subprocess the event loop waits for, since the server runs in this very loop.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import grpc
import pytest
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc
from socialgraph_client import AsyncSocialGraphClient, FollowState, SocialGraphClient, SocialGraphError, TlsConfig
from structlog.testing import capture_logs

from graph_service.api.callers import caller_entry, mint_token
from graph_service.settings import Settings
from tests.support.certs import CA, install, issue, make_ca, write_atomically
from tests.support.grpcurl import grpcurl_binary
from tests.support.polling import eventually
from tests.support.runtimes import running_server

SERVICE = "socialgraph.v1.SocialGraphService"
OK = grpc.StatusCode.OK
REFUSED = grpc.StatusCode.UNAVAILABLE
ROTATION_TIMEOUT = 10.0


def target(port: int) -> str:
    return f"127.0.0.1:{port}"


def tls(ca: CA, client: tuple[Path, Path] | None = None, *, server_name: str | None = None) -> TlsConfig:
    """The client's TLS options: trust ``ca`` only; present ``client`` (cert, key) if given."""
    cert, key = (str(client[0]), str(client[1])) if client else (None, None)
    return TlsConfig(ca_file=str(ca.cert), cert_file=cert, key_file=key, server_name=server_name)


async def status(port: int, config: TlsConfig | None) -> grpc.StatusCode:
    """The code of one IsFollowing call on a new connection (TLS with ``config``; None: plaintext)."""
    options: list[tuple[str, object]] = [("grpc.use_local_subchannel_pool", 1)]
    if config is None:
        channel = grpc.aio.insecure_channel(target(port), options=options)
    else:
        if config.server_name:
            options.append(("grpc.ssl_target_name_override", config.server_name))
        channel = grpc.aio.secure_channel(target(port), config.credentials(), options=options)
    async with channel:
        try:
            await pb_grpc.SocialGraphServiceStub(channel).IsFollowing(
                pb.IsFollowingRequest(follower_id=1, followee_id=2), timeout=5
            )
        except grpc.aio.AioRpcError as error:
            return error.code()
    return OK


@dataclass(frozen=True)
class Grpcurl:
    code: int
    stdout: str
    stderr: str


async def grpcurl(port: int, *args: str, data: dict[str, object] | None = None, connect_timeout: float = 5) -> Grpcurl:
    """``grpcurl <args> [-d JSON] 127.0.0.1:PORT [method]`` (the last arg is the method or verb),
    awaited as a subprocess so the in-process server keeps serving meanwhile."""
    *flags, verb = args
    command = [grpcurl_binary(), "-connect-timeout", str(connect_timeout), "-max-time", "10", *flags]
    if data is not None:
        command += ["-d", json.dumps(data)]
    process = await asyncio.create_subprocess_exec(
        *command, target(port), verb, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=30)
    assert process.returncode is not None
    return Grpcurl(process.returncode, stdout.decode(), stderr.decode())


async def grpcurl_refused(port: int, *flags: str) -> bool:
    """Whether ``grpcurl <flags> list`` cannot connect. Under TLS 1.3 a refused client certificate
    shows only after the client's side of the handshake, and grpc-go then redials until its connect
    timeout, so that is short here: the accepted calls show the server answers well within it."""
    result = await grpcurl(port, *flags, "list", connect_timeout=1)
    return result.code != 0 and "Failed to dial" in result.stderr


def ca_flags(ca: CA, client: Sequence[Path] = ()) -> tuple[str, ...]:
    flags: tuple[str, ...] = ("-cacert", str(ca.cert))
    if client:
        flags += ("-cert", str(client[0]), "-key", str(client[1]))
    return flags


async def test_tls_serves_trusting_clients_and_refuses_plaintext_and_other_cas(
    settings: Settings, tmp_path: Path
) -> None:
    """With a certificate and key the server speaks TLS only: clients trusting its CA call it (Python
    client and grpcurl, reflection too); plaintext clients, other CAs and a wrong server name are refused."""
    ca, other = make_ca(tmp_path, "ca"), make_ca(tmp_path, "other")
    cert, key = issue(ca, tmp_path, "server", server=True)
    async with running_server(replace(settings, tls_cert_file=str(cert), tls_key_file=str(key))) as server:
        async with await AsyncSocialGraphClient.connect(target(server.port), tls=tls(ca)) as client:
            assert await client.follow(1, 2) == FollowState.FOLLOWING
            assert await client.is_following(1, 2) is True
            assert await client.is_following(2, 1) is False
        assert await status(server.port, tls(ca, server_name="localhost")) == OK  # the DNS name of the SAN
        assert await status(server.port, None) == REFUSED  # plaintext
        assert await status(server.port, tls(other)) == REFUSED
        assert await status(server.port, tls(ca, server_name="elsewhere.example")) == REFUSED  # not in the SAN

        followed = await grpcurl(
            server.port, *ca_flags(ca), f"{SERVICE}/Follow", data={"follower_id": 3, "followee_id": 4}
        )
        assert followed.code == 0, followed.stderr
        assert json.loads(followed.stdout) == {"state": "FOLLOW_STATE_FOLLOWING"}
        listed = await grpcurl(server.port, *ca_flags(ca), "list")
        assert listed.code == 0, listed.stderr
        assert SERVICE in listed.stdout.split()
        assert await grpcurl_refused(server.port, *ca_flags(other))
        async with await AsyncSocialGraphClient.connect(target(server.port), tls=tls(ca)) as client:
            assert await client.is_following(3, 4) is True  # grpcurl's follow is in the graph


async def test_mtls_requires_a_client_certificate_the_client_ca_signed(settings: Settings, tmp_path: Path) -> None:
    """With a client CA the server wants a client certificate that CA signed: none, or one of another
    CA, is refused, for the Python client and for grpcurl alike."""
    server_ca, client_ca, rogue_ca = (make_ca(tmp_path, n) for n in ("server-ca", "client-ca", "rogue-ca"))
    cert, key = issue(server_ca, tmp_path, "server", server=True)
    alice = issue(client_ca, tmp_path, "alice", server=False)
    mallory = issue(rogue_ca, tmp_path, "mallory", server=False)
    mtls = replace(settings, tls_cert_file=str(cert), tls_key_file=str(key), tls_client_ca_file=str(client_ca.cert))
    async with running_server(mtls) as server:
        async with await AsyncSocialGraphClient.connect(target(server.port), tls=tls(server_ca, alice)) as client:
            assert await client.follow(1, 2) == FollowState.FOLLOWING
            assert await client.is_following(1, 2) is True
        assert await status(server.port, tls(server_ca)) == REFUSED  # no client certificate
        assert await status(server.port, tls(server_ca, mallory)) == REFUSED  # signed by another CA
        assert await status(server.port, None) == REFUSED

        followed = await grpcurl(
            server.port, *ca_flags(server_ca, alice), f"{SERVICE}/Follow", data={"follower_id": 3, "followee_id": 4}
        )
        assert followed.code == 0, followed.stderr
        assert json.loads(followed.stdout) == {"state": "FOLLOW_STATE_FOLLOWING"}
        listed = await grpcurl(server.port, *ca_flags(server_ca, alice), "list")
        assert listed.code == 0, listed.stderr
        assert SERVICE in listed.stdout.split()
        assert await grpcurl_refused(server.port, *ca_flags(server_ca))  # no client certificate
        assert await grpcurl_refused(server.port, *ca_flags(server_ca, mallory))


async def test_server_certificate_rotates_without_restart_and_a_broken_one_is_ignored(
    settings: Settings, tmp_path: Path
) -> None:
    """Garbage written over the certificate leaves the old one serving new connections; a certificate
    of another CA swapped in is served to the next new connection, while open connections carry on."""
    ca1, ca2 = make_ca(tmp_path, "ca1"), make_ca(tmp_path, "ca2")
    live = tmp_path / "live"
    live.mkdir()
    cert, key = live / "tls.crt", live / "tls.key"
    first = issue(ca1, tmp_path, "server-a", server=True)
    second = issue(ca2, tmp_path, "server-b", server=True)
    install(first[0], cert)
    install(first[1], key)
    async with (
        running_server(replace(settings, tls_cert_file=str(cert), tls_key_file=str(key))) as server,
        await AsyncSocialGraphClient.connect(target(server.port), tls=tls(ca1)) as open_before,
    ):
        assert await open_before.follow(1, 2) == FollowState.FOLLOWING
        assert await status(server.port, tls(ca2)) == REFUSED

        with capture_logs() as logs:
            write_atomically(cert, b"-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n")
            assert await status(server.port, tls(ca1)) == OK  # this handshake read the garbage and kept A
        assert [e["event"] for e in logs if e["log_level"] == "error"] == ["tls_rotation_failed"]
        assert await status(server.port, tls(ca1)) == OK

        install(second[1], key)
        install(second[0], cert)
        await eventually(lambda: status(server.port, tls(ca2)), lambda code: code == OK, timeout=ROTATION_TIMEOUT)
        assert await status(server.port, tls(ca1)) == REFUSED  # new connections get B only
        assert await open_before.is_following(1, 2) is True  # the connection made with A carries on
        listed = await grpcurl(server.port, *ca_flags(ca2), "list")
        assert listed.code == 0, listed.stderr
        assert await grpcurl_refused(server.port, *ca_flags(ca1))


async def test_client_ca_rotates_without_restart_under_mtls(settings: Settings, tmp_path: Path) -> None:
    """Swapping the client CA file lets certificates of the new CA in on new connections: a bundle of
    both CAs accepts both, and once the old CA is dropped its certificates are refused."""
    server_ca, old_ca, new_ca = (make_ca(tmp_path, n) for n in ("server-ca", "old-client-ca", "new-client-ca"))
    cert, key = issue(server_ca, tmp_path, "server", server=True)
    old_client = issue(old_ca, tmp_path, "old-client", server=False)
    new_client = issue(new_ca, tmp_path, "new-client", server=False)
    client_ca = tmp_path / "client-ca.pem"
    install(old_ca.cert, client_ca)
    mtls = replace(settings, tls_cert_file=str(cert), tls_key_file=str(key), tls_client_ca_file=str(client_ca))
    async with running_server(mtls) as server:
        assert await status(server.port, tls(server_ca, old_client)) == OK
        assert await status(server.port, tls(server_ca, new_client)) == REFUSED

        write_atomically(client_ca, old_ca.cert.read_bytes() + new_ca.cert.read_bytes())
        await eventually(
            lambda: status(server.port, tls(server_ca, new_client)), lambda code: code == OK, timeout=ROTATION_TIMEOUT
        )
        assert await status(server.port, tls(server_ca, old_client)) == OK  # the bundle trusts both

        install(new_ca.cert, client_ca)
        await eventually(
            lambda: status(server.port, tls(server_ca, old_client)),
            lambda code: code == REFUSED,
            timeout=ROTATION_TIMEOUT,
        )
        async with await AsyncSocialGraphClient.connect(target(server.port), tls=tls(server_ca, new_client)) as client:
            assert await client.follow(5, 6) == FollowState.FOLLOWING


async def test_tokens_travel_as_call_credentials_over_tls(settings: Settings, tmp_path: Path) -> None:
    """With TLS and callers both on: the Python client's token goes as call credentials and is let
    in with its scope; grpcurl with ``-cacert`` and ``-H authorization`` likewise; no token is refused."""
    ca = make_ca(tmp_path, "ca")
    cert, key = issue(ca, tmp_path, "server", server=True)
    token = mint_token()
    callers = tmp_path / "callers.toml"
    callers.write_text(caller_entry("feed", ["read", "write"], token), encoding="utf-8")
    secured = replace(settings, tls_cert_file=str(cert), tls_key_file=str(key), auth_tokens_file=str(callers))
    async with running_server(secured) as server:
        async with await AsyncSocialGraphClient.connect(target(server.port), tls=tls(ca), token=token) as client:
            assert await client.follow(5, 6) == FollowState.FOLLOWING

        def blocking() -> bool:  # the blocking client: the same call credentials over TLS
            with SocialGraphClient.connect(target(server.port), tls=tls(ca), token=token) as sync_client:
                return sync_client.is_following(5, 6)

        assert await asyncio.to_thread(blocking) is True
        async with await AsyncSocialGraphClient.connect(target(server.port), tls=tls(ca)) as client:
            with pytest.raises(SocialGraphError) as refused:
                await client.is_following(5, 6)
            assert refused.value.code == grpc.StatusCode.UNAUTHENTICATED
        header = ("-H", f"authorization: Bearer {token}")
        reply = await grpcurl(
            server.port, *ca_flags(ca), *header, f"{SERVICE}/IsFollowing", data={"follower_id": 5, "followee_id": 6}
        )
        assert reply.code == 0, reply.stderr
        assert json.loads(reply.stdout) == {"following": True}

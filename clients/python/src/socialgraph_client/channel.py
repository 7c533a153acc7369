"""How a client's channel is opened: credentials, channel options (keepalive among them), and the
metadata and token every call carries."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from socialgraph_client._version import __version__
from socialgraph_client.errors import REQUEST_ID_KEY
from socialgraph_client.options import Metadata, normalize_metadata
from socialgraph_client.rpcs import Rpc
from socialgraph_client.tls import TlsConfig
from socialgraph_client.tokens import BearerToken, Token

__all__ = ["ChannelPlan", "bind", "not_ready", "plan_channel"]

DEFAULT_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("grpc.primary_user_agent", f"socialgraph-client-python/{__version__}"),
    # gRPC waits 1 s, then up to 120 s, between attempts to reach a server that went away; a
    # restarted replica is back within seconds, and the calls retried meanwhile need the channel
    # to try again soon, so the waits here run from 0.1 s to 2 s.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2000),
    # A long-lived channel sits idle between bursts; a connection that died meanwhile without a word
    # (a replica's host gone, a NAT or load balancer that dropped it, a replica stopped) would take
    # the next call with it until its deadline. A ping every 30 s, idle or not, unanswered within
    # 10 s, closes it and the channel reconnects. The server must accept pings this often without
    # calls (its grpc.keepalive_permit_without_calls and grpc.http2.min_ping_interval_without_data_ms),
    # or it answers GOAWAY too_many_pings.
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.http2.ping_timeout_ms", 10_000),  # what times a keepalive ping out in newer gRPC (default 60 s)
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),  # else an idle channel stops pinging after two
)


@dataclass(frozen=True, slots=True)
class ChannelPlan:
    target: str
    credentials: grpc.ChannelCredentials | None
    """None: plaintext."""
    options: list[tuple[str, Any]]
    metadata: tuple[tuple[str, str], ...]
    """Sent with every call (the client's metadata)."""
    token: BearerToken | None
    """The caller's token, read for each call."""


def plan_channel(
    target: str,
    *,
    token: Token | None,
    tls: TlsConfig | None,
    credentials: grpc.ChannelCredentials | None,
    metadata: Metadata | None,
    options: Sequence[tuple[str, Any]],
) -> ChannelPlan:
    """The channel's settings, each checked now (a bad one is a ``ValueError`` here rather than a
    failure of every call); see ``BearerToken`` for how the token travels."""
    if tls is not None and credentials is not None:
        raise ValueError("give tls or credentials, not both")
    merged = dict(DEFAULT_OPTIONS)
    if tls is not None:
        credentials = tls.credentials()
        if tls.server_name:
            merged["grpc.ssl_target_name_override"] = tls.server_name
    merged.update(dict(options))
    pairs = normalize_metadata(metadata)
    if any(key == REQUEST_ID_KEY for key, _ in pairs):
        raise ValueError(f"{REQUEST_ID_KEY} names one call: give it as a call's metadata, not the client's")
    bearer = None if token is None else BearerToken(token, secure=credentials is not None)
    return ChannelPlan(target, credentials, list(merged.items()), pairs, bearer)


def bind(channel: Any, rpc: Rpc[Any, Any]) -> Any:
    """The callable that sends ``rpc`` on ``channel`` (``grpc.Channel`` or ``grpc.aio.Channel``)."""
    return channel.unary_unary(
        rpc.path,
        request_serializer=rpc.request.SerializeToString,
        response_deserializer=rpc.response.FromString,
    )


def not_ready(plan: ChannelPlan, seconds: float, state: str = "") -> str:
    """The message of ``ConnectError``: where, how long, and over TLS what to check."""
    text = f"no server ready at {plan.target} within {seconds} s" + (f" (channel {state})" if state else "")
    if plan.credentials is not None:
        text += "; over TLS also check the CA, the server name and the client certificate"
    return text

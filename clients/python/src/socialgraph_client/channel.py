"""How a client's channel is opened: credentials, channel options and the metadata every call carries."""

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

__all__ = ["ChannelPlan", "bind", "not_ready", "plan_channel"]

DEFAULT_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("grpc.primary_user_agent", f"socialgraph-client-python/{__version__}"),
    # gRPC waits 1 s, then up to 120 s, between attempts to reach a server that went away; a
    # restarted replica is back within seconds, and the calls retried meanwhile need the channel
    # to try again soon, so the waits here run from 0.1 s to 2 s.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2000),
)


@dataclass(frozen=True, slots=True)
class ChannelPlan:
    target: str
    credentials: grpc.ChannelCredentials | None
    """None: plaintext."""
    options: list[tuple[str, Any]]
    metadata: tuple[tuple[str, str], ...]
    """Sent with every call (the client's metadata, and the token over plaintext)."""


def plan_channel(
    target: str,
    *,
    token: str | None,
    tls: TlsConfig | None,
    credentials: grpc.ChannelCredentials | None,
    metadata: Metadata | None,
    options: Sequence[tuple[str, Any]],
) -> ChannelPlan:
    """Over TLS the bearer token travels as call credentials, which gRPC sends only over a secure
    channel; over plaintext (the local stack, a trusted network) it is ``authorization`` metadata."""
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
    if token is not None:
        if not token:
            raise ValueError("token is empty")
        if credentials is None:
            pairs = (*pairs, ("authorization", f"Bearer {token}"))
        else:
            credentials = grpc.composite_channel_credentials(credentials, grpc.access_token_call_credentials(token))
    return ChannelPlan(target, credentials, list(merged.items()), pairs)


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

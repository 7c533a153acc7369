"""The server accepts the Python client's keepalive pings: else it ends an idle client's connection
with GOAWAY ``too_many_pings`` and the client's next call pays for a reconnect."""

from __future__ import annotations

from socialgraph_client.channel import DEFAULT_OPTIONS

from graph_service.api.server import KEEPALIVE


def test_the_server_accepts_pings_as_often_as_the_client_sends_them_idle_or_not() -> None:
    client = dict(DEFAULT_OPTIONS)
    server = dict(KEEPALIVE)
    assert client["grpc.keepalive_permit_without_calls"] == 1
    assert server["grpc.keepalive_permit_without_calls"] == 1
    # Room for the client's timer jitter: the server's floor well under the client's interval.
    assert server["grpc.http2.min_ping_interval_without_data_ms"] * 1.5 <= client["grpc.keepalive_time_ms"]

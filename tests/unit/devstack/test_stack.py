"""What ``socialgraph up`` hands its components, and what it tells the person who ran it."""

from __future__ import annotations

from pathlib import Path

import pytest
from socialgraph_devstack.settings import StackSettings
from socialgraph_devstack.stack import (
    COMPONENTS,
    _banner,
    _processes,
    _servers,
    component_environment,
    local_environment,
)

from graph_service.settings import Settings


def test_settings_given_to_up_reach_every_component(monkeypatch: pytest.MonkeyPatch) -> None:
    """Auth, TLS and limit variables in ``up``'s environment are passed through; only the local
    endpoints are set by ``up`` itself."""
    given = {
        "SG_AUTH_TOKENS_FILE": "/etc/sg/callers.toml",
        "SG_TLS_CERT_FILE": "/etc/sg/tls.pem",
        "SG_FOLLOW_RATE_LIMIT": "50",
        "SG_MAX_FOLLOWING": "100",
    }
    for name, value in given.items():
        monkeypatch.setenv(name, value)
    env = local_environment(8000, 6379, 9092)
    assert {name: env[name] for name in given} == given
    assert env["SG_DYNAMODB_ENDPOINT"] == "http://127.0.0.1:8000"


def test_the_banner_says_how_to_call_with_auth_and_tls() -> None:
    """With callers configured the banner shows the header to add; with TLS, the flag to use."""
    assert "authorization" not in _banner("127.0.0.1:50051", 8000, Settings())
    secured = Settings(auth_tokens_file="callers.toml", tls_cert_file="c.pem", tls_key_file="k.pem")
    banner = _banner("127.0.0.1:50051", 8000, secured)
    assert "-H 'authorization: Bearer <token>'" in banner
    assert "callers.toml" in banner
    assert "-cacert" in banner


def test_each_component_gets_its_metrics_port_from_the_base_port() -> None:
    """serve, counters, relay and fanout: the base port and the next three, over any address given."""
    env = {"SG_METRICS_ADDRESS": "0.0.0.0:1", "SG_LOG_LEVEL": "info"}
    addresses = [component_environment(env, c, 9500)["SG_METRICS_ADDRESS"] for c in COMPONENTS]
    assert COMPONENTS == ("serve", "counters", "relay", "fanout")
    assert addresses == ["127.0.0.1:9500", "127.0.0.1:9501", "127.0.0.1:9502", "127.0.0.1:9503"]
    assert component_environment(env, "relay", 9500)["SG_LOG_LEVEL"] == "info"
    assert env["SG_METRICS_ADDRESS"] == "0.0.0.0:1"  # the caller's environment is left as it was


def test_the_banner_lists_every_component_s_metrics_url() -> None:
    banner = _banner("127.0.0.1:50051", 8000, Settings(metrics_base_port=9600))
    for port, name in zip(range(9600, 9604), COMPONENTS, strict=True):
        assert f"{name}" in banner
        assert f"http://127.0.0.1:{port}/metrics" in banner
    assert "/healthz and /readyz" in banner


def test_a_taken_port_of_the_stack_is_found_before_anything_starts(tmp_path: Path) -> None:
    """Every port ``up`` would use is checked first, so a clash starts and stops nothing."""
    import socket

    from socialgraph_devstack.processes import free_port
    from socialgraph_devstack.settings import StackSettings
    from socialgraph_devstack.stack import _taken_ports

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        ports = [free_port() for _ in range(5)]
        stack = StackSettings(
            local_dir=tmp_path,
            dynamodb_local_port=ports[0],
            redis_port=ports[1],
            kafka_port=ports[2],
            broker_store_port=ports[4],
        )
        free = Settings(grpc_address=f"127.0.0.1:{ports[3]}", metrics_base_port=65_000)
        assert _taken_ports(free, stack) is None
        clash = Settings(grpc_address=f"127.0.0.1:{ports[3]}", metrics_base_port=taken - 1)
        assert _taken_ports(clash, stack) == f"port taken: {taken} for the metrics of counters (SG_METRICS_BASE_PORT)"


def test_the_banner_lists_every_process_with_its_pid() -> None:
    """So a person (or a test) can find the process to look at, or to kill, without pgrep."""
    pids = {"dynamodb-local": 101, "redis": 102, "kafka-broker": 103, "serve": 104, "fanout": 107}
    banner = _banner("127.0.0.1:50051", 8000, Settings(), pids=pids)
    for name, pid in pids.items():
        assert f"\n  {name:<15} pid {pid}\n" in banner
    assert "restarted" in banner


def test_up_runs_one_serving_process_whatever_the_environment_says() -> None:
    """``SG_SERVE_PROCESSES`` would put serve's workers on the consumers' metrics ports."""
    env = {"SG_SERVE_PROCESSES": "4"}
    assert component_environment(env, "serve", 9500)["SG_SERVE_PROCESSES"] == "1"
    assert component_environment(env, "fanout", 9500)["SG_SERVE_PROCESSES"] == "4"  # not its setting


def test_the_broker_is_stopped_after_every_process_and_before_its_store(tmp_path: Path) -> None:
    """``up`` stops in the reverse order of its starts (``Supervisor.stop_all``): the servers start
    first, the store before the broker, so the broker stops once nothing produces to it and its
    store once it has exited (issue 22)."""
    stack = StackSettings(tmp_path, 18000, 16379, 19092, 14568)
    local = Settings()
    servers = [component.name for component in _servers(stack, local)]
    processes = [component.name for component in _processes("127.0.0.1:50051", local, {}, tmp_path)]
    stop_order = list(reversed(servers + processes))
    assert stop_order.index("kafka-broker") > max(stop_order.index(name) for name in COMPONENTS)
    assert stop_order.index("broker-store") == stop_order.index("kafka-broker") + 1

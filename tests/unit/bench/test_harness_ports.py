"""The benchmarks' private stack runs beside a local dev stack: with every default port held, the
ports it plans and the environment its processes get name none of them."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from socialgraph_devstack.settings import VARIABLES

from bench.stack_env import CLUSTER_MASTERS, process_environment, stack_environment, stack_ports
from graph_service.entrypoints.metrics_http import DEFAULT_PORTS, metrics_address
from graph_service.settings import Settings


def default_ports() -> set[int]:
    """Every port the service, its consumers and ``socialgraph up`` take when nothing says otherwise."""
    defaults = Settings()
    ports = {
        port_of(defaults.grpc_address),
        *(port_of(server) for server in defaults.kafka_bootstrap_servers.split(",")),
        *(defaults.metrics_base_port + i for i in range(len(DEFAULT_PORTS))),
        *DEFAULT_PORTS.values(),
    }
    redis = urlsplit(defaults.redis_url).port
    assert redis is not None
    return ports | {redis} | {int(default) for name, (default, _) in VARIABLES.items() if name.endswith("_PORT")}


def port_of(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


DEFAULTS = default_ports()


@pytest.fixture
def defaults_held() -> Iterator[set[int]]:
    """The default ports, each listened on here unless something (a running dev stack) already does."""
    held = []
    for port in sorted(DEFAULTS):
        sock = socket.socket()
        try:
            sock.bind(("127.0.0.1", port))
            sock.listen(1)
        except OSError:
            sock.close()  # taken already: held all the same
            continue
        held.append(sock)
    yield DEFAULTS
    for sock in held:
        sock.close()


@pytest.fixture
def shell_pointing_at_the_dev_stack(monkeypatch: pytest.MonkeyPatch) -> None:
    """A caller's shell set up for ``socialgraph up``: the stack must not inherit where it points."""
    monkeypatch.setenv("SG_METRICS_ADDRESS", "127.0.0.1:9464")
    monkeypatch.setenv("SG_REDIS_URL", "redis://127.0.0.1:6379/0")
    monkeypatch.setenv("SG_TIMELINE_REDIS_URL", "redis://127.0.0.1:6379/0")
    monkeypatch.setenv("SG_KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")
    monkeypatch.setenv("SG_GRPC_ADDRESS", "[::]:50051")


@pytest.mark.usefixtures("shell_pointing_at_the_dev_stack")
@pytest.mark.parametrize("cluster", [False, True], ids=["single-redis", "cluster"])
def test_the_stack_names_no_default_port_while_the_defaults_are_held(defaults_held: set[int], cluster: bool) -> None:
    ports = stack_ports(cluster=cluster)
    planned = [ports.dynamodb, ports.grpc, ports.metrics, *ports.redis]
    assert len(ports.redis) == (CLUSTER_MASTERS if cluster else 1)
    assert len(set(planned)) == len(planned)
    assert not set(planned) & defaults_held

    env = stack_environment(ports)
    named = {
        int(port) for name, value in env.items() if name.startswith("SG_") for port in re.findall(r":(\d+)", value)
    }
    assert not named & defaults_held
    assert "SG_METRICS_ADDRESS" not in env

    serve = Settings.from_env(process_environment(env, ports.metrics))
    assert port_of(serve.grpc_address) == ports.grpc
    assert port_of(metrics_address(serve, "serve")) == ports.metrics
    assert urlsplit(serve.redis_url).port == ports.redis[0]
    assert urlsplit(serve.dynamodb_endpoint).port == ports.dynamodb
    assert (serve.redis_cluster, serve.timeline_redis_url) == (cluster, "")


def test_each_process_gets_metrics_of_its_own_unless_its_caller_named_them(defaults_held: set[int]) -> None:
    env = stack_environment(stack_ports(cluster=False))
    consumers = [Settings.from_env(process_environment(env)) for _ in DEFAULT_PORTS]
    chosen = [port_of(metrics_address(settings, name)) for settings, name in zip(consumers, DEFAULT_PORTS, strict=True)]
    assert len(set(chosen)) == len(chosen)
    assert not set(chosen) & defaults_held

    named = process_environment({**env, "SG_METRICS_ADDRESS": "127.0.0.1:12345"})
    assert named["SG_METRICS_ADDRESS"] == "127.0.0.1:12345"

"""Where a benchmark's private stack listens, and the environment its processes get.

Every port comes from ``free_port()``, never a default: a local dev stack (``socialgraph up``)
holds DynamoDB Local's 8000, Redis's 6379, gRPC's 50051 and the metrics ports 9464-9467, and a
benchmark must run beside it without failing or, worse, measuring it. Kept apart from the starting
of servers so that a unit test can check the plan with the default ports occupied.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass

from socialgraph_devstack.processes import free_port
from socialgraph_devstack.stack import local_environment

__all__ = [
    "CLUSTER_MASTERS",
    "StackPorts",
    "distinct_free_ports",
    "free_port_run",
    "process_environment",
    "stack_environment",
    "stack_ports",
]

CLUSTER_MASTERS = 3
"""Masters of the benchmarks' Redis Cluster (SPEC §8: "a 3-master Redis Cluster")."""

INHERITED_PLACES = (
    "SG_METRICS_ADDRESS",
    "SG_TIMELINE_REDIS_URL",
    "SG_TIMELINE_REDIS_CLUSTER",
    "SG_KAFKA_BOOTSTRAP_SERVERS",
)
"""Variables of the caller's shell that would point the stack's processes at another stack's
servers or ports (the dev stack's, say): dropped, so each falls back to this stack's own."""


@dataclass(frozen=True)
class StackPorts:
    """The ports of one private stack, each free when drawn and all different."""

    dynamodb: int
    """DynamoDB Local."""
    redis: tuple[int, ...]
    """The single Redis, or the masters of the cluster (the first is the clients' seed)."""
    grpc: int
    """The service's gRPC port."""
    metrics: int
    """The service's metrics, ``/healthz`` and ``/readyz``."""

    @property
    def cluster(self) -> bool:
        return len(self.redis) > 1

    @property
    def redis_url(self) -> str:
        return f"redis://127.0.0.1:{self.redis[0]}" + ("" if self.cluster else "/0")


def distinct_free_ports(count: int) -> list[int]:
    """``count`` ports from ``free_port()``, no two alike (each is free only until someone binds it,
    so two draws before either server starts could otherwise meet)."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port_run(count: int) -> int:
    """The first of ``count`` consecutive free ports: ``serve`` with ``SG_SERVE_PROCESSES=N`` puts
    worker ``i``'s metrics on the metrics port plus ``i``."""
    while True:
        first = free_port()
        if first + count <= 65_536 and all(_bindable(first + i) for i in range(1, count)):
            return first


def stack_ports(*, cluster: bool) -> StackPorts:
    """Fresh ports for a stack with a single Redis, or with a cluster of ``CLUSTER_MASTERS``."""
    ports = distinct_free_ports(3 + (CLUSTER_MASTERS if cluster else 1))
    dynamodb, grpc, metrics, *redis = ports
    return StackPorts(dynamodb=dynamodb, redis=tuple(redis), grpc=grpc, metrics=metrics)


def stack_environment(ports: StackPorts) -> dict[str, str]:
    """The environment shared by the stack's processes and the benchmark's own clients: this
    process's, with the local servers of ``ports`` and nothing pointing elsewhere. It names no
    metrics address: each process gets its own (``process_environment``)."""
    env = {
        name: value
        for name, value in local_environment(ports.dynamodb, ports.redis[0]).items()
        if name not in INHERITED_PLACES
    }
    env.update(
        SG_REDIS_URL=ports.redis_url,
        SG_REDIS_CLUSTER="true" if ports.cluster else "false",
        SG_GRPC_ADDRESS=f"127.0.0.1:{ports.grpc}",
        SG_LOG_LEVEL="warning",
        SG_TABLE_PREFIX="bench_",
    )
    return env


def process_environment(env: Mapping[str, str], metrics_port: int | None = None) -> dict[str, str]:
    """``env`` for one process of the stack: its metrics on ``metrics_port``, else on a fresh free
    port, unless ``env`` already names an address (a caller that reads that process's metrics)."""
    if "SG_METRICS_ADDRESS" in env and metrics_port is None:
        return dict(env)
    port = free_port() if metrics_port is None else metrics_port
    return {**env, "SG_METRICS_ADDRESS": f"127.0.0.1:{port}"}

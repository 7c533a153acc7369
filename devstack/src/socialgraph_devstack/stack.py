"""`socialgraph up`: the whole local stack in the foreground, supervised, stopped cleanly by Ctrl-C.

What runs is said here (the servers, the four processes, their settings and readiness); what
happens when one of them dies is ``supervisor.py``'s to say.
"""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from graph_service.dynamodb.provisioning import ensure_tables
from graph_service.events.kafka import ensure_topics
from graph_service.settings import Settings
from socialgraph_devstack.processes import (
    ManagedProcess,
    port_is_open,
    spawn,
    start_dynamodb_local,
    start_kafka_broker,
    start_object_store,
    start_redis,
)
from socialgraph_devstack.settings import StackSettings
from socialgraph_devstack.supervisor import Component, StackFailed, Supervisor

__all__ = [
    "COMPONENTS",
    "StackSettings",
    "component_environment",
    "local_environment",
    "metrics_urls",
    "run_stack",
]

COMPONENTS = ("serve", "counters", "relay", "fanout")
"""The processes ``up`` runs, in the order their metrics ports follow SG_METRICS_BASE_PORT."""

Ready = Callable[[ManagedProcess], bool]


def local_environment(dynamodb_port: int, redis_port: int, kafka_port: int | None = None) -> dict[str, str]:
    """Environment of the service and consumers when they run against the local servers."""
    env = dict(os.environ)
    env.setdefault("AWS_ACCESS_KEY_ID", "local")
    env.setdefault("AWS_SECRET_ACCESS_KEY", "local")
    env["SG_DYNAMODB_ENDPOINT"] = f"http://127.0.0.1:{dynamodb_port}"
    env["SG_REDIS_URL"] = f"redis://127.0.0.1:{redis_port}/0"
    if kafka_port is not None:
        env["SG_KAFKA_BOOTSTRAP_SERVERS"] = f"127.0.0.1:{kafka_port}"
    return env


def component_environment(env: dict[str, str], command: str, metrics_base_port: int) -> dict[str, str]:
    """``env`` plus the component's own metrics address: the base port plus its place in ``COMPONENTS``;
    ``serve`` runs as one process (its metrics port is the next component's plus its place, so
    ``SG_SERVE_PROCESSES`` from the environment would collide with the consumers')."""
    port = metrics_base_port + COMPONENTS.index(command)
    own = {"SG_SERVE_PROCESSES": "1"} if command == "serve" else {}
    return {**env, **own, "SG_METRICS_ADDRESS": f"127.0.0.1:{port}"}


def metrics_urls(metrics_base_port: int) -> dict[str, str]:
    """Where each component's metrics are (``/healthz`` and ``/readyz`` beside them)."""
    return {name: f"http://127.0.0.1:{metrics_base_port + i}/metrics" for i, name in enumerate(COMPONENTS)}


def _listening(run: ManagedProcess) -> bool:
    return port_is_open(run.port)


def _serving(target: str, *, tls: bool) -> bool:
    """The health service says SERVING; with TLS (whose CA this tool does not know) the port
    answers, which the service opens only once it is built."""
    port = int(target.rsplit(":", 1)[1])
    if tls or not port_is_open(port):
        return port_is_open(port)
    with grpc.insecure_channel(target) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=1)
        except grpc.RpcError:
            return False
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


def _banner(target: str, dynamodb_port: int, settings: Settings, *, pids: Mapping[str, int] | None = None) -> str:
    metrics = "\n".join(f"  {name:<9} {url}" for name, url in metrics_urls(settings.metrics_base_port).items())
    processes = "\n".join(f"  {name:<15} pid {pid}" for name, pid in (pids or {}).items())
    post_env = (
        f"SG_DYNAMODB_ENDPOINT=http://127.0.0.1:{dynamodb_port} AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local"
    )
    notes = ""
    if settings.auth_tokens_file:
        notes += (
            f"\nAuthentication is on (callers in {settings.auth_tokens_file}): add"
            " -H 'authorization: Bearer <token>' to the calls below (socialgraph token NAME mints one).\n"
        )
    if settings.tls_cert_file:
        notes += "\nTLS is on: replace -plaintext by -cacert <your CA> (and -cert/-key with mTLS).\n"
    return f"""{notes}
socialgraph is up. gRPC at {target} (reflection on). Try:

  grpcurl -plaintext {target} list
  grpcurl -plaintext -d '{{"follower_id": 1, "followee_id": 2}}' {target} socialgraph.v1.SocialGraphService/Follow
  grpcurl -plaintext -d '{{"follower_id": 1, "followee_id": 2}}' {target} socialgraph.v1.SocialGraphService/IsFollowing
  grpcurl -plaintext -d '{{"user_id": 2}}' {target} socialgraph.v1.SocialGraphService/ListFollowers
  grpcurl -plaintext -d '{{"user_id": 2}}' {target} socialgraph.v1.SocialGraphService/GetCounts

Post a tweet as user 2 and read user 1's home timeline (relay -> Kafka -> fanout -> Redis):

  {post_env} .venv/bin/socialgraph post --author 2 --text hello
  grpcurl -plaintext -d '{{"user_id": 1}}' {target} socialgraph.v1.TimelineService/GetHomeTimeline

Metrics (Prometheus text; /healthz and /readyz beside each):

{metrics}

Processes (one that dies is restarted after a backoff, with a line saying so):

{processes}

(grpcurl is in .venv/bin.) Ctrl-C stops everything.
"""


def _component(command: str, env: dict[str, str], logs: Path, base_port: int, ready: Ready) -> Component:
    """A `socialgraph <command>` child; its output goes to logs/<command>.log."""
    port = base_port + COMPONENTS.index(command)
    cmd = [sys.executable, "-m", "graph_service", command]
    run_env = component_environment(env, command, base_port)
    return Component(command, lambda: spawn(command, cmd, port, logs, env=run_env), ready, stop_timeout=15.0)


def _taken_ports(settings: Settings, stack: StackSettings) -> str | None:
    """Why the stack cannot start (a port of its own already taken), checked before anything starts."""
    wanted = {
        "DynamoDB Local (SG_DYNAMODB_LOCAL_PORT)": stack.dynamodb_local_port,
        "Redis (SG_REDIS_PORT)": stack.redis_port,
        "the Kafka broker (SG_KAFKA_PORT)": stack.kafka_port,
        "the broker's object store (SG_BROKER_STORE_PORT)": stack.broker_store_port,
        "the gRPC service (SG_GRPC_ADDRESS)": int(settings.grpc_address.rsplit(":", 1)[1]),
    }
    for offset, name in enumerate(COMPONENTS):
        wanted[f"the metrics of {name} (SG_METRICS_BASE_PORT)"] = settings.metrics_base_port + offset
    taken = [f"{port} for {what}" for what, port in wanted.items() if port_is_open(port)]
    return f"port taken: {', '.join(taken)}" if taken else None


def _tables(local: Settings) -> str:
    asyncio.run(ensure_tables(local))  # on disk: after a restart usually nothing to create
    return "tables checked"


def _topics(local: Settings) -> str:
    created = asyncio.run(ensure_topics(local))  # the broker keeps its topics (its store): usually none
    return f"topics created again: {', '.join(created)}" if created else "topics checked"


def _broker(stack: StackSettings, logs: Path) -> ManagedProcess:
    """The broker, once its object store answers (it would not start without it)."""
    deadline = time.monotonic() + 30
    while not port_is_open(stack.broker_store_port) and time.monotonic() < deadline:
        time.sleep(0.05)
    return start_kafka_broker(stack.kafka_port, logs, wait=False, store_port=stack.broker_store_port)


def _servers(stack: StackSettings, local: Settings) -> list[Component]:
    """DynamoDB Local (on disk), Redis, and the broker with its object store (on disk), restarted with
    their tables and topics."""
    logs, data = stack.local_dir / "logs", stack.local_dir / "data"
    return [
        Component(
            "dynamodb-local",
            lambda: start_dynamodb_local(stack.dynamodb_local_port, logs, data / "dynamodb", wait=False),
            _listening,
            after_restart=functools.partial(_tables, local),
        ),
        Component("redis", lambda: start_redis(stack.redis_port, logs, data / "redis", wait=False), _listening),
        Component(
            "broker-store",
            lambda: start_object_store(stack.broker_store_port, logs, data / "kafka", wait=False),
            _listening,
        ),
        Component(
            "kafka-broker",
            lambda: _broker(stack, logs),
            _listening,
            after_restart=functools.partial(_topics, local),
        ),
    ]


def _processes(target: str, local: Settings, env: dict[str, str], logs: Path) -> list[Component]:
    """The service (ready when its health says SERVING) and the three consumers (ready when their
    metrics answer, so the banner's URLs do)."""
    base_port, tls = local.metrics_base_port, bool(local.tls_cert_file)
    return [
        _component("serve", env, logs, base_port, lambda run: _listening(run) and _serving(target, tls=tls)),
        *(_component(c, env, logs, base_port, _listening) for c in COMPONENTS[1:]),
    ]


def run_stack(settings: Settings) -> int:
    stack = StackSettings.from_env()  # a bad port is a SettingsError: one line, exit 2
    logs = stack.local_dir / "logs"
    stop_requested = False

    def request_stop(signum: int, frame: object) -> None:
        nonlocal stop_requested
        stop_requested = True

    def stopping() -> bool:
        return stop_requested

    taken = _taken_ports(settings, stack)
    if taken is not None:  # before anything starts: nothing to stop, nothing half-started
        print(f"socialgraph up: {taken}", file=sys.stderr)
        return 2
    env = local_environment(stack.dynamodb_local_port, stack.redis_port, stack.kafka_port)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ.setdefault(name, env[name])  # DynamoDB Local takes any credentials
    local = Settings.from_env(env)
    target = f"127.0.0.1:{settings.grpc_address.rsplit(':', 1)[1]}"
    supervisor = Supervisor()
    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    try:
        for server in _servers(stack, local):  # side by side: DynamoDB Local's JVM starts while the others do
            supervisor.start(server)
        if not supervisor.wait_ready(stopping):
            return 0
        _tables(local)
        _topics(local)
        for process in _processes(target, local, env, logs):
            supervisor.start(process)
        if not supervisor.wait_ready(stopping):  # the banner's metrics URLs answer
            return 0
        print(_banner(target, stack.dynamodb_local_port, local, pids=supervisor.pids()), flush=True)
        print(f"logs: {logs}", flush=True)
        supervisor.watch(stopping)  # a process that dies is restarted, with a line on stderr
        return 0
    except StackFailed as exc:  # a first run that ended before it was ready: 2 configuration, 3 unreachable
        print(f"socialgraph up: {exc}; stopping", file=sys.stderr)
        return exc.code
    except RuntimeError as exc:  # a port taken meanwhile, a missing tool
        print(f"socialgraph up: {exc}", file=sys.stderr)
        return 2
    finally:
        print("stopping...", flush=True)
        supervisor.stop_all()  # the last started first: the consumers, the service, then the servers
        print("stopped.", flush=True)

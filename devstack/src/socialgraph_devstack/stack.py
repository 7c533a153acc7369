"""`socialgraph up`: the whole local stack in the foreground, stopped cleanly by Ctrl-C."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from graph_service.dynamodb.tables import ensure_tables
from graph_service.events.kafka import ensure_topics
from graph_service.settings import Settings
from socialgraph_devstack.processes import (
    ManagedProcess,
    port_is_open,
    start_dynamodb_local,
    start_kafka_broker,
    start_redis,
)
from socialgraph_devstack.settings import StackSettings

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
    """``env`` plus the component's own metrics address: the base port plus its place in ``COMPONENTS``."""
    port = metrics_base_port + COMPONENTS.index(command)
    return {**env, "SG_METRICS_ADDRESS": f"127.0.0.1:{port}"}


def metrics_urls(metrics_base_port: int) -> dict[str, str]:
    """Where each component's metrics are (``/healthz`` and ``/readyz`` beside them)."""
    return {name: f"http://127.0.0.1:{metrics_base_port + i}/metrics" for i, name in enumerate(COMPONENTS)}


def _wait_listening(name: str, port: int, process: subprocess.Popen[bytes], *, timeout: float = 60.0) -> None:
    """Until ``port`` on this machine accepts connections (the process opens it once it is built)."""
    deadline = time.monotonic() + timeout
    while not port_is_open(port):
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited with {process.returncode}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name} not listening on {port} after {timeout}s")
        time.sleep(0.2)


def _wait_healthy(target: str, process: subprocess.Popen[bytes], *, tls: bool, timeout: float = 60.0) -> None:
    """Until the health service says SERVING; with TLS (whose CA this tool does not know) until the
    port answers, which the service opens only once it is built."""
    deadline = time.monotonic() + timeout
    if tls:
        _wait_listening("serve", int(target.rsplit(":", 1)[1]), process, timeout=timeout)
        return
    with grpc.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the service exited with {process.returncode}")
            try:
                reply = stub.Check(health_pb2.HealthCheckRequest(), timeout=1)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"service at {target} not SERVING after {timeout}s")
            time.sleep(0.2)


def _banner(target: str, dynamodb_port: int, settings: Settings) -> str:
    metrics = "\n".join(f"  {name:<9} {url}" for name, url in metrics_urls(settings.metrics_base_port).items())
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

(grpcurl is in .venv/bin.) Ctrl-C stops everything.
"""


def _spawn_component(command: str, env: dict[str, str], logs: Path) -> subprocess.Popen[bytes]:
    """A `socialgraph <command>` child; its output goes to logs/<command>.log."""
    with (logs / f"{command}.log").open("ab") as log_file:
        return subprocess.Popen(
            [sys.executable, "-m", "graph_service", command], env=env, stdout=log_file, stderr=subprocess.STDOUT
        )


def _taken_ports(settings: Settings, stack: StackSettings) -> str | None:
    """Why the stack cannot start (a port of its own already taken), checked before anything starts."""
    wanted = {
        "DynamoDB Local (SG_DYNAMODB_LOCAL_PORT)": stack.dynamodb_local_port,
        "Redis (SG_REDIS_PORT)": stack.redis_port,
        "the Kafka broker (SG_KAFKA_PORT)": stack.kafka_port,
        "the gRPC service (SG_GRPC_ADDRESS)": int(settings.grpc_address.rsplit(":", 1)[1]),
    }
    for offset, name in enumerate(COMPONENTS):
        wanted[f"the metrics of {name} (SG_METRICS_BASE_PORT)"] = settings.metrics_base_port + offset
    taken = [f"{port} for {what}" for what, port in wanted.items() if port_is_open(port)]
    return f"port taken: {', '.join(taken)}" if taken else None


def run_stack(settings: Settings) -> int:
    stack = StackSettings.from_env()  # a bad port is a SettingsError: one line, exit 2
    base = stack.local_dir
    logs = base / "logs"
    dynamodb_port, redis_port, kafka_port = stack.dynamodb_local_port, stack.redis_port, stack.kafka_port
    started: list[ManagedProcess | subprocess.Popen[bytes]] = []
    stop_requested = False

    def request_stop(signum: int, frame: object) -> None:
        nonlocal stop_requested
        stop_requested = True

    taken = _taken_ports(settings, stack)
    if taken is not None:  # before anything starts: nothing to stop, nothing half-started
        print(f"socialgraph up: {taken}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    try:
        started.append(start_dynamodb_local(dynamodb_port, logs, base / "data" / "dynamodb"))
        started.append(start_redis(redis_port, logs, base / "data" / "redis"))
        started.append(start_kafka_broker(kafka_port, logs))
        env = local_environment(dynamodb_port, redis_port, kafka_port)
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            os.environ.setdefault(name, env[name])  # DynamoDB Local takes any credentials
        local = Settings.from_env(env)
        asyncio.run(ensure_tables(local))
        asyncio.run(ensure_topics(local))
        target = f"127.0.0.1:{settings.grpc_address.rsplit(':', 1)[1]}"
        base_port = local.metrics_base_port
        service = _spawn_component("serve", component_environment(env, "serve", base_port), logs)
        components = [
            service,
            *(_spawn_component(c, component_environment(env, c, base_port), logs) for c in COMPONENTS[1:]),
        ]
        started += components
        _wait_healthy(target, service, tls=bool(local.tls_cert_file))
        for offset, (name, component) in enumerate(zip(COMPONENTS, components, strict=True)):
            _wait_listening(name, base_port + offset, component)  # the banner's metrics URLs answer
        print(_banner(target, dynamodb_port, local), flush=True)
        print(f"logs: {logs}", flush=True)
        while not stop_requested:
            for process in started:
                proc = process.process if isinstance(process, ManagedProcess) else process
                if proc.poll() is not None:  # the stack ends with its code (2 configuration, 3 unreachable)
                    print(f"a component exited with {proc.returncode} ({proc.args!r}); stopping", file=sys.stderr)
                    return proc.returncode if proc.returncode > 0 else 1
            time.sleep(0.2)
        return 0
    except RuntimeError as exc:  # a taken port, a component that would not start
        print(f"socialgraph up: {exc}", file=sys.stderr)
        return 2
    finally:
        print("stopping...", flush=True)
        for process in reversed(started):
            if isinstance(process, ManagedProcess):
                process.stop()
            elif process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(15)
                except subprocess.TimeoutExpired:
                    process.kill()
        print("stopped.", flush=True)

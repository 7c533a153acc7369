"""The container's health check (the image's HEALTHCHECK; an ECS container health check can run it too).

It probes the socialgraph process of its container the way the orchestrators do: ``serve`` by the
gRPC health service (``grpc.health.v1.Health/Check`` for the whole server, on the port of
``SG_GRPC_ADDRESS``), ``counters``, ``relay`` and ``fanout`` by ``GET /healthz`` on their metrics
port (``SG_METRICS_ADDRESS``), which is answered by the event loop that does the work. A one-shot
command (``create-tables``, ``fsck``, ...) has nothing to probe and is healthy.

The command is found in the container's processes, so one HEALTHCHECK serves every command. It
can also be named: ``healthcheck.py serve``. Exit 0 means healthy and 1 unhealthy (the Docker
convention), with one line that says why.

``serve`` with TLS (``SG_TLS_CERT_FILE``) is probed through its metrics port's ``/readyz``, which
says whether the gRPC server is SERVING: this probe has no client certificate and no name to
check the server's certificate against.
"""

from __future__ import annotations

import http.client
import itertools
import os
import sys
from pathlib import Path

CONSUMERS = {"counters", "relay", "fanout"}
ONE_SHOT = {"create-tables", "create-topics", "post", "reconcile", "fsck", "import", "token"}
TIMEOUT_SECONDS = 3.0


def running_command() -> str | None:
    """The command of the container's ``socialgraph`` process (argv ``... socialgraph COMMAND``)."""
    commands = CONSUMERS | ONE_SHOT | {"serve"}
    pids = sorted(int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit())
    for pid in pids:
        if pid == os.getpid():
            continue
        try:
            argv = (Path("/proc") / str(pid) / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:  # gone since the listing
            continue
        for word, following in itertools.pairwise(argv):
            if Path(word).name == "socialgraph" and following in commands:
                return following
    return None


def local_target(address: str) -> tuple[str, int]:
    """Where to reach a server listening on ``address`` (host:port) from inside its container."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    if host in {"", "0.0.0.0"}:  # noqa: S104 - every IPv4 interface: loopback is one of them
        host = "127.0.0.1"
    elif host == "::":  # IPv6 (gRPC's takes IPv4 too, or only IPv4 where there is no IPv6): try both
        host = "localhost"
    return host, int(port)


def http_ok(address: str, path: str) -> str | None:
    """None when ``GET path`` on ``address`` answers 200, else why not."""
    host, port = local_target(address)
    connection = http.client.HTTPConnection(host, port, timeout=TIMEOUT_SECONDS)
    try:
        connection.request("GET", path)
        status = connection.getresponse().status
    except OSError as exc:
        return f"GET {path} on {host}:{port}: {exc}"
    finally:
        connection.close()
    return None if status == 200 else f"GET {path} on {host}:{port}: HTTP {status}"


def grpc_serving(address: str) -> str | None:
    """None when the gRPC health service on ``address`` says SERVING for the whole server."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    host, port = local_target(address)
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    with grpc.insecure_channel(target) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=TIMEOUT_SECONDS)
        except grpc.RpcError as exc:
            return f"grpc.health.v1.Health/Check on {target}: {exc.code().name}"
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    return None if status == "SERVING" else f"grpc.health.v1.Health/Check on {target}: {status}"


def probe(command: str | None) -> str | None:
    """None when the process running ``command`` is healthy, else why not."""
    if command is None or command in ONE_SHOT:
        return None
    from graph_service.entrypoints.metrics_http import metrics_address
    from graph_service.settings import Settings, SettingsError

    try:
        settings = Settings.from_env()
    except SettingsError as exc:  # the process itself refuses to start with it (exit 2)
        return f"bad configuration: {exc}"
    if command == "serve" and not settings.tls_cert_file:
        return grpc_serving(settings.grpc_address)
    path = "/readyz" if command == "serve" else "/healthz"
    return http_ok(metrics_address(settings, command), path)


def main(argv: list[str]) -> int:
    command = argv[0] if argv else running_command()
    problem = probe(command)
    if problem is not None:
        print(f"unhealthy: {problem}")
        return 1
    print(f"healthy: {command or 'no socialgraph process: nothing to probe'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

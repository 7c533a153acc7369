"""Cached reads driven by h2load (C HTTP/2 load generator) against the service, their floor and a
bare grpc.aio echo.

Run: .venv/bin/python -m bench.cached_reads_h2load [--seconds 4] [--processes 1,2] [--cluster]

The same h2load command (4 connections x 16 streams, one request body per RPC) runs against the
service, against ``bench.echo_server`` and against the echo server waiting for the near cache's
read fence before it answers (one round trip to Redis, shared by the reads waiting at that moment:
the floor of a strongly consistent read from memory), one after the other, for IsFollowing,
GetCounts and the first page of 50 of 200 followers. SPEC §8 asks the floor for at least 0.9 of the
echo and each read for at least 0.9 of its floor. Then the service runs with
``SG_SERVE_PROCESSES=N`` for each N given (none: ``--processes ""``), pinned to the first N cores,
h2load pinned to the last core (on a 2-core machine it shares one with a server), and each N's
IsFollowing rate is reported against N x the one-process rate. ``--cluster``: all of it on a
3-master Redis Cluster.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import grpc
from google.protobuf.message import Message
from socialgraph.v1 import social_graph_pb2 as pb

from bench.cached_reads import FOLLOWEE, against_floor, fence_floor, seed
from bench.harness import echo_server, private_stack, stop_process, wait_port
from bench.stack_env import free_port_run, process_environment

SERVICE = "/socialgraph.v1.SocialGraphService"
CALLS: dict[str, tuple[str, Message]] = {
    "IsFollowing": ("IsFollowing", pb.IsFollowingRequest(follower_id=1000, followee_id=FOLLOWEE)),
    "GetCounts": ("GetCounts", pb.GetCountsRequest(user_id=FOLLOWEE)),
    "ListFollowers(first page)": ("ListFollowers", pb.ListFollowersRequest(user_id=FOLLOWEE)),
}


def grpc_frame(message: Message) -> bytes:
    body = message.SerializeToString()
    return b"\0" + struct.pack(">I", len(body)) + body


def h2load(
    port: int, method: str, body: Path, seconds: float, cpus: str | None = None, *, service: str = SERVICE
) -> float:
    """Requests per second that h2load sustained (every reply checked to be HTTP 200, and one more
    call of the same request after the run checked to succeed: ``answers``)."""
    command = [
        "h2load", "-c", "4", "-m", "16", "-D", str(max(1, round(seconds))), "--warm-up-time=1", "-d", str(body),
        "-H", "content-type: application/grpc", "-H", "te: trailers", f"http://127.0.0.1:{port}{service}/{method}",
    ]  # fmt: skip
    if cpus is not None:
        command = ["taskset", "-c", cpus, *command]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    rate = re.search(r"finished in [\d.]+m?s, ([\d.]+) req/s", out)
    codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", out)
    if rate is None or codes is None or int(codes[1]) == 0 or any(int(codes[i]) for i in (2, 3, 4)):
        raise RuntimeError(f"h2load: {out[-600:]}")
    answers(port, f"{service}/{method}", body)
    return float(rate[1])


def answers(port: int, path: str, body: Path) -> None:
    """One call of ``body`` (a gRPC frame) to ``path``, which must succeed: h2load counts HTTP
    statuses only, and a failed gRPC call is an HTTP 200 whose trailers carry the error, so a server
    answering every call with an error would otherwise be measured as if it served them."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary(path, request_serializer=bytes, response_deserializer=bytes)
        try:
            call(body.read_bytes()[5:], timeout=10)  # the message, without the frame's 5-byte header
        except grpc.RpcError as exc:
            raise RuntimeError(f"{path} on port {port} answers {exc.code()}: {exc.details()}") from exc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=4)
    parser.add_argument("--processes", default="1,2", help="SG_SERVE_PROCESSES values to report (none: empty)")
    parser.add_argument("--cluster", action="store_true", help="on a 3-master Redis Cluster")
    args = parser.parse_args()
    if shutil.which("h2load") is None:
        raise SystemExit("h2load is missing: apt-get install -y nghttp2-client (bench/run_all does)")
    cores = os.cpu_count() or 1
    report: dict[str, object] = {
        "benchmark": "cached_reads_h2load",
        "cluster": args.cluster,
        "connections": 4,
        "streams": 16,
    }
    with private_stack(cluster=args.cluster) as stack, tempfile.TemporaryDirectory() as tmp:
        asyncio.run(seed(stack.grpc_target, 200))
        bodies = {}
        for name, (method, message) in CALLS.items():
            bodies[name] = Path(tmp) / f"{method}.bin"
            bodies[name].write_bytes(grpc_frame(message))
        results = {}
        with echo_server(stack, Path(tmp)) as echo_port, echo_server(stack, Path(tmp), fenced=True) as fenced_port:
            for name, (method, _) in CALLS.items():
                service = h2load(stack.ports.grpc, method, bodies[name], args.seconds)
                baseline = h2load(echo_port, method, bodies[name], args.seconds)
                floor = h2load(fenced_port, method, bodies[name], args.seconds)
                results[name] = against_floor(service, floor, baseline)
        report["results"] = results
        fenced = results["IsFollowing"]
        report["echo_with_fence"] = fence_floor(fenced["floor_rps"], fenced["echo_rps"])
        scaling = {
            n: processes_rate(stack.env, n, cores, bodies["IsFollowing"], args.seconds, Path(tmp))
            for n in (int(value) for value in args.processes.split(",") if value)
        }
    one = scaling.get(1)
    report["serve_processes"] = {
        str(n): {"is_following_rps": round(rate), "ratio_to_n_x_one": round(rate / (n * one), 3) if one else None}
        for n, rate in scaling.items()
    }
    print(json.dumps(report, indent=2))


def processes_rate(env: dict[str, str], n: int, cores: int, body: Path, seconds: float, tmp: Path) -> float:
    """IsFollowing req/s of ``serve`` with ``SG_SERVE_PROCESSES=n`` on cores 0..n-1, h2load on the last.
    Worker ``i`` serves its metrics on the metrics port plus ``i``: the gRPC port and those ``n``
    are a run of free ports."""
    port = free_port_run(n + 1)
    metrics = port + 1
    run_env = process_environment(
        {**env, "SG_GRPC_ADDRESS": f"127.0.0.1:{port}", "SG_SERVE_PROCESSES": str(n)}, metrics
    )
    cpus = ",".join(str(i % cores) for i in range(n))
    process = subprocess.Popen(
        ["taskset", "-c", cpus, sys.executable, "-m", "graph_service", "serve"],
        env=run_env,
        stdout=(tmp / f"serve-{n}.log").open("ab"),
        stderr=subprocess.STDOUT,
    )
    try:
        wait_port(port, 60.0, process)
        h2load(port, "IsFollowing", body, 1.0, str(cores - 1))  # warm every worker's caches
        return h2load(port, "IsFollowing", body, seconds, str(cores - 1))
    finally:
        stop_process(process)


if __name__ == "__main__":
    main()

"""Cached reads driven by h2load (C HTTP/2 load generator) against the service and a bare grpc.aio echo.

Run: .venv/bin/python -m bench.cached_reads_h2load [--seconds 4] [--processes 1,2]

The same h2load command (4 connections x 16 streams, one request body per RPC) runs against the
service and against ``bench.echo_server``, one after the other, for IsFollowing, GetCounts and the
first page of 50 of 200 followers; the figure is the ratio (SPEC §8 asks >= 0.8). Then the service
runs with ``SG_SERVE_PROCESSES=N`` for each N given, pinned to the first N cores, h2load pinned to
the last core (on a 2-core machine it shares one with a server), and each N's IsFollowing rate is
reported against N x the one-process rate.

Also the floor of a strongly consistent read from memory: the echo server's ``IsFollowing`` that
first waits for the near cache's read fence (one round trip to Redis, shared by the reads waiting
at that moment), against the plain echo, both by the same h2load command.
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

from google.protobuf.message import Message
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph_devstack.processes import free_port

from bench.cached_reads import FOLLOWEE, seed
from bench.harness import echo_server, private_stack, stop_process, wait_port

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
    """Requests per second that h2load sustained (every reply checked to be HTTP 200)."""
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
    return float(rate[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=4)
    parser.add_argument("--processes", default="1,2", help="SG_SERVE_PROCESSES values to report")
    args = parser.parse_args()
    if shutil.which("h2load") is None:
        raise SystemExit("h2load is missing: apt-get install -y nghttp2-client (bench/run_all does)")
    os.environ.setdefault("SG_METRICS_ADDRESS", "127.0.0.1:0")
    cores = os.cpu_count() or 1
    report: dict[str, object] = {"benchmark": "cached_reads_h2load", "connections": 4, "streams": 16}
    with private_stack() as stack, tempfile.TemporaryDirectory() as tmp:
        asyncio.run(seed(stack.grpc_target, 200))
        bodies = {}
        for name, (method, message) in CALLS.items():
            bodies[name] = Path(tmp) / f"{method}.bin"
            bodies[name].write_bytes(grpc_frame(message))
        port = int(stack.grpc_target.rsplit(":", 1)[1])
        results = {}
        with echo_server(stack.env, Path(tmp)) as echo_port:
            for name, (method, _) in CALLS.items():
                service = h2load(port, method, bodies[name], args.seconds)
                baseline = h2load(echo_port, method, bodies[name], args.seconds)
                ratio = round(service / baseline, 3)
                results[name] = {"service_rps": round(service), "echo_rps": round(baseline), "ratio": ratio}
            with echo_server(stack.env, Path(tmp), fence_on=stack.settings.redis_url) as fenced_port:
                fenced = h2load(fenced_port, "IsFollowing", bodies["IsFollowing"], args.seconds)
            baseline = h2load(echo_port, "IsFollowing", bodies["IsFollowing"], args.seconds)
            report["echo_with_fence"] = {
                "fenced_echo_rps": round(fenced),
                "echo_rps": round(baseline),
                "ratio": round(fenced / baseline, 3),
            }
            scaling = {}
            for n in (int(value) for value in args.processes.split(",")):
                scaling[n] = processes_rate(stack.env, n, cores, bodies["IsFollowing"], args.seconds, Path(tmp))
    report["results"] = results
    one = scaling.get(1)
    report["serve_processes"] = {
        str(n): {"is_following_rps": round(rate), "ratio_to_n_x_one": round(rate / (n * one), 3) if one else None}
        for n, rate in scaling.items()
    }
    print(json.dumps(report, indent=2))


def processes_rate(env: dict[str, str], n: int, cores: int, body: Path, seconds: float, tmp: Path) -> float:
    """IsFollowing req/s of ``serve`` with ``SG_SERVE_PROCESSES=n`` on cores 0..n-1, h2load on the last."""
    port = free_port()
    run_env = {**env, "SG_GRPC_ADDRESS": f"127.0.0.1:{port}", "SG_SERVE_PROCESSES": str(n)}
    run_env["SG_METRICS_ADDRESS"] = "127.0.0.1:0"
    cpus = ",".join(str(i % cores) for i in range(n))
    process = subprocess.Popen(
        ["taskset", "-c", cpus, sys.executable, "-m", "graph_service", "serve"],
        env=run_env,
        stdout=(tmp / f"serve-{n}.log").open("ab"),
        stderr=subprocess.STDOUT,
    )
    try:
        wait_port(port)
        h2load(port, "IsFollowing", body, 1.0, str(cores - 1))  # warm every worker's caches
        return h2load(port, "IsFollowing", body, seconds, str(cores - 1))
    finally:
        stop_process(process)


if __name__ == "__main__":
    main()

"""``SG_SERVE_PROCESSES=2``: two serving processes on one port, each answering, each restarted
after a crash, all drained by one SIGTERM; a port someone else holds is refused."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import grpc
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc
from socialgraph_client import AsyncSocialGraphClient
from socialgraph_devstack.processes import port_is_open

from graph_service.settings import Settings
from tests.support.children import Child, serve_process
from tests.support.commands import REPO, command_environment
from tests.support.polling import eventually
from tests.support.scrape import scrape


async def handled(metrics_port: int) -> float:
    """IsFollowing calls this worker answered, from its /metrics (-1 while they do not answer)."""
    try:
        samples = (await scrape(metrics_port)).samples.get("grpc_server_handled_total", [])
    except OSError:
        return -1
    return sum(value for labels, value in samples if labels.get("grpc_method") == "IsFollowing")


def events(child: Child, name: str) -> list[dict[str, Any]]:
    found = []
    for line in child.log_path.read_text(errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if isinstance(entry, dict) and entry.get("event") == name:
                found.append(entry)
    return found


def worker_pids(child: Child) -> list[int]:
    """The workers' PIDs, in the order they were started (the first two, then each restart)."""
    started = [pid for entry in events(child, "serve_processes_started") for pid in entry["pids"]]
    return started + [entry["pid"] for entry in events(child, "serve_process_restarted")]


async def clients_on_worker(address: str, metrics_port: int) -> list[AsyncSocialGraphClient]:
    """Python clients (a connection each) whose connection the kernel gave to the worker serving
    ``metrics_port``; at least one (``eventually``: the kernel picks per connection)."""
    found: list[AsyncSocialGraphClient] = []
    others: list[AsyncSocialGraphClient] = []

    async def one_more() -> int:
        client = await AsyncSocialGraphClient.connect(address, options=[("grpc.use_local_subchannel_pool", 1)])
        before = await handled(metrics_port)
        await client.is_following(1, 2)
        (found if await handled(metrics_port) > before else others).append(client)
        return len(found)

    await eventually(one_more, lambda n: n >= 2, timeout=30)
    for client in others:
        await client.close()
    return found


class CallsThrough:
    """Each client calling ``IsFollowing`` over and over until ``stop``: the errors, the slowest
    call, and how many calls began after ``killed()``."""

    def __init__(self, clients: list[AsyncSocialGraphClient]) -> None:
        self.errors: list[BaseException] = []
        self.slowest = 0.0
        self.after_kill = 0
        self._killed_at: float | None = None
        self._stop = asyncio.Event()
        self._clients = clients
        self._tasks = [asyncio.create_task(self._calls(c)) for c in clients]

    def killed(self) -> None:
        self._killed_at = time.monotonic()

    async def _calls(self, client: AsyncSocialGraphClient) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            try:
                await client.is_following(1, 2)
            except Exception as error:  # every error is a finding: the client was to retry it
                self.errors.append(error)
            self.slowest = max(self.slowest, time.monotonic() - began)
            self.after_kill += self._killed_at is not None and began > self._killed_at

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks)
        for client in self._clients:
            await client.close()


async def test_two_processes_share_the_port_restart_after_a_crash_and_stop_together(
    settings: Settings, tmp_path: Path
) -> None:
    # Metrics on port 0: each worker takes a free port and logs it (a fixed base port's neighbour
    # may be taken by another test's server).
    settings_env = {"SG_SERVE_PROCESSES": "2", "SG_LOG_LEVEL": "info", "SG_METRICS_ADDRESS": "127.0.0.1:0"}
    async with serve_process(settings, tmp_path, **settings_env) as parent:

        async def metrics_ports() -> dict[int, int]:
            """Each worker's metrics port, the newest start's."""
            return {
                e["worker"]: int(e["url"].rsplit(":", 1)[1].split("/")[0]) for e in events(parent, "metrics_serving")
            }

        ports = await eventually(metrics_ports, lambda found: set(found) == {0, 1})

        async def spread() -> tuple[float, float]:
            for _ in range(8):  # new connections: the kernel picks a worker per connection
                async with grpc.aio.insecure_channel(
                    parent.address, options=[("grpc.use_local_subchannel_pool", 1)]
                ) as ch:
                    # A connection the kernel handed to a worker's socket as it closed is refused:
                    # a client tries again, and so does this loop.
                    with contextlib.suppress(grpc.aio.AioRpcError):
                        await pb_grpc.SocialGraphServiceStub(ch).IsFollowing(
                            pb.IsFollowingRequest(follower_id=1, followee_id=2)
                        )
            return await handled(ports[0]), await handled(ports[1])

        counts = await eventually(spread, lambda both: min(both) > 0, timeout=30)
        assert all(count > 0 for count in counts)

        async def pids() -> list[int]:
            return worker_pids(parent)

        first = await eventually(pids, lambda found: len(found) == 2)
        callers = await clients_on_worker(parent.address, ports[1])
        calling = CallsThrough(callers)
        os.kill(first[1], signal.SIGKILL)
        calling.killed()
        now = await eventually(pids, lambda found: len(found) == 3, timeout=30)
        await calling.stop()
        # docs/operating.md: a caller of the Python client whose connection was on the killed worker
        # sees its call take longer (retried on a new connection, to the other worker), no error.
        assert calling.errors == []
        assert calling.after_kill >= len(callers)
        assert calling.slowest < 3.0  # well within a read's 5 s deadline; about 0.3-0.7 s on a quiet machine
        assert now[2] not in first
        (exited,) = events(parent, "serve_process_exited")
        assert (exited["worker"], exited["code"]) == (1, -signal.SIGKILL)

        ports = await eventually(metrics_ports, lambda found: found.get(1) not in (None, ports[1]), timeout=30)

        async def answers_again() -> float:
            await spread()
            return await handled(ports[1])

        await eventually(answers_again, lambda count: count > 0, timeout=30)  # a fresh worker, fresh counters
        assert parent.running()

        parent.send(signal.SIGTERM)
        assert await parent.exit_code(timeout=30) == 0, parent.log()
    assert not port_is_open(parent.port)

    async def gone() -> list[int]:
        return [pid for pid in now if Path(f"/proc/{pid}").exists()]  # noqa: ASYNC240 - procfs, instant

    await eventually(gone, lambda alive: not alive, timeout=10)


async def test_a_port_someone_else_holds_is_refused_before_any_worker_starts(settings: Settings) -> None:
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        env = command_environment(settings, SG_GRPC_ADDRESS=address, SG_SERVE_PROCESSES="2")
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "graph_service", "serve"],
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2, done.stderr
    assert f"cannot listen on {address}" in done.stderr
    assert "serve_processes_started" not in done.stdout + done.stderr

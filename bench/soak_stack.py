"""The soak's own stack: DynamoDB Local (in memory), redis-server, the broker and the four
``python -m graph_service`` children on free ports in a temp folder, so a running ``socialgraph up``
is never touched; and the soak's hands on it (kill -9 by PID and start again, Redis stopped and
started empty, the broker killed and started again followed by ``create-topics``, RSS of each)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families
from socialgraph_devstack.processes import (
    ManagedProcess,
    free_port,
    port_is_open,
    start_dynamodb_local,
    start_kafka_broker,
    start_redis,
)
from socialgraph_devstack.stack import local_environment

from bench.harness import http_get, start_process, stop_process, wait_port
from graph_service.settings import Settings

__all__ = ["COMPONENTS", "SERVERS", "Samples", "SoakStack", "soak_stack"]

COMPONENTS = ("serve", "counters", "relay", "fanout")
SERVERS = ("dynamodb-local", "redis", "broker")

Samples = list[tuple[dict[str, str], float]]
"""The samples of one metric: (labels, value)."""


@dataclass
class Child:
    """A ``python -m graph_service <name>`` child, started again on the same metrics port."""

    name: str
    env: dict[str, str]
    log: Path
    metrics_port: int
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0

    def start(self) -> None:
        self.process = start_process(["-m", "graph_service", self.name], self.env, self.log)
        self.starts += 1


@dataclass
class SoakStack:
    base: Path
    env: dict[str, str]
    settings: Settings
    grpc_target: str
    dynamo: ManagedProcess
    redis: ManagedProcess
    broker: ManagedProcess
    children: dict[str, Child] = field(default_factory=dict)
    restarts: dict[str, int] = field(default_factory=dict)
    down: set[str] = field(default_factory=set)
    """Processes the soak stopped (or saw exit) and has not started again: not watched meanwhile."""
    redis_started_at: float = 0.0
    """``time.monotonic()`` when Redis last began answering (it starts empty: timelines before it are gone)."""

    @property
    def logs(self) -> Path:
        return self.base / "logs"

    # --- the children

    def start_child(self, name: str, *, timeout: float = 60.0) -> None:
        """Started and watched again at once; returns when its metrics port answers, or when it
        exited (the watch reports that), or after ``timeout``."""
        self.respawn(name)
        process = self.children[name].process
        deadline = time.monotonic() + timeout
        while not self.listening(name) and process is not None and process.poll() is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name} not listening on {self.children[name].metrics_port} after {timeout}s")
            time.sleep(0.05)

    def respawn(self, name: str) -> None:
        """Start a child again without waiting for it (it may exit again)."""
        self.children[name].start()
        self.down.discard(name)

    def listening(self, name: str) -> bool:
        """The child's metrics port answers (it opens once the process is built)."""
        return port_is_open(self.children[name].metrics_port)

    def kill_child(self, name: str) -> None:
        """``kill -9`` by PID: no shutdown code runs."""
        process = self.children[name].process
        assert process is not None
        self.down.add(name)
        if process.poll() is None:  # not one that just exited on its own (its PID may be reused)
            os.kill(process.pid, signal.SIGKILL)
        process.wait()
        self.restarts[name] = self.restarts.get(name, 0) + 1

    # --- the servers

    def stop_redis(self) -> None:
        self.down.add("redis")
        self.redis.stop()
        self.restarts["redis"] = self.restarts.get("redis", 0) + 1

    def start_redis(self) -> None:
        """On the same port, empty (no persistence: the documented way to restart a cache)."""
        self.redis = start_redis(self.redis.port, self.logs, self.base / "redis")
        self.redis_started_at = time.monotonic()
        self.down.discard("redis")

    def kill_broker(self) -> None:
        self.down.add("broker")
        os.kill(self.broker.process.pid, signal.SIGKILL)
        self.broker.process.wait()
        self.restarts["broker"] = self.restarts.get("broker", 0) + 1

    def start_broker(self) -> None:
        """On the same port; the local broker keeps nothing, so the topics are made again as an operator would."""
        self.broker = start_kafka_broker(self.broker.port, self.logs)
        self.down.discard("broker")
        self.command("create-topics", timeout=60).check_returncode()

    def command(self, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
        """``python -m graph_service <args>`` (the ``socialgraph`` command) run to completion."""
        return subprocess.run(
            [sys.executable, "-m", "graph_service", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def stop_servers(self) -> None:
        for server in (self.broker, self.redis, self.dynamo):
            server.stop()

    # --- looking at it

    def exited(self) -> list[tuple[str, int, str]]:
        """Processes that ended without the soak stopping them: (name, exit code, the gist of the
        last line of its log). Each is then counted as down, so it is reported once."""
        found = []
        for name, (process, log) in self._processes().items():
            code = process.poll()
            if name not in self.down and code is not None:
                self.down.add(name)
                found.append((name, code, _last_words(log)))
        return found

    def _processes(self) -> dict[str, tuple[subprocess.Popen[bytes], Path]]:
        found = {name: (c.process, c.log) for name, c in self.children.items() if c.process is not None}
        for name, server in zip(SERVERS, (self.dynamo, self.redis, self.broker), strict=True):
            found[name] = (server.process, server.log_path)
        return found

    def pids(self) -> dict[str, int]:
        return {name: process.pid for name, (process, _) in self._processes().items()}

    def rss_mb(self) -> dict[str, float]:
        """Resident memory of each process (with its descendants), in MB."""
        return {name: round(_tree_rss_kb(pid) / 1024, 1) for name, pid in self.pids().items()}

    def metric(self, component: str, name: str) -> Samples | None:
        """The samples of metric ``name`` from ``component``'s /metrics (None if it does not answer)."""
        try:
            text = http_get(self.children[component].metrics_port, "/metrics")[1]
        except OSError:
            return None
        return [
            (dict(sample.labels), sample.value)
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == name
        ]

    def ready(self, component: str) -> bool:
        try:
            return http_get(self.children[component].metrics_port, "/readyz")[0] == 200
        except OSError:
            return False


def _last_words(log: Path) -> str:
    """The last line of a log; of a JSON line its event, and the last line of its traceback if any."""
    try:
        line = log.read_text(errors="replace").strip().rsplit("\n", 1)[-1]
    except OSError:
        return ""
    try:
        record = json.loads(line)
    except ValueError:
        return line[:300]
    if not isinstance(record, dict):
        return line[:300]
    last = str(record.get("exception", "")).strip().rsplit("\n", 1)[-1]
    return f"{record.get('event', '')}: {last}"[:300] if last else str(record.get("event", ""))[:300]


def _tree_rss_kb(pid: int) -> int:
    """VmRSS of ``pid`` and every process below it (0 for one that is gone)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                parents.setdefault(ppid, []).append(int(entry.name))
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        todo.extend(parents.get(current, []))
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total


@contextlib.contextmanager
def soak_stack(*, keep: bool = False) -> Iterator[SoakStack]:
    """Everything started on free ports in a temp folder (kept with ``keep``), stopped on exit."""
    base = Path(tempfile.mkdtemp(prefix="sg-soak-"))
    with contextlib.ExitStack() as cleanup:
        if not keep:
            cleanup.callback(_remove, base)
        logs = base / "logs"
        dynamo = start_dynamodb_local(free_port(), logs)
        cleanup.callback(dynamo.stop)
        redis = start_redis(free_port(), logs, base / "redis")
        cleanup.callback(redis.stop)
        broker = start_kafka_broker(free_port(), logs)
        cleanup.callback(broker.stop)
        grpc_port = free_port()
        env = local_environment(dynamo.port, redis.port, broker.port)
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):  # the soak posts tweets from this process
            os.environ.setdefault(name, env[name])
        env.update(SG_GRPC_ADDRESS=f"127.0.0.1:{grpc_port}", SG_LOG_LEVEL="warning", SG_TABLE_PREFIX="soak_")
        stack = SoakStack(base, env, Settings.from_env(env), f"127.0.0.1:{grpc_port}", dynamo, redis, broker)
        stack.redis_started_at = time.monotonic()
        cleanup.callback(stack.stop_servers)  # the instances running at the end (Redis and the broker restart)
        for args in (("create-tables",), ("create-topics",)):
            done = stack.command(*args, timeout=120)
            if done.returncode != 0:
                raise RuntimeError(f"{' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
        for name in COMPONENTS:
            port = free_port()
            child_env = {**env, "SG_METRICS_ADDRESS": f"127.0.0.1:{port}"}
            stack.children[name] = Child(name, child_env, logs / f"{name}.log", port)
            cleanup.callback(_stop_child, stack.children[name])
            stack.start_child(name)
        for name, code, last_words in stack.exited():
            raise RuntimeError(f"{name} exited {code} at start: {last_words}")
        wait_port(grpc_port)
        yield stack


def _stop_child(child: Child) -> None:
    if child.process is not None and child.process.poll() is None:
        stop_process(child.process)


def _remove(base: Path) -> None:
    shutil.rmtree(base, ignore_errors=True)

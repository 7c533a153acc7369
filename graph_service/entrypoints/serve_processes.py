"""``socialgraph serve`` with ``SG_SERVE_PROCESSES=N`` above 1: N serving processes on one port.

Python serves on one core per process; N processes listening on one port with SO_REUSEPORT let
the kernel spread connections among them. This parent only checks the port, starts the N
``serve --worker I`` processes and watches them:

- the port is checked first with a plain bind (no SO_REUSEPORT): taken by anyone, ``PortInUse``
  (exit 2) before any worker starts; only the workers turn SO_REUSEPORT on;
- worker ``I`` serves its metrics on the metrics port plus ``I`` (port 0 stays 0);
- SIGTERM/SIGINT go to every worker (each drains its calls as a single ``serve`` does), SIGHUP
  too (the callers file); the parent exits 0 once all have exited 0, else 1; the workers run in
  a session of their own, so only the parent hears a terminal's Ctrl-C (and a parent killed with
  SIGKILL leaves them running: stop them with SIGTERM);
- a worker that exits with 2 (a configuration error: restarting cannot help) stops the others,
  and the parent exits 2; a worker that exits otherwise (killed, a dependency unreachable, a bug)
  is started again after a jittered backoff (1 s doubling to 30 s, reset after a minute up), and
  each restart is logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import time
from dataclasses import dataclass, field

import structlog

from graph_service.domain.listening import PortInUse
from graph_service.domain.retry import Backoff, pause
from graph_service.entrypoints.exits import Exit
from graph_service.entrypoints.metrics_http import metrics_address
from graph_service.settings import Settings

__all__ = ["check_port_free", "run_processes", "worker_environment"]

log = structlog.get_logger(__name__)

STEADY_SECONDS = 60.0
"""A worker up this long has its restart backoff reset."""


def check_port_free(address: str) -> None:
    """``PortInUse`` if anything listens on ``address`` (bound without SO_REUSEPORT, so a listener
    of any kind, a worker of another ``serve`` included, makes it fail)."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC does: TIME_WAIT is no owner
        try:
            probe.bind((host or "::", int(port)))
            probe.listen(1)
        except OSError as exc:
            raise PortInUse(f"cannot listen on {address}: {exc.strerror or exc}") from exc


def worker_environment(settings: Settings, index: int, environ: dict[str, str]) -> dict[str, str]:
    """The environment of worker ``index``: one process each, metrics on their own port."""
    address = metrics_address(settings, "serve")  # SG_METRICS_ADDRESS, or serve's default port
    host, _, port = address.rpartition(":")
    return {
        **environ,
        "SG_SERVE_PROCESSES": "1",
        "SG_METRICS_ADDRESS": f"{host}:{int(port) + index}" if int(port) else address,
    }


@dataclass
class _Worker:
    index: int
    process: asyncio.subprocess.Process | None = None
    started: float = 0.0
    backoff: Backoff = field(default_factory=lambda: Backoff(1.0, 30.0))


async def run_processes(settings: Settings) -> int:
    """Run ``settings.serve_processes`` workers until SIGTERM/SIGINT; the exit code for ``serve``."""
    check_port_free(settings.grpc_address)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    workers = [_Worker(i) for i in range(settings.serve_processes)]

    def forward(sig: signal.Signals) -> None:
        if sig is not signal.SIGHUP:
            stop.set()
        for worker in workers:
            if worker.process is not None and worker.process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    worker.process.send_signal(sig)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, forward, sig)

    async def start(worker: _Worker) -> None:
        worker.process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "graph_service",
            "serve",
            "--worker",
            str(worker.index),
            env=worker_environment(settings, worker.index, dict(os.environ)),
            # A group of its own: Ctrl-C in a terminal signals the whole foreground group, and a
            # worker given that SIGINT and then the parent's forwarded one would take the second
            # as "stop now" and skip its drain. The parent alone hears the terminal.
            start_new_session=True,
        )
        worker.started = time.monotonic()

    async def watch(worker: _Worker) -> int:
        """The worker's last exit code once stopped; raises ``_StartFailed`` for a configuration error."""
        while True:
            assert worker.process is not None
            code = await worker.process.wait()
            if stop.is_set():
                return code
            if code == Exit.CONFIGURATION:
                raise _StartFailed(worker.index, code)
            ran = time.monotonic() - worker.started
            if ran > STEADY_SECONDS:
                worker.backoff.reset()
            delay = worker.backoff.next_delay()
            log.warning("serve_process_exited", worker=worker.index, code=code, ran_s=round(ran, 1), restart_in_s=delay)
            if await pause(delay, stop):
                return code
            await start(worker)
            log.info("serve_process_restarted", worker=worker.index, pid=worker.process.pid)

    for worker in workers:
        await start(worker)
    log.info("serve_processes_started", processes=len(workers), pids=[w.process.pid for w in workers if w.process])
    try:
        codes = await asyncio.gather(*(watch(worker) for worker in workers))
    except _StartFailed as failed:
        log.error("serve_process_misconfigured", worker=failed.index, code=failed.code)
        forward(signal.SIGTERM)
        await asyncio.gather(*(w.process.wait() for w in workers if w.process is not None))
        return failed.code if failed.code > 0 else 1
    return 0 if all(code == 0 for code in codes) else 1


class _StartFailed(Exception):
    def __init__(self, index: int, code: int) -> None:
        super().__init__(f"worker {index} exited with {code} (configuration)")
        self.index = index
        self.code = code

"""What ``socialgraph up`` does when one of its processes dies: restart it, as a process manager would.

One process that dies (a ``kill -9``, a crash, a server that ran out of memory) is started again
after a backoff with jitter, with a line saying what happened, while the rest of the stack keeps
running; the backoff grows while the process keeps dying and starts over once a run has stayed up
``stable_after`` seconds. A process whose very first run ends before it is ready stops the stack
instead: locally that is a configuration error (a taken port, a bad setting, exit 2) that no
restart mends, and the person who ran ``up`` needs its exit code, not an endless retry.

Not a thread and not asyncio: ``up`` calls ``poll()`` from its main loop, so a signal handler that
asks for the stop is seen between two polls and nothing is restarted once stopping. The clock is
injectable, so the policy is tested without waiting for it.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from graph_service.domain.retry import Backoff
from socialgraph_devstack.processes import ManagedProcess

__all__ = ["Component", "RestartPolicy", "StackFailed", "Supervisor", "describe_exit"]


@dataclass(frozen=True)
class RestartPolicy:
    base: float = 1.0
    """Seconds before the first restart (jittered down to half of it)."""
    cap: float = 30.0
    """The longest wait between two restarts of a process that keeps dying."""
    stable_after: float = 60.0
    """A run that stayed up this long was healthy: the next restart waits ``base`` again."""


@dataclass(frozen=True)
class Component:
    name: str
    start: Callable[[], ManagedProcess]
    """Spawns one run and returns at once; readiness is ``ready``'s to say."""
    ready: Callable[[ManagedProcess], bool]
    """Whether the run answers (a port that accepts, a health check that says SERVING)."""
    after_restart: Callable[[], str] | None = None
    """Done once a restarted run is ready (the broker's topics created again); returns what it did,
    for the log line. A failure is retried with the backoff."""
    stop_timeout: float = 10.0
    """Seconds between SIGTERM and SIGKILL when the stack stops."""


class StackFailed(Exception):
    """The stack cannot run: ``up`` stops everything and exits with ``code``."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def describe_exit(returncode: int) -> str:
    """``exited with 3`` or ``was killed by SIGKILL`` (Popen gives a signal as a negative code)."""
    if returncode >= 0:
        return f"exited with {returncode}"
    try:
        return f"was killed by {signal.Signals(-returncode).name}"
    except ValueError:
        return f"was killed by signal {-returncode}"


def _last_words(log_path: Path) -> str:
    """The one line our commands print on stderr when they refuse to start (their log lines are
    JSON, so a last line that is not is that line); empty otherwise."""
    try:
        lines = log_path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return f": {lines[-1]}" if lines and not lines[-1].startswith("{") else ""


def _say_on_stderr(line: str) -> None:
    print(f"socialgraph up: {line}", file=sys.stderr, flush=True)


@dataclass
class _Child:
    component: Component
    backoff: Backoff
    run: ManagedProcess | None = None
    started_at: float = 0.0
    ready: bool = False
    """The current run is ready (and ``after_restart`` done)."""
    ever_ready: bool = False
    restarts: int = 0
    due: float = 0.0
    """When the next start, or the next readiness check of a run not ready yet, may happen."""


@dataclass
class Supervisor:
    """The stack's processes, in the order they started (they stop in the reverse order)."""

    policy: RestartPolicy = field(default_factory=RestartPolicy)
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    say: Callable[[str], None] = _say_on_stderr
    _children: dict[str, _Child] = field(default_factory=dict)

    def start(self, component: Component) -> ManagedProcess:
        """The first run; raises what ``component.start`` raises (a port already taken)."""
        child = _Child(component, Backoff(self.policy.base, self.policy.cap))
        self._children[component.name] = child
        run = child.run = component.start()
        child.started_at = child.due = self.clock()
        return run

    def pids(self) -> dict[str, int]:
        return {name: c.run.process.pid for name, c in self._children.items() if c.run is not None}

    def restarts(self, name: str) -> int:
        return self._children[name].restarts

    def all_ready(self) -> bool:
        return all(c.ready for c in self._children.values())

    def poll(self) -> None:
        """One look at every process: note exits, restart the ones whose backoff is over, mark
        runs ready. Raises ``StackFailed`` for a first run that ended before it was ready."""
        for child in self._children.values():
            now = self.clock()
            if child.run is None:
                if now >= child.due:
                    self._restart(child, now)
                continue
            returncode = child.run.process.poll()
            if returncode is not None:
                self._exited(child, returncode, now)
            elif not child.ready and now >= child.due and child.component.ready(child.run):
                self._became_ready(child, now)

    def wait_ready(self, stopping: Callable[[], bool], *, timeout: float = 60.0, interval: float = 0.05) -> bool:
        """Poll until every process is ready (True) or a stop is asked (False)."""
        deadline = self.clock() + timeout
        while not stopping():
            self.poll()
            if self.all_ready():
                return True
            if self.clock() > deadline:
                late = ", ".join(name for name, c in self._children.items() if not c.ready)
                raise StackFailed(2, f"{late} not ready after {timeout:.0f} s; see the logs")
            self.sleep(interval)
        return False

    def watch(self, stopping: Callable[[], bool], *, interval: float = 0.2) -> None:
        """Poll until a stop is asked."""
        while not stopping():
            self.poll()
            self.sleep(interval)

    def stop_all(self) -> None:
        """Stop every running process, the last started first; nothing restarts afterwards."""
        for child in reversed(list(self._children.values())):
            run, child.run = child.run, None
            child.due = float("inf")
            if run is not None:
                run.stop(child.component.stop_timeout)

    def _exited(self, child: _Child, returncode: int, now: float) -> None:
        name, run = child.component.name, child.run
        assert run is not None
        if not child.ever_ready:  # only a first run can end before ever being ready
            code = returncode if returncode > 1 else 2  # ours: 2, 3 or 70; a server that would not start: 2
            why = _last_words(run.log_path)
            raise StackFailed(code, f"{name} {describe_exit(returncode)} at its start{why} (see {run.log_path})")
        uptime = now - child.started_at
        if uptime >= self.policy.stable_after:
            child.backoff.reset()
        delay = child.backoff.next_delay()
        child.restarts += 1
        child.run, child.ready, child.due = None, False, now + delay
        self.say(
            f"{name} (pid {run.process.pid}) {describe_exit(returncode)} after {uptime:.1f} s up;"
            f" restart {child.restarts} in {delay:.1f} s"
        )

    def _restart(self, child: _Child, now: float) -> None:
        try:
            child.run = child.component.start()
        except (RuntimeError, OSError) as exc:  # its port taken meanwhile, its binary gone
            delay = child.backoff.next_delay()
            child.due = now + delay
            self.say(f"{child.component.name} could not restart: {exc}; next try in {delay:.1f} s")
            return
        child.started_at = child.due = now

    def _became_ready(self, child: _Child, now: float) -> None:
        name, run = child.component.name, child.run
        assert run is not None
        note = ""
        if child.ever_ready and child.component.after_restart is not None:
            try:
                note = child.component.after_restart()
            except Exception as exc:  # whatever failed (the broker still starting), the next try may succeed
                delay = child.backoff.next_delay()
                child.due = now + delay
                self.say(f"{name} is back (pid {run.process.pid}) but {exc}; next try in {delay:.1f} s")
                return
        if child.ever_ready:
            self.say(f"{name} is back (pid {run.process.pid})" + (f"; {note}" if note else ""))
        child.ready = child.ever_ready = True

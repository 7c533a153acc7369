"""``socialgraph up``'s restart policy, on tiny ``python -c`` children and a clock the test moves."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from socialgraph_devstack.processes import ManagedProcess
from socialgraph_devstack.supervisor import Component, RestartPolicy, StackFailed, Supervisor, describe_exit

SLEEPER = "import time; time.sleep(60)"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class Harness:
    """A supervisor on a fake clock whose lines are kept, and the children it started."""

    def __init__(self, log_dir: Path) -> None:
        self.clock = Clock()
        self.lines: list[str] = []
        self.log_dir = log_dir
        self.stopped: list[str] = []
        self.supervisor = Supervisor(RestartPolicy(), clock=self.clock, sleep=self.clock.sleep, say=self.lines.append)
        self.spawned: list[ManagedProcess] = []

    def component(
        self,
        name: str,
        scripts: Callable[[], str] = lambda: SLEEPER,
        *,
        ready: Callable[[ManagedProcess], bool] = lambda run: True,
        after_restart: Callable[[], str] | None = None,
    ) -> Component:
        def start() -> ManagedProcess:
            log_path = self.log_dir / f"{name}.log"
            with log_path.open("ab") as log:
                process = subprocess.Popen([sys.executable, "-c", scripts()], stdout=log, stderr=subprocess.STDOUT)
            run = _Recorded(name, process, 0, log_path, stopped=self.stopped)
            self.spawned.append(run)
            return run

        return Component(name, start, ready, after_restart)

    def kill(self, name: str) -> int:
        pid = self.supervisor.pids()[name]
        run = next(r for r in self.spawned if r.process.pid == pid)
        run.process.send_signal(signal.SIGKILL)
        run.process.wait()
        return pid

    def delays(self) -> list[float]:
        return [float(m.group(1)) for line in self.lines if (m := re.search(r"restart \d+ in ([\d.]+) s", line))]


@dataclass
class _Recorded(ManagedProcess):
    """A run that notes when it is stopped, so the test sees the order."""

    stopped: list[str] = field(default_factory=list)

    def stop(self, timeout: float = 10.0) -> None:
        self.stopped.append(self.name)
        super().stop(timeout)


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    h = Harness(tmp_path)
    yield h
    for run in h.spawned:
        if run.process.poll() is None:
            run.process.kill()
            run.process.wait()


def test_a_process_that_dies_is_restarted_after_its_backoff_with_one_line(harness: Harness) -> None:
    """A kill -9 is told in one line (who, how, after how long, which restart, when); the new run
    starts once the jittered delay of 0.5-1 s is over and says it is back once ready."""
    sup = harness.supervisor
    sup.start(harness.component("fanout"))
    sup.poll()
    assert sup.all_ready()
    harness.clock.now += 12
    pid = harness.kill("fanout")
    sup.poll()
    assert harness.lines == [
        f"fanout (pid {pid}) was killed by SIGKILL after 12.0 s up; restart 1 in {harness.delays()[0]:.1f} s"
    ]
    assert 0.5 <= harness.delays()[0] <= 1.0
    assert "fanout" not in sup.pids()
    harness.clock.now += 0.49
    sup.poll()
    assert "fanout" not in sup.pids()
    harness.clock.now += 0.51
    sup.poll()
    new_pid = sup.pids()["fanout"]
    assert new_pid != pid
    sup.poll()
    assert harness.lines[-1] == f"fanout is back (pid {new_pid})"
    assert sup.all_ready()
    assert sup.restarts("fanout") == 1


def test_the_backoff_doubles_to_its_cap_and_starts_over_after_a_stable_run(harness: Harness) -> None:
    """1, 2, 4 ... s (each jittered down to half at most), never above 30 s; a run that stayed up
    60 s was healthy, so the next restart waits about 1 s again."""
    sup = harness.supervisor
    sup.start(harness.component("counters"))
    sup.poll()
    for _ in range(7):
        harness.kill("counters")
        sup.poll()
        harness.clock.now += 30
        sup.poll()  # restarted
        sup.poll()  # ready
    harness.clock.now += 60  # the last run stays up a minute
    harness.kill("counters")
    sup.poll()
    ceilings = [1, 2, 4, 8, 16, 30, 30, 1]
    assert len(harness.delays()) == len(ceilings)
    for delay, ceiling in zip(harness.delays(), ceilings, strict=True):
        assert ceiling / 2 <= delay <= ceiling
    assert sup.restarts("counters") == 8


@pytest.mark.parametrize(("code", "up_exits"), [(2, 2), (3, 3), (70, 70), (1, 2)])
def test_a_first_run_that_ends_before_it_is_ready_stops_the_stack(harness: Harness, code: int, up_exits: int) -> None:
    """A configuration error (2) at the start is not restarted forever: ``up`` exits with it; a
    server that would not start (a plain 1) counts as configuration too."""
    sup = harness.supervisor
    run = sup.start(harness.component("relay", lambda: f"raise SystemExit({code})", ready=lambda r: False))
    run.process.wait()
    with pytest.raises(StackFailed) as failed:
        sup.wait_ready(lambda: False)
    assert failed.value.code == up_exits
    assert str(failed.value) == f"relay exited with {code} at its start (see {run.log_path})"


def test_a_refusal_to_start_is_told_with_the_process_s_own_line(harness: Harness) -> None:
    """The last line of its log, when it is the one-line error of a command, not a JSON log line."""
    sup = harness.supervisor
    refuse = "import sys; print('socialgraph serve: bad configuration: SG_X', file=sys.stderr); sys.exit(2)"
    run = sup.start(harness.component("serve", lambda: refuse, ready=lambda r: False))
    run.process.wait()
    with pytest.raises(StackFailed) as failed:
        sup.poll()
    assert str(failed.value) == (
        f"serve exited with 2 at its start: socialgraph serve: bad configuration: SG_X (see {run.log_path})"
    )


def test_a_run_that_was_ready_once_is_restarted_whatever_its_code(harness: Harness) -> None:
    """Once a component has been up, its configuration is known good: a later run ending with 2
    (its port taken meanwhile) is restarted with the backoff, not the end of the stack."""
    scripts = iter([SLEEPER, "raise SystemExit(2)", SLEEPER])
    sup = harness.supervisor
    sup.start(harness.component("serve", lambda: next(scripts)))
    sup.poll()
    harness.kill("serve")
    sup.poll()
    harness.clock.now += 1
    sup.poll()
    harness.spawned[-1].process.wait()
    sup.poll()
    assert re.fullmatch(r"serve \(pid \d+\) exited with 2 after 0\.0 s up; restart 2 in [\d.]+ s", harness.lines[-1])
    harness.clock.now += 2
    sup.poll()
    sup.poll()
    assert sup.all_ready()


def test_after_restart_runs_once_a_restarted_run_is_ready_and_is_retried_until_it_succeeds(harness: Harness) -> None:
    """The broker's topics: not at the first run (``up`` makes them itself), then after each
    restart once the port answers; a failure is a line and another try after the backoff."""
    results: list[str | Exception] = [RuntimeError("cannot create topic"), "topics created again"]
    calls: list[str] = []

    def topics() -> str:
        calls.append("topics")
        result = results.pop(0)
        if isinstance(result, Exception):
            raise result
        return result

    sup = harness.supervisor
    sup.start(harness.component("kafka-broker", after_restart=topics))
    sup.poll()
    assert calls == []
    harness.kill("kafka-broker")
    sup.poll()
    harness.clock.now += 1
    sup.poll()  # restarted
    sup.poll()  # ready: the first try fails
    pid = sup.pids()["kafka-broker"]
    failed = rf"kafka-broker is back \(pid {pid}\) but cannot create topic; next try in [\d.]+ s"
    assert re.fullmatch(failed, harness.lines[-1])
    assert not sup.all_ready()
    harness.clock.now += 4
    sup.poll()
    assert harness.lines[-1] == f"kafka-broker is back (pid {pid}); topics created again"
    assert calls == ["topics", "topics"]
    assert sup.all_ready()


def test_a_restart_that_cannot_start_is_tried_again_later(harness: Harness) -> None:
    """A port taken meanwhile: one line, and the next try after a longer wait."""
    attempts = iter([SLEEPER, None, SLEEPER])

    def script() -> str:
        value = next(attempts)
        if value is None:
            raise RuntimeError("redis: port 6379 is already taken")
        return value

    sup = harness.supervisor
    sup.start(harness.component("redis", script))
    sup.poll()
    harness.kill("redis")
    sup.poll()
    harness.clock.now += 1
    sup.poll()
    taken = r"redis could not restart: redis: port 6379 is already taken; next try in ([\d.]+) s"
    line = re.fullmatch(taken, harness.lines[-1])
    assert line is not None
    assert 1 <= float(line.group(1)) <= 2  # the second wait of the backoff
    harness.clock.now += 2
    sup.poll()
    sup.poll()
    assert sup.all_ready()


def test_stop_goes_last_started_first_and_nothing_restarts_afterwards(harness: Harness) -> None:
    sup = harness.supervisor
    for name in ("dynamodb-local", "redis", "serve", "fanout"):
        sup.start(harness.component(name))
    sup.poll()
    sup.stop_all()
    assert harness.stopped == ["fanout", "serve", "redis", "dynamodb-local"]
    harness.clock.now += 3600
    sup.poll()
    assert sup.pids() == {}
    assert harness.lines == []
    assert all(run.process.poll() is not None for run in harness.spawned)


def test_waiting_for_readiness_ends_on_a_stop_or_a_deadline(harness: Harness) -> None:
    """A Ctrl-C during the start stops waiting (False); a process never ready is exit 2 after the timeout."""
    sup = harness.supervisor
    sup.start(harness.component("dynamodb-local", ready=lambda run: False))
    assert sup.wait_ready(lambda: True) is False
    with pytest.raises(StackFailed) as failed:
        sup.wait_ready(lambda: False, timeout=5)
    assert failed.value.code == 2
    assert str(failed.value) == "dynamodb-local not ready after 5 s; see the logs"


def test_an_exit_is_told_by_code_or_by_signal() -> None:
    assert describe_exit(3) == "exited with 3"
    assert describe_exit(-9) == "was killed by SIGKILL"
    assert describe_exit(-15) == "was killed by SIGTERM"

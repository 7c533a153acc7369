"""Metrics of one run of ``import``, ``fsck`` or ``reconcile`` (``--metrics-file PATH``), as a
Prometheus text file for node_exporter's textfile collector: the usual way for a job that ends
(a CronJob, a cron line) to leave its result where Prometheus scrapes.

The file is replaced atomically (written beside it, then renamed: the collector never reads half
a file) when the run starts, at most every ``every_seconds`` while it makes progress, and when it
ends. The series common to the three commands carry a ``command`` label, so one alert covers them
all (``time() - socialgraph_operator_last_success_timestamp_seconds > 2 * 86400``); the last
success is carried over from the file's earlier runs, so a failed run does not erase it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import structlog
from prometheus_client import CollectorRegistry, Gauge, write_to_textfile
from prometheus_client.parser import text_string_to_metric_families

from graph_service.telemetry.build_info import register_build_info

__all__ = ["FsckRunMetrics", "ImportRunMetrics", "ReconcileRunMetrics", "RunMetrics"]

log = structlog.get_logger(__name__)

LAST_SUCCESS = "socialgraph_operator_last_success_timestamp_seconds"


def _previous_success(path: Path, command: str) -> float:
    """The last success the file at ``path`` holds for ``command`` (0: none, or no readable file)."""
    try:
        text = path.read_text("utf-8")
    except OSError:
        return 0.0
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == LAST_SUCCESS and sample.labels.get("command") == command:
                    return float(sample.value)
    except ValueError:  # not a Prometheus text file: written over
        return 0.0
    return 0.0


class RunMetrics:
    """The series every command's run has; ``start``, ``progress`` and ``end`` write the file."""

    def __init__(
        self,
        command: str,
        path: Path,
        *,
        every_seconds: float = 5.0,
    ) -> None:
        self.path = path
        self.registry = CollectorRegistry(auto_describe=True)
        register_build_info(self.registry)  # which release wrote the file, as every process reports
        self._every = every_seconds
        self._written_at = -math.inf
        self._started = 0.0
        self._refresh: list[Callable[[], None]] = []
        self._write_failed = False

        def gauge(name: str, documentation: str) -> Gauge:
            return Gauge(name, documentation, ["command"], registry=self.registry).labels(command)

        self.started = gauge("socialgraph_operator_started_timestamp_seconds", "When the run started (Unix time).")
        self.duration = gauge("socialgraph_operator_duration_seconds", "How long the run has taken so far, or took.")
        self.running = gauge("socialgraph_operator_running", "1 while the run goes on, 0 once it has ended.")
        self.exit_code = gauge(
            "socialgraph_operator_exit_code",
            "The exit code of the run (-1 while it runs; 0 success, 1 problems found).",
        )
        self.last_success = gauge(LAST_SUCCESS, "When a run last ended with exit code 0 (Unix time; 0: never).")
        self.done = gauge(
            "socialgraph_operator_progress_done",
            "Work done so far: rows (import), items scanned or users (fsck), items scanned or users (reconcile).",
        )
        self.total = gauge("socialgraph_operator_progress_total", "The work expected, in the same units (0: unknown).")
        self.last_success.set(_previous_success(path, command))

    def refresh_with(self, refresh: Callable[[], None]) -> None:
        """Call ``refresh`` before each write (it sets the command's own series from the run's state)."""
        self._refresh.append(refresh)

    def start(self) -> None:
        """The run begins; ``OSError`` if the file cannot be written (before any work is done)."""
        self._started = time.time()
        self.started.set(self._started)
        self.running.set(1)
        self.exit_code.set(-1)
        self._write(strict=True)

    def progress(self, done: int, total: int | None) -> None:
        self.done.set(done)
        self.total.set(total or 0)
        if time.monotonic() - self._written_at >= self._every:
            self._write()

    def end(self, exit_code: int) -> None:
        self.running.set(0)
        self.exit_code.set(exit_code)
        if exit_code == 0:
            self.last_success.set(time.time())
        self._write()

    def _write(self, *, strict: bool = False) -> None:
        for refresh in self._refresh:
            refresh()
        self.duration.set(max(time.time() - self._started, 0.0))
        self._written_at = time.monotonic()
        try:
            write_to_textfile(str(self.path), self.registry)
        except OSError as exc:
            if strict:
                raise
            if not self._write_failed:  # the run goes on; one line, not one per write
                log.warning("metrics_file_not_written", path=str(self.path), error=str(exc))
            self._write_failed = True


class ImportRunMetrics(RunMetrics):
    def __init__(self, path: Path, *, every_seconds: float = 5.0) -> None:
        super().__init__("import", path, every_seconds=every_seconds)
        self.rows = Gauge(
            "socialgraph_import_rows",
            "Rows of the file settled so far (over every run of it), by outcome: read, written, already_present,"
            " rejected.",
            ["outcome"],
            registry=self.registry,
        )
        self.rejected = Gauge(
            "socialgraph_import_rejected_rows", "Rejected rows so far, by reason.", ["reason"], registry=self.registry
        )
        for outcome in ("read", "written", "already_present", "rejected"):
            self.rows.labels(outcome)

    def tally(self, *, read: int, written: int, already_present: int, rejected: Mapping[str, int]) -> None:
        self.rows.labels("read").set(read)
        self.rows.labels("written").set(written)
        self.rows.labels("already_present").set(already_present)
        self.rows.labels("rejected").set(sum(rejected.values()))
        for reason, count in rejected.items():
            self.rejected.labels(reason).set(count)


class FsckRunMetrics(RunMetrics):
    def __init__(self, path: Path, kinds: Iterable[str], *, every_seconds: float = 5.0) -> None:
        super().__init__("fsck", path, every_seconds=every_seconds)
        self.violations = Gauge(
            "socialgraph_fsck_violations", "Violations found so far, by kind.", ["kind"], registry=self.registry
        )
        for kind in kinds:
            self.violations.labels(kind)
        self.repaired = Gauge(
            "socialgraph_fsck_repaired", "Cache violations repaired (entry deleted).", registry=self.registry
        )
        self.unconfirmed = Gauge(
            "socialgraph_fsck_unconfirmed", "Suspicions that kept changing (not violations).", registry=self.registry
        )
        self.counters_checked = Gauge(
            "socialgraph_fsck_counters_checked",
            "0 when the counters were left unchecked (the counters consumer was behind), else 1.",
            registry=self.registry,
        )
        self.counters_checked.set(1)

    def found(self, by_kind: Mapping[str, int], *, repaired: int, unconfirmed: int, counters_checked: bool) -> None:
        for kind, count in by_kind.items():
            self.violations.labels(kind).set(count)
        self.repaired.set(repaired)
        self.unconfirmed.set(unconfirmed)
        self.counters_checked.set(int(counters_checked))


class ReconcileRunMetrics(RunMetrics):
    def __init__(self, path: Path, *, every_seconds: float = 5.0) -> None:
        super().__init__("reconcile", path, every_seconds=every_seconds)
        self.users = Gauge(
            "socialgraph_reconcile_users",
            "Users at the end of the run, by check (counters; outgoing: the following cap's count, with --all) and"
            " state (checked, drifted, fixed, busy).",
            ["check", "state"],
            registry=self.registry,
        )
        self.behind = Gauge(
            "socialgraph_reconcile_counters_consumer_behind_seconds",
            "How far behind the counters consumer was when the run checked nothing for it (0: caught up).",
            registry=self.registry,
        )

    def result(self, check: str, counts: Mapping[str, int]) -> None:
        for state, count in counts.items():
            self.users.labels(check, state).set(count)

"""Every line a process writes is one JSON object: our loggers, the standard library's and the
third-party ones (aiokafka, botocore, grpc, asyncio, warnings), and uncaught tracebacks, in the
main thread and in others. Run in a child process, since configuring logging is process-wide."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

SCRIPT = textwrap.dedent(
    """
    import logging, threading, warnings
    import structlog
    from graph_service.entrypoints.logging import configure_logging

    configure_logging("{level}")
    log = structlog.get_logger("graph_service.sample")
    structlog.contextvars.bind_contextvars(request_id="r-1", caller="feed")
    log.debug("ours_debug")
    log.info("ours_info", user_id=7)
    logging.getLogger("aiokafka.consumer.group_coordinator").warning("rebalance of %s", "fanout")
    logging.getLogger("aiokafka.conn").info("chatty, kept below warning")
    logging.getLogger("asyncio").debug("Using selector: EpollSelector")
    logging.getLogger("redis.asyncio.connection").debug("connecting")
    logging.getLogger("botocore.retryhandler").error("retries exhausted")
    logging.getLogger("grpc._cython.cygrpc").error("grpc trouble")
    warnings.warn("deprecated thing")
    try:
        1 / 0
    except ZeroDivisionError:
        log.exception("ours_failed")
        logging.getLogger("asyncio").error("Task exception was never retrieved", exc_info=True)
    thread = threading.Thread(target=lambda: 1 / 0, name="worker-1")
    thread.start()
    thread.join()
    raise RuntimeError("the end")
    """
)


def run(level: str) -> tuple[int, list[dict[str, Any]]]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(level=level)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout == ""
    return done.returncode, [json.loads(line) for line in done.stderr.splitlines()]


def test_every_line_is_json_with_level_logger_and_bound_context() -> None:
    code, lines = run("info")
    assert code == 1
    assert [(e["event"], e["level"], e["logger"]) for e in lines] == [
        ("ours_info", "info", "graph_service.sample"),
        ("rebalance of fanout", "warning", "aiokafka.consumer.group_coordinator"),
        ("retries exhausted", "error", "botocore.retryhandler"),
        ("grpc trouble", "error", "grpc._cython.cygrpc"),
        (lines[4]["event"], "warning", "py.warnings"),
        ("ours_failed", "error", "graph_service.sample"),
        ("Task exception was never retrieved", "error", "asyncio"),
        ("uncaught_exception", "critical", "uncaught"),
        ("uncaught_exception", "critical", "uncaught"),
    ]
    assert "UserWarning: deprecated thing" in lines[4]["event"]
    assert all(e["request_id"] == "r-1" and e["caller"] == "feed" for e in lines[:7])
    assert all(e["timestamp"].endswith("Z") for e in lines)
    assert lines[0]["user_id"] == 7
    for entry in (lines[5], lines[6], lines[7]):
        assert entry["exception"].startswith("Traceback (most recent call last):")
        assert entry["exception"].endswith("ZeroDivisionError: division by zero")
    assert lines[7]["thread_name"] == "worker-1"
    assert lines[8]["exception"].endswith("RuntimeError: the end")


def test_the_level_filters_ours_and_the_libraries_stay_at_warning_or_above() -> None:
    _, at_debug = run("debug")
    events = [e["event"] for e in at_debug]
    assert events[:2] == ["ours_debug", "ours_info"]
    assert not {"chatty, kept below warning", "Using selector: EpollSelector", "connecting"} & set(events)
    _, at_error = run("ERROR")
    assert [e["level"] for e in at_error] == ["error", "error", "error", "error", "critical", "critical"]


def test_a_library_that_logs_in_a_loop_is_held_to_one_line_per_interval() -> None:
    """aiokafka waiting for a missing topic logs an error every 100 ms; the log gets one line per
    interval for that message, the next carrying how many were held back. Our own lines all pass."""
    import logging

    from graph_service.entrypoints.logging import LibraryRepeats

    limiter = LibraryRepeats(interval=10.0)

    def record(name: str, msg: str, at: float, *args: object) -> logging.LogRecord:
        made = logging.LogRecord(name, logging.ERROR, __file__, 1, msg, args, None)
        made.created = at
        return made

    noisy = [record("aiokafka.cluster", "Topic %s not found in cluster metadata", 100 + i / 10, "t") for i in range(50)]
    assert [limiter.filter(r) for r in noisy].count(True) == 1
    other = record("aiokafka.cluster", "another message", 101)
    assert limiter.filter(other)
    later = record("aiokafka.cluster", "Topic %s not found in cluster metadata", 111, "t")
    assert limiter.filter(later)
    assert vars(later)["repeated"] == 49  # set by the limiter, not a LogRecord attribute
    ours = [record("relay.relay", "same", 100 + i / 10) for i in range(5)]
    assert all(limiter.filter(r) for r in ours)

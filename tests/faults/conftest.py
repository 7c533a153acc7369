"""The fault runs of issue 12's table as tests: real servers and real processes, killed, paused
and stopped by PID, or cut off (``tests/support/children.py``, ``tests/support/own_dynamodb.py``,
``tests/support/tcp_cut.py``).

Each test records the figures the table reports (seconds until counts are exact, until owed
invalidations are delivered, until the process exits) with the ``figures`` fixture; the run
prints them at its end under "fault figures".
"""

from __future__ import annotations

import pytest

from tests.support.figures import PREFIX
from tests.support.own_dynamodb import own_dynamodb

__all__ = ["own_dynamodb"]

_FIGURES: list[tuple[str, str, object]] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call":
        _FIGURES.extend(
            (report.nodeid, name.removeprefix(PREFIX), value)
            for name, value in report.user_properties
            if name.startswith(PREFIX)
        )


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _FIGURES:
        terminalreporter.section("fault figures")
        for nodeid, name, value in _FIGURES:
            terminalreporter.write_line(f"{value:>8}  {name:<36} {nodeid}")

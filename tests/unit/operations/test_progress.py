"""The progress of an operator run off a terminal: JSON ``progress`` lines with rate and ETA, a
``progress_done`` line when the work ends, none when a failure cuts it short."""

from __future__ import annotations

import io

import pytest

from graph_service.operations.progress import meter
from tests.support.logs import capture_every_level


def test_off_a_terminal_progress_is_logged_with_rate_and_eta_and_a_last_line() -> None:
    with capture_every_level() as logs, meter("import", 10, stream=io.StringIO(), every_seconds=0.0) as progress:
        progress.advance(4)
        progress.total(20)
        progress.advance(1)
    lines = [(e["event"], e["task"], e["done"], e.get("total")) for e in logs]
    assert lines == [("progress", "import", 4, 10), ("progress", "import", 5, 20), ("progress_done", "import", 5, 20)]
    assert all(e["rate_per_second"] > 0 and "eta_seconds" in e for e in logs)


def test_nothing_says_done_when_the_work_failed() -> None:
    def run() -> None:
        with meter("fsck", None, stream=io.StringIO(), every_seconds=3600.0) as progress:
            progress.advance(3)
            raise RuntimeError("DynamoDB went away")

    with capture_every_level() as logs, pytest.raises(RuntimeError, match="went away"):
        run()
    assert logs == []


def test_on_a_terminal_it_draws_a_bar_with_the_count() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    screen = Terminal()
    with meter("import", 8, stream=screen) as progress:
        progress.advance(8)
    assert "import" in screen.getvalue()
    assert "8/8" in screen.getvalue()


def test_an_estimated_total_grows_with_the_work_and_ends_at_what_was_done() -> None:
    """fsck's and reconcile's totals are DynamoDB's item counts, taken before the scan: writes made
    since (the counters consumer's) once showed 85,564 done of 85,547. Done never passes the total."""
    with capture_every_level() as logs:
        with meter("fsck", 10, estimated=True, stream=io.StringIO(), every_seconds=0.0) as progress:
            progress.advance(8)
            progress.advance(4)
        with meter("fsck", 10, estimated=True, stream=io.StringIO(), every_seconds=3600.0) as progress:
            progress.advance(7)  # items deleted since the count: the end says what was done
    lines = [(e["event"], e["done"], e["total"], e["total_estimated"]) for e in logs]
    assert lines == [
        ("progress", 8, 10, True),
        ("progress", 12, 12, True),
        ("progress_done", 12, 12, True),
        ("progress_done", 7, 7, True),
    ]


def test_on_a_terminal_an_estimated_total_says_so_and_never_falls_behind() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    screen = Terminal()
    with meter("fsck", 10, estimated=True, stream=screen) as progress:
        progress.advance(12)
    assert "fsck (total estimated)" in screen.getvalue()
    assert "12/12" in screen.getvalue()
    assert "12/10" not in screen.getvalue()

"""Figures a test measures (seconds until counts are exact, until a process exits), kept with its
report and printed at the end of the run, so the figures of a table can be measured again from
CI's log. ``tests/faults/conftest.py`` collects and prints them."""

from __future__ import annotations

from collections.abc import Callable

import pytest

__all__ = ["PREFIX", "Record", "figures"]

Record = Callable[[str, float], None]
PREFIX = "figure:"


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Record:
    """``figures(name, value)``: one figure of this test, kept in its report's ``user_properties``
    (and so in a JUnit XML report too)."""

    def record(name: str, value: float) -> None:
        request.node.user_properties.append((PREFIX + name, round(value, 2)))

    return record

"""The settings a command reads are found in the source of what it runs: through helpers of other
modules, functions handed on rather than called, a runtime's ``self.settings``, a ``Settings``
property, and every branch; not through code it never names, nor ``Settings.from_env``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from graph_service.entrypoints import settings_reads
from graph_service.entrypoints.settings_reads import settings_read_by

BUILDERS = """
from graph_service.settings import Settings


def options(settings: Settings) -> dict[str, str]:
    if settings.kafka_security_protocol == "SSL":
        return {"cafile": settings.kafka_ssl_cafile}
    return {}


def never_named(settings: Settings) -> str:
    return settings.fanout_group


class Runtime:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def name(self) -> str:
        return self.settings.relay_consumer_name
"""

ENTRY = """
import functools

from graph_service.settings import Settings
from probe_package import builders
from probe_package.builders import Runtime, options


def build(local: Settings) -> object:
    return functools.partial(options, local), Runtime(local), local.on_aws, builders.Runtime


def main() -> None:
    settings = Settings.from_env()
    start(build, settings)


def start(build: object, settings: Settings) -> None:
    print(settings.table("users"))
"""


def _forget() -> None:
    for cached in (settings_reads._module, settings_reads._package_dir, settings_read_by):
        cached.cache_clear()


@pytest.fixture
def probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    package = tmp_path / "probe_package"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "builders.py").write_text(BUILDERS)
    (package / "entry.py").write_text(ENTRY)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(settings_reads, "ROOTS", settings_reads.ROOTS | {"probe_package"})
    _forget()
    yield "probe_package.entry.main"
    _forget()


def test_reads_are_followed_through_everything_the_entry_names(probe: str) -> None:
    assert settings_read_by(probe) == (
        "dynamodb_endpoint",  # Settings.on_aws
        "table_prefix",  # Settings.table
        "relay_consumer_name",  # Runtime.name, a method of a class named
        "kafka_security_protocol",  # options, handed to functools.partial
        "kafka_ssl_cafile",  # in a branch
    )


def test_an_entry_that_is_not_there_is_an_error(probe: str) -> None:
    with pytest.raises(ValueError, match=r"no function probe_package\.entry\.missing"):
        settings_read_by("probe_package.entry.missing")

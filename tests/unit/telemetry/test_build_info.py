"""``socialgraph_build_info``: the version installed and the commit built, in every process's registry."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from graph_service.entrypoints.cli import package_version
from graph_service.telemetry.build_info import BuildInfo, build_info, register_build_info, source_commit
from graph_service.telemetry.registry import process_registry


def git(folder: Path, *args: str) -> str:
    identity = ("-c", "user.name=t", "-c", "user.email=t@example.com")
    done = subprocess.run(["git", *identity, "-C", str(folder), *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_sg_build_commit_names_the_commit() -> None:
    assert source_commit({"SG_BUILD_COMMIT": " 0123abc-dirty\n"}, Path("/nowhere")) == "0123abc-dirty"


def test_a_checkout_names_its_head(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    git(tmp_path, "commit", "-q", "--allow-empty", "-m", "first")
    assert source_commit({}, tmp_path) == git(tmp_path, "rev-parse", "HEAD")
    assert source_commit({"SG_BUILD_COMMIT": ""}, tmp_path) == git(tmp_path, "rev-parse", "HEAD")


def test_without_a_checkout_or_git_the_commit_is_unknown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert source_commit({}, tmp_path) == "unknown"  # installed: no .git beside the package
    git(tmp_path, "init", "-q")
    assert source_commit({}, tmp_path) == "unknown"  # a repository without a commit
    git(tmp_path, "commit", "-q", "--allow-empty", "-m", "first")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert source_commit({}, tmp_path) == "unknown"  # no git to ask


def test_every_process_registry_holds_one_build_info_series_at_1() -> None:
    registry = process_registry()
    info = build_info()
    assert info.version == package_version()
    assert registry.get_sample_value("socialgraph_build_info", {"version": info.version, "commit": info.commit}) == 1
    found = [s for m in registry.collect() if m.name == "socialgraph_build_info" for s in m.samples]
    assert len(found) == 1


def test_the_build_given_is_the_one_reported() -> None:
    registry = CollectorRegistry()
    register_build_info(registry, BuildInfo("1.2.3", "0123abc"))
    assert registry.get_sample_value("socialgraph_build_info", {"version": "1.2.3", "commit": "0123abc"}) == 1

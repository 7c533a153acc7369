"""The local stack's own settings (``socialgraph up`` and the test suite's servers), read in one place.

The service's settings are ``graph_service.settings.Settings``; these say only where the local
servers live: the folder of tools, data and logs, and the ports of DynamoDB Local, Redis, the
Kafka broker and the object store that keeps the broker's data. A bad value is a ``SettingsError``
naming the variable, as for the service's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from graph_service.settings import SettingsError

__all__ = ["VARIABLES", "StackSettings"]

VARIABLES: dict[str, tuple[str, str]] = {
    "SG_LOCAL_DIR": ("./.local", "where the local stack keeps installed tools, data and logs"),
    "SG_DYNAMODB_LOCAL_PORT": ("8000", "port of DynamoDB Local"),
    "SG_REDIS_PORT": ("6379", "port of the local Redis"),
    "SG_KAFKA_PORT": ("9092", "port of the local Kafka broker"),
    "SG_BROKER_STORE_PORT": ("4568", "port of the object store (s3rver) that keeps the local broker's data"),
}
"""Variable -> (default, meaning), for ``socialgraph up --help`` and the README."""


def _port(env: Mapping[str, str], name: str) -> int:
    raw = env.get(name, VARIABLES[name][0]).strip()
    if not raw.isdigit() or not 1 <= int(raw) <= 65_535:
        raise SettingsError(f"{name} must be a port number (1-65535), not {raw!r}")
    return int(raw)


@dataclass(frozen=True)
class StackSettings:
    local_dir: Path
    dynamodb_local_port: int
    redis_port: int
    kafka_port: int
    broker_store_port: int

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> StackSettings:
        env = os.environ if environ is None else environ
        folder = env.get("SG_LOCAL_DIR", "").strip()
        names = ("SG_DYNAMODB_LOCAL_PORT", "SG_REDIS_PORT", "SG_KAFKA_PORT", "SG_BROKER_STORE_PORT")
        ports = {name: _port(env, name) for name in names}
        if len(set(ports.values())) < len(ports):
            raise SettingsError(f"the local stack's ports must differ: {ports}")
        return cls(
            local_dir=(Path(folder) if folder else Path.cwd() / ".local").resolve(),
            dynamodb_local_port=ports["SG_DYNAMODB_LOCAL_PORT"],
            redis_port=ports["SG_REDIS_PORT"],
            kafka_port=ports["SG_KAFKA_PORT"],
            broker_store_port=ports["SG_BROKER_STORE_PORT"],
        )

    @staticmethod
    def help_lines() -> list[str]:
        """The variables with their defaults, in the layout of the service's settings in ``--help``."""
        lines = []
        for name, (default, meaning) in VARIABLES.items():
            lines += [f"  {name} (default: {default})", f"      {meaning[0].upper()}{meaning[1:]}."]
        return lines

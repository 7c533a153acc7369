"""Session setup shared by every test, and the fixtures of ``tests/support`` made visible to all.

Unit tests use none of the server fixtures, so they start no server; integration and end-to-end
tests start the real ones (DynamoDB Local, Redis, the broker) on free ports, once per session.
"""

from __future__ import annotations

import os

from graph_service.entrypoints.logging import configure_logging
from tests.support.figures import figures
from tests.support.runtimes import counters, event_settings, server, settings, shared_tables, stub
from tests.support.servers import (
    dynamodb_local,
    dynamodb_locals,
    flushed_cluster,
    kafka_broker,
    own_redis,
    redis_cluster,
    redis_node,
    redis_url,
    servers_dir,
)

__all__ = [
    "counters",
    "dynamodb_local",
    "dynamodb_locals",
    "event_settings",
    "figures",
    "flushed_cluster",
    "kafka_broker",
    "own_redis",
    "redis_cluster",
    "redis_node",
    "redis_url",
    "server",
    "servers_dir",
    "settings",
    "shared_tables",
    "stub",
]

os.environ.setdefault("AWS_ACCESS_KEY_ID", "local")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "local")
configure_logging("warning", cache_loggers=False)  # capture_logs() then sees every logger

"""What ``import``, ``fsck`` and ``reconcile`` share around their work: the line that names what
they are about to touch, printed before they read or write anything (a run aimed at the wrong place,
real AWS for the local stack or another deployment's tables, is seen at once); their ``--json`` and
``--metrics-file`` options; and the run's metrics file (``telemetry.operator_runs``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from graph_service.dynamodb.client import AsyncDynamo
from graph_service.entrypoints.exits import Exit, classify
from graph_service.operations.progress import watching
from graph_service.settings import Settings
from graph_service.telemetry.operator_runs import RunMetrics

__all__ = ["add_output_arguments", "measured", "target_line"]


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """``--json`` and ``--metrics-file``."""
    parser.add_argument(
        "--json", action="store_true", help="print the result as one JSON object on stdout instead of lines"
    )
    parser.add_argument(
        "--metrics-file",
        type=Path,
        metavar="PATH",
        help="write the run's metrics to PATH in Prometheus text format (for node_exporter's textfile"
        " collector: a name ending in .prom), replaced atomically at the start, every 5 s of progress and at the end",
    )


def _without_credentials(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def target_line(command: str, settings: Settings, *, cache_url: str | None = None) -> str:
    """``socialgraph fsck: DynamoDB http://127.0.0.1:8000 (region us-east-1), tables sg_*, cache
    redis://127.0.0.1:6379/0``. Without ``SG_DYNAMODB_ENDPOINT``, the endpoint the AWS SDK resolves
    (``https://dynamodb.us-east-1.amazonaws.com``, or ``AWS_ENDPOINT_URL_DYNAMODB``). ``cache_url``:
    given by a command that reads or writes the cache too ("" when none is configured); a password
    in it is left out. A command that never touches the cache passes none, so its ``--help`` (derived
    from the settings its code reads) does not list the cache's variables."""
    dynamo = AsyncDynamo.build(settings)  # connects to nothing: it only resolves the endpoint
    try:
        endpoint = str(dynamo.client.meta.endpoint_url)
    finally:
        dynamo.close()
    line = f"socialgraph {command}: DynamoDB {endpoint} (region {settings.aws_region}), tables {settings.table_prefix}*"
    if cache_url is not None:
        line += f", cache {_without_credentials(cache_url)}" if cache_url else ", no cache"
    return line


def measured(command: str, metrics: RunMetrics | None, work: Callable[[], int]) -> int:
    """``work()``'s exit code. With ``metrics``: the file written at the start (exit 2, nothing
    done, if it cannot be), as every progress meter of the work moves, and at the end with the exit
    code (that of the failure ``cli.main`` will report, if ``work`` raises)."""
    if metrics is None:
        return work()
    try:
        metrics.start()
    except OSError as exc:
        why = exc.strerror or exc
        print(f"socialgraph {command}: cannot write the metrics file {metrics.path}: {why}", file=sys.stderr)
        return Exit.CONFIGURATION
    code: int = Exit.INTERNAL
    try:
        with watching(metrics.progress):
            code = work()
    except KeyboardInterrupt:
        code = Exit.INTERRUPTED
        raise
    except Exception as exc:
        known = classify(exc)
        code = Exit.INTERNAL if known is None else known[0]
        raise
    finally:
        metrics.end(code)
    return code

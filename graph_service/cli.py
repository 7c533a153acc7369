"""The `socialgraph` command."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

import structlog

from graph_service.logging import configure_logging
from graph_service.settings import Settings, SettingsError

__all__ = ["main"]

log = structlog.get_logger(__name__)


def _serve(settings: Settings) -> int:
    from graph_service.server import PortInUse, serve

    try:
        asyncio.run(serve(settings))
    except PortInUse as exc:
        print(f"socialgraph serve: {exc}", file=sys.stderr)
        return 2
    return 0


def _counters(settings: Settings) -> int:
    from counters.consumer import run_counters

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await run_counters(settings, stop)

    asyncio.run(run())
    return 0


def _create_tables(settings: Settings) -> int:
    from graph_service.store.tables import ensure_tables

    created = asyncio.run(ensure_tables(settings))
    print(f"created: {', '.join(created) or 'nothing (all tables exist)'}")
    return 0


def _up(settings: Settings) -> int:
    from graph_service.localstack.stack import run_stack

    return run_stack(settings)


COMMANDS = {
    "up": ("run the whole local stack in the foreground (Ctrl-C stops it)", _up),
    "serve": ("run the gRPC service", _serve),
    "counters": ("run the counts consumer of the followers table's stream", _counters),
    "create-tables": ("create the DynamoDB tables if missing (idempotent)", _create_tables),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="socialgraph", description="The follow graph service.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (help_text, _) in COMMANDS.items():
        sub.add_parser(name, help=help_text)
    args = parser.parse_args(argv)
    try:
        settings = Settings.from_env()
    except SettingsError as exc:
        print(f"socialgraph: bad configuration: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level)
    return COMMANDS[args.command][1](settings)

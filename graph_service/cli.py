"""The `socialgraph` command."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from collections.abc import Awaitable, Callable

import structlog
from botocore.exceptions import ClientError

from graph_service.errors import DomainError
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


def _until_signal(run: Callable[[Settings, asyncio.Event], Awaitable[None]], settings: Settings) -> int:
    """Run a long-lived component until SIGTERM or SIGINT."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await run(settings, stop)

    try:
        asyncio.run(main())
    except (RuntimeError, ClientError, DomainError) as exc:  # a missing table, Kafka or Redis unreachable
        print(f"socialgraph: {exc}", file=sys.stderr)
        return 2
    return 0


def _counters(settings: Settings, args: argparse.Namespace) -> int:
    from counters.consumer import run_counters

    return _until_signal(run_counters, settings)


def _relay(settings: Settings, args: argparse.Namespace) -> int:
    from relay.relay import run_relay

    return _until_signal(run_relay, settings)


def _fanout(settings: Settings, args: argparse.Namespace) -> int:
    from fanout.worker import run_fanout

    return _until_signal(run_fanout, settings)


def _create_tables(settings: Settings, args: argparse.Namespace) -> int:
    from graph_service.store.tables import ensure_tables

    created = asyncio.run(ensure_tables(settings))
    print(f"created: {', '.join(created) or 'nothing (all tables exist)'}")
    return 0


def _create_topics(settings: Settings, args: argparse.Namespace) -> int:
    from aiokafka.errors import KafkaError

    from graph_service.kafka import ensure_topics

    try:
        created = asyncio.run(ensure_topics(settings))
    except (KafkaError, RuntimeError) as exc:
        print(f"socialgraph create-topics: Kafka at {settings.kafka_bootstrap_servers}: {exc}", file=sys.stderr)
        return 2
    print(f"created: {', '.join(created) or 'nothing (all topics exist)'}")
    return 0


def _post(settings: Settings, args: argparse.Namespace) -> int:
    from graph_service.store.dynamo_client import AsyncDynamo
    from graph_service.tweets import TweetStore

    async def post() -> int:
        store = TweetStore(AsyncDynamo.build(settings), settings)
        try:
            tweet = await store.post(args.author, args.text)
        finally:
            store.close()
        print(json.dumps({"tweet_id": str(tweet.tweet_id), "author_id": str(tweet.author_id)}))
        return 0

    try:
        return asyncio.run(post())
    except DomainError as exc:
        print(f"socialgraph post: {exc.message}", file=sys.stderr)
        return 2


def _up(settings: Settings, args: argparse.Namespace) -> int:
    from graph_service.localstack.stack import run_stack

    return run_stack(settings)


def _post_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--author", type=int, required=True, help="the author's user ID")
    parser.add_argument("--text", default="", help="the tweet's text (at most 280 characters)")


Handler = Callable[[Settings, argparse.Namespace], int]
COMMANDS: dict[str, tuple[str, Handler, Callable[[argparse.ArgumentParser], None] | None]] = {
    "up": ("run the whole local stack in the foreground (Ctrl-C stops it)", _up, None),
    "serve": ("run the gRPC service", lambda s, _: _serve(s), None),
    "counters": ("run the counts consumer of the followers table's stream", _counters, None),
    "relay": ("relay committed tweets and follows from DynamoDB Streams to Kafka", _relay, None),
    "fanout": ("run a fanout worker (TweetCreated -> home timelines)", _fanout, None),
    "post": ("post a tweet (a PutItem into the tweets table) and print its ID", _post, _post_arguments),
    "create-tables": ("create the DynamoDB tables if missing (idempotent)", _create_tables, None),
    "create-topics": ("create the Kafka topics if missing (idempotent)", _create_topics, None),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="socialgraph", description="The follow graph service.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (help_text, _, arguments) in COMMANDS.items():
        command = sub.add_parser(name, help=help_text)
        if arguments is not None:
            arguments(command)
    args = parser.parse_args(argv)
    try:
        settings = Settings.from_env()
    except SettingsError as exc:
        print(f"socialgraph: bad configuration: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level)
    return COMMANDS[args.command][1](settings, args)

"""The `socialgraph` command."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable

from botocore.exceptions import ClientError

from graph_service.domain.errors import DomainError
from graph_service.entrypoints.logging import configure_logging
from graph_service.entrypoints.runtime import Runtime, run_until_signal
from graph_service.settings import Settings, SettingsError

__all__ = ["main"]


def _run(build: Callable[[Settings], Awaitable[Runtime]], settings: Settings) -> int:
    """Run a long-lived process until SIGTERM or SIGINT; a start that fails is one line and exit 2."""
    from graph_service.api.callers import CallersFileError
    from graph_service.api.server import PortInUse

    try:
        run_until_signal(build, settings)
    except PortInUse as exc:
        print(f"socialgraph serve: {exc}", file=sys.stderr)
        return 2
    except (SettingsError, CallersFileError) as exc:  # unsafe against AWS, or a bad callers file
        print(f"socialgraph: bad configuration: {exc}", file=sys.stderr)
        return 2
    except (RuntimeError, ClientError, DomainError) as exc:  # a missing table, Kafka or Redis unreachable
        print(f"socialgraph: {exc}", file=sys.stderr)
        return 2
    return 0


def _serve(settings: Settings, args: argparse.Namespace) -> int:
    from graph_service.entrypoints.server import build_server

    return _run(build_server, settings)


def _counters(settings: Settings, args: argparse.Namespace) -> int:
    from graph_service.entrypoints.counters import build_counters

    return _run(build_counters, settings)


def _relay(settings: Settings, args: argparse.Namespace) -> int:
    from graph_service.entrypoints.relay import build_relay

    return _run(build_relay, settings)


def _fanout(settings: Settings, args: argparse.Namespace) -> int:
    from graph_service.entrypoints.fanout import build_fanout

    return _run(build_fanout, settings)


def _create_tables(settings: Settings, args: argparse.Namespace) -> int:
    from graph_service.dynamodb.tables import ensure_tables

    created = asyncio.run(ensure_tables(settings))
    print(f"created: {', '.join(created) or 'nothing (all tables exist)'}")
    return 0


def _create_topics(settings: Settings, args: argparse.Namespace) -> int:
    from aiokafka.errors import KafkaError

    from graph_service.events.kafka import ensure_topics

    try:
        created = asyncio.run(ensure_topics(settings))
    except (KafkaError, RuntimeError) as exc:
        print(f"socialgraph create-topics: Kafka at {settings.kafka_bootstrap_servers}: {exc}", file=sys.stderr)
        return 2
    print(f"created: {', '.join(created) or 'nothing (all topics exist)'}")
    return 0


def _post(settings: Settings, args: argparse.Namespace) -> int:
    from graph_service.dynamodb.client import AsyncDynamo
    from graph_service.tweets.tweet_store import DynamoTweetStore

    async def post() -> int:
        dynamo = AsyncDynamo.build(settings)
        try:
            tweet = await DynamoTweetStore(dynamo, settings).post(args.author, args.text)
        finally:
            dynamo.close()
        print(json.dumps({"tweet_id": str(tweet.tweet_id), "author_id": str(tweet.author_id)}))
        return 0

    try:
        return asyncio.run(post())
    except DomainError as exc:
        print(f"socialgraph post: {exc.message}", file=sys.stderr)
        return 2


def _up(settings: Settings, args: argparse.Namespace) -> int:
    try:  # the development stack is a package of its own, not installed in production
        from socialgraph_devstack.stack import run_stack
    except ModuleNotFoundError as exc:
        if exc.name != "socialgraph_devstack":
            raise
        print("socialgraph up: the local stack needs the development tools: pip install -e ./devstack", file=sys.stderr)
        return 2
    return run_stack(settings)


def _token(settings: Settings, args: argparse.Namespace) -> int:
    from graph_service.api.callers import SCOPES, caller_entry, mint_token

    scopes = list(dict.fromkeys(s.strip() for s in args.scopes.split(",") if s.strip()))
    unknown = [s for s in scopes if s not in SCOPES]
    name_fits_toml = args.name.strip() and args.name.isprintable() and not set(args.name) & {'"', "\\"}
    if not scopes or unknown or not name_fits_toml:
        print(
            f"socialgraph token: give a name (printable, no quotes) and --scopes from {','.join(SCOPES)}"
            + (f" (unknown: {', '.join(unknown)})" if unknown else ""),
            file=sys.stderr,
        )
        return 2
    token = mint_token()
    where = settings.auth_tokens_file or "the file SG_AUTH_TOKENS_FILE names"
    print(f"token (shown once; give it to {args.name}, it is not stored anywhere):\n\n  {token}\n")
    print(f"append to {where} (it is re-read within seconds, or on SIGHUP):\n")
    print(caller_entry(args.name, scopes, token), end="")
    return 0


def _token_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="the caller's name, as it will appear in logs (e.g. feed)")
    parser.add_argument("--scopes", default="read", help="comma-separated: read, write (default: read)")


def _post_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--author", type=int, required=True, help="the author's user ID")
    parser.add_argument("--text", default="", help="the tweet's text (at most 280 characters)")


Handler = Callable[[Settings, argparse.Namespace], int]
COMMANDS: dict[str, tuple[str, Handler, Callable[[argparse.ArgumentParser], None] | None]] = {
    "up": ("run the whole local stack in the foreground (Ctrl-C stops it)", _up, None),
    "serve": ("run the gRPC service", _serve, None),
    "counters": ("run the counts consumer of the followers table's stream", _counters, None),
    "relay": ("relay committed tweets and follows from DynamoDB Streams to Kafka", _relay, None),
    "fanout": ("run a fanout worker (TweetCreated -> home timelines)", _fanout, None),
    "post": ("post a tweet (a PutItem into the tweets table) and print its ID", _post, _post_arguments),
    "create-tables": ("create the DynamoDB tables if missing (idempotent)", _create_tables, None),
    "create-topics": ("create the Kafka topics if missing (idempotent)", _create_topics, None),
    "token": (
        "mint a caller's bearer token and print the [[caller]] entry for SG_AUTH_TOKENS_FILE",
        _token,
        _token_arguments,
    ),
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

"""The `socialgraph` command."""

from __future__ import annotations

import argparse
import asyncio
import functools
import importlib
import json
import sys
import textwrap
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import structlog

from graph_service.domain.errors import DomainError, Unavailable
from graph_service.entrypoints.exits import Exit, classify
from graph_service.entrypoints.logging import configure_logging
from graph_service.entrypoints.runtime import Runtime, run_until_signal
from graph_service.entrypoints.settings_help import settings_epilog
from graph_service.entrypoints.settings_reads import settings_read_by
from graph_service.settings import Settings, SettingsError
from graph_service.telemetry.build_info import package_version

__all__ = ["COMMANDS", "build_parser", "main"]

log = structlog.get_logger(__name__)


def _run(build: Callable[[Settings], Awaitable[Runtime]], settings: Settings) -> int:
    """Run a long-lived process until SIGTERM or SIGINT (a start that fails ends in ``main``)."""
    run_until_signal(build, settings)
    return 0


def _serve(settings: Settings, args: argparse.Namespace) -> int:
    from graph_service.entrypoints.server import build_server

    if args.worker is not None:  # one of SG_SERVE_PROCESSES, started by the parent below
        structlog.contextvars.bind_contextvars(worker=args.worker)
        return _run(functools.partial(build_server, shared_port=True), settings)
    if settings.serve_processes > 1:
        from graph_service.entrypoints.serve_processes import run_processes

        return asyncio.run(run_processes(settings))
    return _run(build_server, settings)


def _serve_arguments(parser: argparse.ArgumentParser) -> None:
    # Internal: how the SG_SERVE_PROCESSES parent starts each worker (SO_REUSEPORT on, the port checked).
    parser.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)


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
    from graph_service.dynamodb.provisioning import ensure_tables

    created = asyncio.run(ensure_tables(settings, protect=True))
    print(f"created: {', '.join(created) or 'nothing (all tables exist)'}")
    return 0


def _create_topics(settings: Settings, args: argparse.Namespace) -> int:
    from aiokafka.errors import KafkaConnectionError

    from graph_service.events.kafka import ensure_topics

    try:
        created = asyncio.run(ensure_topics(settings))
    except KafkaConnectionError as exc:  # name the servers tried (exit 3, see exits.py)
        raise ConnectionError(f"Kafka at {settings.kafka_bootstrap_servers}: {exc}") from exc
    print(f"created: {', '.join(created) or 'nothing (all topics exist)'}")
    return 0


def _post(settings: Settings, args: argparse.Namespace) -> int:
    from graph_service.dynamodb.client import AsyncDynamo
    from graph_service.dynamodb.tables import TableNames
    from graph_service.tweets.tweet_store import DynamoTweetStore

    async def post() -> int:
        dynamo = AsyncDynamo.build(settings)
        try:
            tweet = await DynamoTweetStore(dynamo, TableNames(settings.table_prefix)).post(args.author, args.text)
        finally:
            dynamo.close()
        print(json.dumps({"tweet_id": str(tweet.tweet_id), "author_id": str(tweet.author_id)}))
        return 0

    try:
        return asyncio.run(post())
    except Unavailable:
        raise  # an outage, not a bad tweet: exit 3 (see exits.py)
    except DomainError as exc:
        print(f"socialgraph post: {exc.message}", file=sys.stderr)
        return Exit.CONFIGURATION


def _up(settings: Settings, args: argparse.Namespace) -> int:
    try:  # the development stack is a package of its own, not installed in production
        from socialgraph_devstack.stack import run_stack
    except ModuleNotFoundError as exc:
        if exc.name != "socialgraph_devstack":
            raise
        print("socialgraph up: the local stack needs the development tools: pip install -e ./devstack", file=sys.stderr)
        return Exit.CONFIGURATION
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
        return Exit.CONFIGURATION
    token = mint_token()
    where = settings.auth_tokens_file or "the file SG_AUTH_TOKENS_FILE names"
    print(f"token (shown once; give it to {args.name}, it is not stored anywhere):\n\n  {token}\n")
    print(f"append to {where} (it is re-read within seconds, or on SIGHUP):\n")
    print(caller_entry(args.name, scopes, token), end="")
    return 0


def _token_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="the caller's name, as it will appear in logs (e.g. feed)")
    parser.add_argument("--scopes", default="read", help="comma-separated: read, write, admin (default: read)")


def _post_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--author", type=int, required=True, help="the author's user ID")
    parser.add_argument("--text", default="", help="the tweet's text (at most 280 characters)")


Handler = Callable[[Settings, argparse.Namespace], int]
Arguments = Callable[[argparse.ArgumentParser], None]


@dataclass(frozen=True)
class _Lazy:
    """The handler of a command that lives in a module of its own (its ``run`` and ``arguments``),
    imported only when that command is chosen or its help is built."""

    module: str

    def __call__(self, settings: Settings, args: argparse.Namespace) -> int:
        handler: Handler = importlib.import_module(self.module).run
        return handler(settings, args)

    def arguments(self, parser: argparse.ArgumentParser) -> None:
        importlib.import_module(self.module).arguments(parser)


def _lazy(module: str) -> tuple[Handler, Arguments]:
    lazy = _Lazy(module)
    return lazy, lazy.arguments


@dataclass(frozen=True)
class Command:
    summary: str
    """One line, in ``socialgraph --help``."""
    description: str
    """What it does, at the top of its own ``--help``."""
    handler: Handler
    arguments: Arguments | None = None
    traced: bool = False
    """It makes spans (configured by the standard ``OTEL_*`` variables): its help says so."""

    @property
    def entry(self) -> str:
        """The function its settings are looked for from (``settings_reads``), dotted."""
        if isinstance(self.handler, _Lazy):
            return f"{self.handler.module}.run"
        return f"{self.handler.__module__}.{self.handler.__qualname__}"

    @property
    def reads(self) -> tuple[str, ...]:
        """The settings it reads (``Settings`` field names), found in the code it runs (``main``'s
        ``SG_LOG_LEVEL`` too), listed with their variables in its ``--help``."""
        return settings_read_by(self.entry, f"{__name__}.main")


COMMANDS: dict[str, Command] = {
    "up": Command(
        "run the whole local stack in the foreground (Ctrl-C stops it)",
        "Start DynamoDB Local, Redis and a Kafka broker on this machine (installing what is missing), create"
        " the tables and topics, then run serve, counters, relay and fanout, and print how to call the"
        " service with grpcurl and where each process's metrics are. Settings in the environment (auth,"
        " limits, metrics) reach every process it starts; the endpoints of the local servers are its own.",
        _up,
    ),
    "serve": Command(
        "run the gRPC service",
        "Serve SocialGraphService and TimelineService (with gRPC health and reflection) until SIGTERM or"
        " SIGINT, draining in-flight calls; SIGHUP re-reads the callers file.",
        _serve,
        _serve_arguments,
        traced=True,
    ),
    "counters": Command(
        "run the counts consumer of the followers table's stream",
        "Read the followers table's DynamoDB stream and keep followers_count and following_count in the"
        " users table exact (each change counted once), repairing the count cache as it goes.",
        _counters,
        traced=True,
    ),
    "relay": Command(
        "relay committed tweets and follows from DynamoDB Streams to Kafka",
        "Read the tweets and followers tables' streams and produce TweetCreated and FollowEvent records to"
        " Kafka, in commit order per key, each change at least once.",
        _relay,
        traced=True,
    ),
    "fanout": Command(
        "run a fanout worker (TweetCreated -> home timelines)",
        "Consume TweetCreated records (one consumer group, partitions shared among the workers) and push"
        " each tweet onto its author's followers' home timelines in Redis; authors with many followers"
        " are left to be pulled at read time.",
        _fanout,
        traced=True,
    ),
    "post": Command(
        "post a tweet (a PutItem into the tweets table) and print its ID",
        "Write one tweet into the tweets table; the relay and fanout take it from there.",
        _post,
        _post_arguments,
    ),
    "create-tables": Command(
        "create the DynamoDB tables if missing (idempotent)",
        "Create the project's tables (with their streams) if they do not exist yet, and turn on deletion"
        " protection and point-in-time recovery (where the endpoint has it: DynamoDB Local has not) on every"
        " one; nothing else of an existing table is changed.",
        _create_tables,
    ),
    "create-topics": Command(
        "create the Kafka topics if missing (idempotent)",
        "Create the Kafka topics of the relay and fanout if they do not exist yet.",
        _create_topics,
    ),
    "reconcile": Command(
        "compare users' counters with the edge table (--fix corrects them)",
        "Count each user's followers and followees in the edge tables, compare with the counters in the"
        " users table, print one line per drifted user and a summary. --fix writes the true counts,"
        " guarded by the counter's version so that a concurrent counters consumer update is never lost,"
        " and repairs the count cache. Exit 1 when drift was found and not fixed; exit 3, checking nothing,"
        " while the counters consumer is behind by more than --settle-seconds.",
        *_lazy("graph_service.entrypoints.reconcile"),
    ),
    "fsck": Command(
        "check the graph's invariants (and the cache against the store)",
        "Check every invariant of the edge tables (both directions present with the same time, order items"
        " paired with membership items, no edge and request in one direction, nothing across a block,"
        " counters equal to edge counts) and that cached entries equal the store; report each violation"
        " by kind and user, and a summary. Exit 1 when a violation was found; counters are not checked"
        " while the counters consumer is behind by more than --settle-seconds (exit 3 if nothing else was found).",
        *_lazy("graph_service.entrypoints.fsck"),
    ),
    "backfill": Command(
        "write the items earlier releases lack (request mirrors, block and mute reverses; idempotent)",
        "Read the followers table once and write, for each item that lacks it, what the account"
        " lifecycle needs and earlier releases did not write: the following-table mirror of each pending"
        " request, and the reverse item of each block and mute in the other account's partition. Each is"
        " written only if what it mirrors is still there and it is missing, so it is safe beside a running"
        " service and running it again writes nothing. Run it once after upgrading.",
        *_lazy("graph_service.entrypoints.backfill"),
    ),
    "import": Command(
        "load an edge list from a CSV file (idempotent, resumable)",
        "Load follower_id,followee_id[,followed_at] rows (header optional) into the edge tables with the"
        " same items and rules as a Follow of a public account (a listed follower of a private account"
        " becomes a follower, not a request; blocks, self-follows, bad IDs and the following cap are"
        " refused), in batched transactions; bad rows go to a reject file with their line numbers. Running"
        " it again after an interruption continues where it stopped; running it on a finished file adds"
        " nothing. Counts follow through the counters consumer.",
        *_lazy("graph_service.entrypoints.importer"),
    ),
    "token": Command(
        "mint a caller's bearer token and print the [[caller]] entry for SG_AUTH_TOKENS_FILE",
        "Make a random bearer token and print it once, with the [[caller]] entry (its SHA-256, never the"
        " token) to append to the callers file.",
        _token,
        _token_arguments,
    ),
    "account": Command(
        "deactivate, reactivate or delete an account through the service, or show its state",
        "Ask the running service (SocialGraphService, with the caller token of SG_CALLER_TOKEN: the admin"
        " scope, and read to wait or ask the status) to deactivate, reactivate or delete (irreversible) the"
        " account USER_ID, then wait for the job the service runs, with a progress bar on a terminal and"
        " a log line every few seconds otherwise, and print the state it ended in; status prints the"
        " state and, during a job, how far it is. Exit 1 when the account is deleted (it cannot be"
        " deactivated or reactivated), --timeout passed or a later change overtook this one (the job runs"
        " on in the service either way), 2 for a missing or refused token, 3 when the service is unreachable.",
        *_lazy("graph_service.entrypoints.account"),
    ),
}


def _stack_variables() -> str:
    """The local stack's own variables, for ``up --help`` (only where the dev stack is installed)."""
    try:
        from socialgraph_devstack.stack import StackSettings
    except ModuleNotFoundError:
        return ""
    return "\n" + "\n".join(StackSettings.help_lines())


TRACING = "tracing: the standard OTEL_* variables, see docs/operating.md"
PASSED_ON = "The other SG_* variables of the environment reach the processes it starts (their --help lists them)."


def _epilog(name: str, command: Command) -> str:
    epilog = settings_epilog(command.reads)
    if name == "up":
        epilog += f"{_stack_variables()}\n\n{PASSED_ON}"
    return epilog + (f"\n\n{TRACING}" if command.traced else "")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; given the command line, only the chosen command's arguments are built, and its
    help (the settings' descriptions, read from the source of ``settings.py``) only when asked for,
    so ``serve`` starts without importing the operator commands or the dev stack, or parsing source."""
    chosen = None if argv is None else next((a for a in argv if a in COMMANDS), "")
    wants_help = argv is None or any(a in {"-h", "--help"} for a in argv)
    parser = argparse.ArgumentParser(
        prog="socialgraph",
        description="The follow graph service and its stream consumers. Every setting is an SG_* environment variable.",
        epilog="exit codes: 0 success, 1 a check found problems, 2 usage or configuration error,"
        " 3 a dependency is unreachable, 130 interrupted (Ctrl-C), 70 an internal error (a bug; its"
        " traceback is logged)",
    )
    parser.add_argument("--version", action="version", version=f"socialgraph {package_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in COMMANDS.items():
        built = chosen is None or name == chosen
        child = sub.add_parser(
            name,
            help=command.summary,
            description=textwrap.fill(command.description, width=100),
            epilog=_epilog(name, command) if built and wants_help else None,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if command.arguments is not None and built:
            command.arguments(child)
    return parser


def main(argv: list[str] | None = None) -> int:
    given = sys.argv[1:] if argv is None else argv
    args = build_parser(given).parse_args(given)
    try:
        settings = Settings.from_env()
    except SettingsError as exc:
        print(f"socialgraph {args.command}: bad configuration: {exc}", file=sys.stderr)
        return Exit.CONFIGURATION
    configure_logging(settings.log_level)
    try:
        return COMMANDS[args.command].handler(settings, args)
    except KeyboardInterrupt:
        print(f"socialgraph {args.command}: interrupted", file=sys.stderr)
        return Exit.INTERRUPTED
    except Exception as exc:
        known = classify(exc)
        if known is None:  # a bug: its traceback goes to the JSON log, with a code no check uses
            log.critical("internal_error", command=args.command, exc_info=True)
            print(
                f"socialgraph {args.command}: internal error: {exc!r} (traceback in the log line above)",
                file=sys.stderr,
            )
            return Exit.INTERNAL
        code, line = known
        print(f"socialgraph {args.command}: {line}", file=sys.stderr)
        return code

"""``socialgraph account deactivate|reactivate|delete|status USER_ID`` (SPEC §3b): an account's
lifecycle change, made through the running service.

The command calls the service with the Python client rather than writing the tables itself: the
service is the one place that writes an account's state through the caches and checks the admin
scope, and the job a change starts runs in the serving processes. The command then watches that
job (a bar on a terminal, a log line every few seconds otherwise) until it ends, or returns at once
with ``--no-wait``; leaving the wait early (``--timeout``, Ctrl-C) leaves the job running.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import Protocol, TextIO

import structlog
from rich.console import Console
from rich.progress import BarColumn, Progress, ProgressColumn, Task, TextColumn, TimeElapsedColumn
from rich.text import Text
from socialgraph_client import (
    AccountDeletedError,
    AccountState,
    AccountStatus,
    ConnectError,
    DeadlineExceeded,
    InvalidArgument,
    PermissionDenied,
    SocialGraphClient,
    SocialGraphError,
    TlsConfig,
    Unauthenticated,
    Unavailable,
    Unimplemented,
)

from graph_service.entrypoints.exits import Exit
from graph_service.settings import Settings

__all__ = ["ACTIONS", "AccountClient", "Connect", "JobView", "arguments", "connect", "default_address", "run"]

log = structlog.get_logger(__name__)

ACTIONS = ("deactivate", "reactivate", "delete", "status")
_GOAL = {"deactivate": AccountState.DEACTIVATED, "reactivate": AccountState.ACTIVE, "delete": AccountState.DELETED}
"""The state each change's job ends in (unless a later change overtakes it)."""
POLL_SECONDS = 0.5
LOG_EVERY_SECONDS = 5.0
CONNECT_SECONDS = 5.0
WILDCARD_HOSTS = frozenset({"0.0.0.0", "[::]", "::"})  # noqa: S104 - recognised to be replaced, never bound
MAX_USER_ID = 2**64 - 1
SCOPES_HINT = (
    "set SG_CALLER_TOKEN to the token of a caller with the admin scope (and read, to wait or ask the status;"
    " `socialgraph token NAME --scopes admin,read` makes one)"
)


class AccountClient(Protocol):
    """What the command uses of ``SocialGraphClient`` (a test hands in a fake)."""

    def deactivate_account(self, user_id: int) -> None: ...
    def reactivate_account(self, user_id: int) -> None: ...
    def delete_account(self, user_id: int) -> None: ...
    def get_account_state(self, user_id: int) -> AccountStatus: ...
    def wait_for_account(
        self,
        user_id: int,
        *,
        timeout: float | None,
        poll_interval: float,
        progress: Callable[[AccountStatus], object] | None,
    ) -> AccountStatus: ...
    def close(self) -> None: ...


Connect = Callable[[str, Settings], AccountClient]
"""Opens the client to an address (``HOST:PORT``) with the caller's token and TLS from the settings."""


def connect(address: str, settings: Settings) -> AccountClient:
    """The blocking client, ready within ``CONNECT_SECONDS`` (else ``ConnectError``); a CA file that
    cannot be read is an ``OSError`` before any connection."""
    tls = TlsConfig(ca_file=settings.caller_ca_file) if settings.caller_ca_file else None
    return SocialGraphClient.connect(
        address, token=settings.caller_token or None, tls=tls, connect_timeout=CONNECT_SECONDS
    )


def default_address(grpc_address: str) -> str:
    """Where the service listens (SG_GRPC_ADDRESS), as a place to call: a wildcard host is this machine."""
    host, _, port = grpc_address.rpartition(":")
    return f"{'127.0.0.1' if host in WILDCARD_HOSTS else host}:{port}"


def _user_id(raw: str) -> int:
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_USER_ID:
        raise argparse.ArgumentTypeError(f"not a user ID (1..2**64-1): {raw!r}")
    return int(raw)


def _address(raw: str) -> str:
    host, _, port = raw.rpartition(":")
    if not host or not port.isdigit() or not 1 <= int(port) <= 65_535:
        raise argparse.ArgumentTypeError(f"not HOST:PORT: {raw!r}")
    return raw


def _seconds(raw: str) -> float:
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not (seconds > 0 and math.isfinite(seconds)):
        raise argparse.ArgumentTypeError(f"not a number of seconds above 0: {raw!r}")
    return seconds


def arguments(parser: argparse.ArgumentParser) -> None:
    """The command's own arguments."""
    parser.add_argument(
        "action", metavar="ACTION", choices=ACTIONS, help="deactivate, reactivate, delete (irreversible) or status"
    )
    parser.add_argument("user_id", metavar="USER_ID", type=_user_id, help="the account's user ID")
    parser.add_argument(
        "--address",
        metavar="HOST:PORT",
        type=_address,
        help="the service to call (default: SG_GRPC_ADDRESS, a wildcard host 0.0.0.0 or [::] as 127.0.0.1)",
    )
    parser.add_argument(
        "--no-wait", action="store_true", help="return once the service has taken the change; its job runs on"
    )
    parser.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=_seconds,
        help="stop waiting for the job after this long, exit 1; the job runs on (default: no limit)",
    )


def status_line(user_id: int, status: AccountStatus) -> str:
    """``account 42: DEACTIVATED (1,234 edges moved)``; during a job, how far it is."""
    done, total = status.edges_done, status.edges_total
    if status.job_running:
        return f"account {user_id}: {status.state.value} ({done:,} of {total:,} edges moved)"
    if status.state is AccountState.ACTIVE and done == total == 0:
        return f"account {user_id}: {status.state.value}"  # never deactivated (or nothing to restore)
    return f"account {user_id}: {status.state.value} ({done:,} edge{'' if done == 1 else 's'} moved)"


class _RateColumn(ProgressColumn):
    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:,.0f} edges/s" if speed else "- edges/s")


class JobView:
    """Shows a job's progress from ``wait_for_account``'s callback: a bar on a terminal (``stream`` a
    TTY), else an ``account_progress`` log line at the first status and every ``every_seconds``."""

    def __init__(self, user_id: int, *, stream: TextIO, every_seconds: float = LOG_EVERY_SECONDS) -> None:
        self.user_id = user_id
        self.last: AccountStatus | None = None
        """The status seen last (where the job was, when the wait is left early)."""
        self._every = every_seconds
        self._first: tuple[float, int] | None = None  # when the first status came, and its edges_done
        self._logged = -math.inf
        self._bar: Progress | None = None
        if stream.isatty():
            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.fields[edges]}"),
                _RateColumn(),
                TimeElapsedColumn(),
                console=Console(file=stream),
            )
            self._task = self._bar.add_task(f"account {user_id}", total=None, edges="")

    def __enter__(self) -> JobView:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.stop()

    def __call__(self, status: AccountStatus) -> None:
        self.last = status
        now = time.monotonic()
        first = self._first is None
        if self._first is None:
            self._first = (now, status.edges_done)
        if self._bar is not None:
            done, total = status.edges_done, status.edges_total
            if not status.job_running:  # a full bar at the end, even with nothing to move
                done = total = max(done, total, 1)
            if first:  # a job already under way: what it did before the wait is no part of the rate
                self._bar.reset(self._task, completed=done)
            self._bar.update(
                self._task,
                description=f"account {self.user_id} {status.state.value}",
                completed=done,
                total=total or None,  # unknown while the job has found nothing yet
                edges=f"{status.edges_done:,} of {status.edges_total:,} edges",
            )
        elif now - self._logged >= self._every:
            self._logged = now
            started, done_at_start = self._first
            elapsed = now - started
            rate = (status.edges_done - done_at_start) / elapsed if elapsed > 0 else 0.0
            log.info(
                "account_progress",
                user_id=self.user_id,
                state=status.state.value,
                edges_done=status.edges_done,
                edges_total=status.edges_total,
                edges_per_second=round(rate, 1),
                elapsed_seconds=round(elapsed, 1),
            )


def _fail(line: str) -> None:
    print(f"socialgraph account: {line}", file=sys.stderr)


def _refused(error: SocialGraphError, args: argparse.Namespace, address: str, settings: Settings, after: str) -> int:
    """The exit code and line for a call the service refused or did not answer (``after``: what had
    already happened, for a failure while waiting)."""
    if isinstance(error, AccountDeletedError):
        _fail(f"account {args.user_id} is deleted, for good: it cannot be {args.action}d ({error.reason}){after}")
        return Exit.PROBLEMS_FOUND
    if isinstance(error, Unauthenticated):
        sent = "SG_CALLER_TOKEN is not a token the service knows" if settings.caller_token else "no token was sent"
        _fail(f"the service refused the call ({error.message}): {sent}; {SCOPES_HINT}{after}")
        return Exit.CONFIGURATION
    if isinstance(error, PermissionDenied):
        _fail(f"the service refused the call ({error.message}): {SCOPES_HINT}{after}")
        return Exit.CONFIGURATION
    if isinstance(error, InvalidArgument | Unimplemented):
        _fail(f"the service at {address} refused the call: {error}{after}")
        return Exit.CONFIGURATION
    if isinstance(error, Unavailable | DeadlineExceeded):
        hint = ""
        if isinstance(error, ConnectError):  # nothing answered: not running there, or it speaks TLS
            hint = "; is it running there?" + ("" if settings.caller_ca_file else " (TLS: set SG_CALLER_CA_FILE)")
        _fail(f"the service at {address} is unreachable: {error.message}{hint}{after}")
        return Exit.UNREACHABLE
    _fail(f"the service failed: {error}{after}")
    return Exit.INTERNAL


def _change(client: AccountClient, action: str) -> Callable[[int], None]:
    changes = {
        "deactivate": client.deactivate_account,
        "reactivate": client.reactivate_account,
        "delete": client.delete_account,
    }
    return changes[action]


def _wait(client: AccountClient, args: argparse.Namespace, stream: TextIO) -> int:
    """Wait for the job the change started, showing its progress; print where it ended."""
    user_id, goal = args.user_id, _GOAL[args.action]
    view = JobView(user_id, stream=stream)
    try:
        with view:
            final = client.wait_for_account(user_id, timeout=args.timeout, poll_interval=POLL_SECONDS, progress=view)
    except (DeadlineExceeded, KeyboardInterrupt) as stopped:
        if isinstance(stopped, DeadlineExceeded) and args.timeout is None:
            raise  # a poll the service did not answer in time, not the end of --timeout
        where = f"at {status_line(user_id, view.last).split(': ', 1)[1]}" if view.last else "before any state came"
        why = f"still waiting after {args.timeout:g} s" if isinstance(stopped, DeadlineExceeded) else "interrupted"
        _fail(
            f"account {user_id}: {why}, {where}; the job goes on in the service"
            f" (`socialgraph account status {user_id}` shows where it is)"
        )
        return Exit.PROBLEMS_FOUND if isinstance(stopped, DeadlineExceeded) else Exit.INTERRUPTED
    print(status_line(user_id, final))
    if final.state is not goal:
        _fail(f"account {user_id} ended {final.state.value}, not {goal.value}: a later change to it overtook this one")
        return Exit.PROBLEMS_FOUND
    return Exit.OK


def run(
    settings: Settings, args: argparse.Namespace, *, connect: Connect = connect, stream: TextIO | None = None
) -> int:
    """Make the change (or read the state) through the service at ``--address``; ``connect`` and
    ``stream`` (where progress goes, stderr by default) are the tests' to replace."""
    address: str = args.address or default_address(settings.grpc_address)
    if address.endswith(":0"):
        _fail(f"SG_GRPC_ADDRESS {settings.grpc_address} has port 0 (picked at start): give --address HOST:PORT")
        return Exit.CONFIGURATION
    try:
        client = connect(address, settings)
    except OSError as exc:  # TlsConfig reads the CA file before connecting
        _fail(f"cannot read SG_CALLER_CA_FILE: {exc}")
        return Exit.CONFIGURATION
    except SocialGraphError as error:
        return _refused(error, args, address, settings, "")
    user_id, action = args.user_id, args.action
    try:
        if action == "status":
            print(status_line(user_id, client.get_account_state(user_id)))
            return Exit.OK
        try:
            _change(client, action)(user_id)
        except SocialGraphError as error:
            return _refused(error, args, address, settings, "")
        if args.no_wait:
            print(f"account {user_id}: {action} accepted; `socialgraph account status {user_id}` shows its job")
            return Exit.OK
        return _wait(client, args, sys.stderr if stream is None else stream)
    except SocialGraphError as error:
        accepted = "" if action == "status" else f" (the {action} was accepted; its job goes on in the service)"
        return _refused(error, args, address, settings, accepted)
    finally:
        client.close()

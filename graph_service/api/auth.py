"""Who may call which RPC: the scope table, the bearer-token check, and the callers file reloaded live.

Every RPC of ``socialgraph.v1`` needs one scope (``SCOPE_OF``, also the README's table); other
services (health, reflection) need none. The check runs in ``RequestInterceptor`` before the
handler, so a refused call touches nothing. A token is never logged or echoed back.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from pathlib import Path

import structlog
from socialgraph.v1 import social_graph_pb2, timeline_pb2

from graph_service.api.callers import Caller, CallersFileError, CallerTable
from graph_service.api.file_stamps import stamp
from graph_service.domain.errors import MissingScope, Unauthenticated

__all__ = ["OUR_PACKAGE", "SCOPE_OF", "Authenticator", "CallersFile", "required_scope"]

log = structlog.get_logger(__name__)
OUR_PACKAGE = f"/{social_graph_pb2.DESCRIPTOR.package}."
_GRAPH = f"/{social_graph_pb2.DESCRIPTOR.services_by_name['SocialGraphService'].full_name}/"
_TIMELINES = f"/{timeline_pb2.DESCRIPTOR.services_by_name['TimelineService'].full_name}/"
_READS = (
    "IsFollowing",
    "ListFollowers",
    "ListFollowing",
    "GetCounts",
    "BatchGetCounts",
    "GetRelationships",
    "ListKnownFollowers",
    "ListMutualFollows",
    "SuggestFollows",
    "ListFollowRequests",
    "ListMutes",
    "GetAccountState",
)
_WRITES = (
    "Follow",
    "Unfollow",
    "SetPrivacy",
    "AcceptFollowRequest",
    "RejectFollowRequest",
    "Block",
    "Unblock",
    "RemoveFollower",
    "Mute",
    "Unmute",
)
_ADMINS = ("DeactivateAccount", "ReactivateAccount", "DeleteAccount")
SCOPE_OF: dict[str, str] = {
    **{_GRAPH + name: "read" for name in _READS},
    **{_GRAPH + name: "write" for name in _WRITES},
    **{_GRAPH + name: "admin" for name in _ADMINS},
    _TIMELINES + "GetHomeTimeline": "read",
}
"""The scope each RPC needs. A ``write`` caller that also reads needs both scopes; the account
lifecycle's changes need ``admin`` (SPEC §7.1), which grants nothing else. Written out RPC by
RPC; ``tests/unit/api/test_callers.py`` checks that it names exactly the RPCs the protos
declare."""


def required_scope(method: str) -> str | None:
    """The scope ``method`` needs; None for services that stay open (health, reflection).
    An RPC of ours missing from the table needs ``write``: a forgotten entry fails closed."""
    if not method.startswith(OUR_PACKAGE):
        return None
    return SCOPE_OF.get(method, "write")


def _bearer(metadata: Iterable[tuple[str, str | bytes]]) -> str:
    for key, value in metadata:
        if key != "authorization":
            continue
        text = value.decode("latin-1") if isinstance(value, bytes) else value
        scheme, _, token = text.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated("the authorization metadata must be 'Bearer <token>'")
        return token.strip()
    raise Unauthenticated("this RPC needs 'authorization: Bearer <token>' metadata")


class Authenticator:
    """Checks one call against the callers currently in force (swapped whole on reload)."""

    def __init__(self, callers: CallerTable) -> None:
        self.callers = callers

    def identify(self, method: str, metadata: Iterable[tuple[str, str | bytes]]) -> Caller | None:
        """The caller named by the call's token; None for an open service; else ``Unauthenticated``."""
        if required_scope(method) is None:
            return None
        caller = self.callers.find(_bearer(metadata))
        if caller is None:
            raise Unauthenticated("the bearer token is not one of a configured caller")
        return caller

    @staticmethod
    def authorize(caller: Caller, method: str) -> None:
        """``MissingScope`` unless the caller's scopes include the one ``method`` needs."""
        scope = required_scope(method)
        if scope is not None and scope not in caller.scopes:
            raise MissingScope(caller.name, scope, method)


class CallersFile:
    """``SG_AUTH_TOKENS_FILE``: read at start (a bad file stops the start), then re-read when it
    changes (looked at ``every`` seconds) or on SIGHUP; a bad new version is logged and the callers in force stay."""

    def __init__(self, path: str, *, every: float) -> None:
        self.path = Path(path)
        self._every = every
        self._seen = stamp(self.path)
        self.authenticator = Authenticator(self._read())
        log.info("callers_loaded", path=str(self.path), callers=len(self.authenticator.callers))

    def _read(self) -> CallerTable:
        try:
            text = self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CallersFileError(f"{self.path}: cannot read: {exc}") from exc
        try:
            return CallerTable.parse(text)
        except CallersFileError as exc:
            raise CallersFileError(f"{self.path}: {exc}") from exc

    def reload(self) -> bool:
        """Read the file again; True if the new callers are in force."""
        self._seen = stamp(self.path)
        try:
            table = self._read()
        except CallersFileError as exc:
            log.error("callers_file_rejected", error=str(exc), kept=len(self.authenticator.callers))
            return False
        self.authenticator.callers = table
        log.info("callers_reloaded", path=str(self.path), callers=len(table))
        if not len(table):
            log.warning("no_callers", path=str(self.path), hint="every call is refused until a caller is added")
        return True

    async def watch(self, stop: asyncio.Event) -> None:
        """Re-read the file whenever its modification time, size or inode changes, until ``stop``."""
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self._every)
            if not stop.is_set() and stamp(self.path) != self._seen:
                self.reload()

"""Exit codes of the ``socialgraph`` command (SPEC §7), and which failure is which.

0 success, 1 a check found problems (``reconcile``/``fsck`` without ``--fix``), 2 usage or
configuration error, 3 a dependency is unreachable; beyond SPEC: 130 interrupted (Ctrl-C), 70 an
internal error (a bug, logged with its traceback). A failure is one line on stderr, never a
traceback: the operator needs to know what to fix, not where in the code it was noticed.
"""

from __future__ import annotations

from enum import IntEnum

from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
    ReadTimeoutError,
)

from graph_service.domain.errors import DomainError, Unavailable
from graph_service.settings import PortInUse, SettingsError

__all__ = ["Exit", "classify"]


class Exit(IntEnum):
    OK = 0
    PROBLEMS_FOUND = 1
    CONFIGURATION = 2
    UNREACHABLE = 3
    INTERRUPTED = 130
    """Ctrl-C (128 + SIGINT), as a shell reports it."""
    INTERNAL = 70
    """A bug (sysexits' EX_SOFTWARE): not a code any check returns, so a script never reads it as drift."""


_UNREACHABLE: tuple[type[BaseException], ...] = (
    Unavailable,
    EndpointConnectionError,
    ConnectTimeoutError,
    ReadTimeoutError,
    ConnectionClosedError,
    ConnectionError,  # the builtin: refused, reset (Redis and Kafka clients raise subclasses of it or wrap it)
    TimeoutError,
)
_CONFIGURATION: tuple[type[BaseException], ...] = (
    SettingsError,
    PortInUse,
    NoCredentialsError,
    PartialCredentialsError,
    NoRegionError,
)


def _third_party_unreachable() -> tuple[type[BaseException], ...]:
    """Redis and Kafka connection failures (imported here so that a command that never talks to
    them does not pay for the import at start)."""
    from aiokafka.errors import KafkaConnectionError, KafkaTimeoutError
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    return (KafkaConnectionError, KafkaTimeoutError, RedisConnectionError, RedisTimeoutError)


def _configuration_by_name(exc: BaseException) -> bool:
    """The API's own start-up refusals (a bad callers file, unusable TLS files), known by name so
    that this module does not import the API."""
    return any(cls.__name__ in {"CallersFileError", "TlsFilesError"} for cls in type(exc).__mro__)


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and what it was raised from, outermost first (our wrappers, e.g. ``Unavailable``,
    keep the library's exception as the cause)."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _configuration(exc: BaseException) -> str | None:
    if isinstance(exc, _CONFIGURATION) or _configuration_by_name(exc):
        return f"bad configuration: {exc}"
    if isinstance(exc, ClientError):
        code = exc.response.get("Error", {}).get("Code", "")
        if code == "ResourceNotFoundException":
            hint = "are SG_TABLE_PREFIX and the region right? `socialgraph create-tables` makes the tables"
            return f"{exc} ({hint})"
        return f"DynamoDB refused the call: {exc}"
    return None


def classify(exc: BaseException) -> tuple[Exit, str] | None:
    """The exit code and the one line to print for a failure that is the operator's to fix; None
    for a failure that is a bug (it keeps its traceback). A configuration cause anywhere in the chain
    wins (missing AWS credentials surface as an unavailable DynamoDB, but are the operator's setting)."""
    chain = _chain(exc)
    for link in chain:
        line = _configuration(link)
        if line is not None:
            return Exit.CONFIGURATION, line
    unreachable = _UNREACHABLE + _third_party_unreachable()
    for link in chain:
        if isinstance(link, unreachable):
            return Exit.UNREACHABLE, f"a dependency is unreachable: {link or type(link).__name__}"
    if isinstance(exc, DomainError):
        return Exit.CONFIGURATION, exc.message
    return None

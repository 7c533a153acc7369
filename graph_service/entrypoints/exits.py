"""Exit codes of the ``socialgraph`` command (SPEC §7), and which failure is which.

0 success, 1 a check found problems (``reconcile``/``fsck`` without ``--fix``), 2 usage or
configuration error, 3 a dependency is unreachable. A failure is one line on stderr, never a
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


def classify(exc: BaseException) -> tuple[Exit, str] | None:
    """The exit code and the one line to print for a failure that is the operator's to fix; None
    for a failure that is a bug (it keeps its traceback)."""
    if isinstance(exc, _CONFIGURATION) or _configuration_by_name(exc):
        return Exit.CONFIGURATION, f"bad configuration: {exc}"
    if isinstance(exc, ClientError):
        code = exc.response.get("Error", {}).get("Code", "")
        if code == "ResourceNotFoundException":
            hint = "are SG_TABLE_PREFIX and the region right? `socialgraph create-tables` makes the tables"
            return Exit.CONFIGURATION, f"{exc} ({hint})"
        return Exit.CONFIGURATION, f"DynamoDB refused the call: {exc}"
    if isinstance(exc, _UNREACHABLE + _third_party_unreachable()):
        return Exit.UNREACHABLE, f"a dependency is unreachable: {exc or type(exc).__name__}"
    if isinstance(exc, DomainError):
        return Exit.CONFIGURATION, exc.message
    cause = exc.__cause__ or exc.__context__
    if cause is not None and cause is not exc:
        return classify(cause)
    return None

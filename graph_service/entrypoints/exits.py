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
from graph_service.domain.listening import PortInUse
from graph_service.settings import SettingsError

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
    Unavailable,  # our wrapper of connection failures and of throttling past the retries
    EndpointConnectionError,
    ConnectTimeoutError,
    ReadTimeoutError,
    ConnectionClosedError,
    ConnectionError,  # the builtin: refused, reset (Redis and Kafka clients raise subclasses of it or wrap it)
)
_CONFIGURATION: tuple[type[BaseException], ...] = (
    SettingsError,
    PortInUse,
    NoCredentialsError,
    PartialCredentialsError,
    NoRegionError,
)
CONFIGURATION_CODES = {
    "ResourceNotFoundException": "are SG_TABLE_PREFIX and the region right? `socialgraph create-tables` makes them",
    "AccessDeniedException": "the AWS credentials in use may not do this",
    "UnrecognizedClientException": "the AWS credentials are not valid",
    "InvalidSignatureException": "the AWS secret key does not match",
    "ExpiredTokenException": "the AWS session token has expired",
}
"""DynamoDB refusals that the operator's settings or credentials cause (others are bugs or outages)."""


def _third_party_unreachable() -> tuple[type[BaseException], ...]:
    """Redis and Kafka connection failures (imported here so that a command that never talks to
    them does not pay for the import at start)."""
    from aiokafka.errors import KafkaConnectionError, KafkaTimeoutError
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    return (KafkaConnectionError, KafkaTimeoutError, RedisConnectionError, RedisTimeoutError)


def _configuration_by_name(exc: BaseException) -> bool:
    """The API's own start-up refusals (a bad callers file, unusable TLS files) and an ``OTEL_*``
    variable the service cannot follow (``TracingConfigError``), known by name so that this module
    imports neither the API nor the telemetry."""
    return any(cls.__name__ in {"CallersFileError", "TlsFilesError", "TracingConfigError"} for cls in type(exc).__mro__)


def _causes(exc: BaseException) -> list[BaseException]:
    """The exception and what it was explicitly raised from (``raise ... from``), outermost first.
    Only ``__cause__``: an exception merely raised while another was handled (``__context__``) is
    not explained by it, and a bug raised in an ``except`` block must keep its traceback."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__
    return chain


def _judge(link: BaseException, unreachable: tuple[type[BaseException], ...]) -> tuple[Exit, str] | None:
    if isinstance(link, _CONFIGURATION) or _configuration_by_name(link):
        return Exit.CONFIGURATION, f"bad configuration: {link}"
    if isinstance(link, ClientError):
        code = str(link.response.get("Error", {}).get("Code", ""))
        if code in CONFIGURATION_CODES:
            return Exit.CONFIGURATION, f"bad configuration: {link} ({CONFIGURATION_CODES[code]})"
        return None  # throttling past the retries arrives wrapped in Unavailable; anything else is a bug
    if isinstance(link, unreachable):
        return Exit.UNREACHABLE, f"a dependency is unreachable: {_named(link)}"
    return None


def _named(exc: BaseException) -> str:
    """The failure, saying which dependency when the library's message does not (redis-py's
    "Error 111 connecting to ..." names no Redis)."""
    text = str(exc) or type(exc).__name__
    library = type(exc).__module__.split(".", 1)[0]
    name = {"redis": "Redis", "aiokafka": "Kafka"}.get(library)
    return f"{name}: {text}" if name and not text.startswith(name) else text


def classify(exc: BaseException) -> tuple[Exit, str] | None:
    """The exit code and the one line to print for a failure that is the operator's to fix; None
    for a failure that is a bug (it keeps its traceback).

    The root cause decides the code, so the innermost link that means something wins: missing AWS
    credentials surface as an unavailable DynamoDB (wrapped) but are the operator's setting (2);
    throttling past the retries is a ``ClientError`` wrapped in ``Unavailable``: an outage (3). The
    line is the outermost link of that kind, which says what was being done (``DynamoDB query: ...``)."""
    unreachable = _UNREACHABLE + _third_party_unreachable()
    judged = [(link, _judge(link, unreachable)) for link in _causes(exc)]
    found = [verdict for _, verdict in judged if verdict is not None]
    if found:
        code = found[-1][0]
        return next(verdict for verdict in found if verdict[0] == code)
    if isinstance(exc, DomainError):  # a bad argument the domain refused (e.g. a tweet's text)
        return Exit.CONFIGURATION, exc.message
    return None

"""What a client is configured with: deadlines per kind of call, the retry policy, and the marker of a
per-call option left to the client's own setting."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from socialgraph_client.rpcs import Kind

__all__ = ["USE_CLIENT_DEFAULT", "Deadlines", "Metadata", "RetryPolicy", "UseClientDefault", "normalize_metadata"]

Metadata = Mapping[str, str] | Sequence[tuple[str, str]]
"""gRPC metadata: a mapping or ``(key, value)`` pairs; keys are lower case (``x-tenant``)."""


@dataclass(frozen=True, slots=True)
class Deadlines:
    """The default deadline of each kind of call, in seconds; a call's ``timeout=`` overrides it.

    A deadline covers the whole call, retries included. None means no deadline (not advised: a
    call to a hung server then waits for ever).
    """

    read: float | None = 5.0
    """Point and page reads (``is_following``, ``get_counts``, ``list_followers``, ...)."""
    write: float | None = 10.0
    """Graph changes (``follow``, ``block``, ``set_privacy``, ...): a DynamoDB transaction each."""
    heavy: float | None = 30.0
    """Reads that intersect lists: ``suggest_follows``, ``list_known_followers``, ``list_mutual_follows``."""

    def __post_init__(self) -> None:
        for name in ("read", "write", "heavy"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"Deadlines.{name} must be above 0 seconds or None, not {value!r}")

    def of(self, kind: Kind) -> float | None:
        if kind is Kind.READ:
            return self.read
        if kind is Kind.WRITE:
            return self.write
        return self.heavy


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a failed call is sent again. Every RPC of the service is idempotent, so each may be.

    Retried: ``UNAVAILABLE`` (a replica restarting, a store that did not answer) and an attempt that
    ran out of its own ``attempt_timeout`` (a replica that hangs), with exponential backoff, each
    wait drawn between half and all of the current delay; and ``RESOURCE_EXHAUSTED`` only when the
    server said when (``RetryInfo``), waiting that long. Never past the call's deadline nor past
    ``max_attempts``: a wait that would end after the deadline is not started, and the last error
    is raised; but after an attempt that ran out of time, a last attempt without an answer
    (``UNAVAILABLE``) raises ``DeadlineExceeded`` (the call may have been carried out).
    Pass ``retry=None`` to ``connect`` (or to one call) to turn retries off.
    """

    max_attempts: int | None = None
    """Attempts per call, the first included; None: as many as the deadline allows."""
    initial_backoff: float = 0.05
    """Seconds before the first retry (before jitter)."""
    max_backoff: float = 2.0
    """The delay stops doubling here."""
    multiplier: float = 2.0
    honour_retry_info: bool = True
    """Retry ``RESOURCE_EXHAUSTED`` after the delay its ``RetryInfo`` gives, when that fits the deadline."""
    max_retry_info_wait: float = 10.0
    """The longest ``RetryInfo`` delay waited out; a longer one (a follow limit that lifts in an
    hour) is raised at once with ``retry_after``, deadline or not."""
    attempt_timeout: float | None = None
    """Seconds one attempt may take, within the call's deadline (each attempt gets the smaller of this
    and the time left); an attempt that runs out of it is sent again, so that a replica that hangs
    (stopped, not dead) costs this long rather than the whole deadline. It helps when the next
    attempt can reach another server: a target of several addresses with the ``round_robin`` policy,
    or a load balancer that spreads requests. None: an attempt may take all the time left.

    In the policy given to ``connect`` it bounds the read calls only (``Deadlines.read``'s kind):
    writes and heavy reads can take far longer than a read when all is well, and would be cut and
    sent again for ever. A call's own ``retry=`` policy applies it to that call, whatever its kind."""

    def __post_init__(self) -> None:
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ValueError(f"RetryPolicy.max_attempts must be at least 1, not {self.max_attempts}")
        if not 0 < self.initial_backoff <= self.max_backoff:
            raise ValueError("RetryPolicy needs 0 < initial_backoff <= max_backoff")
        if self.max_retry_info_wait < 0:
            raise ValueError(f"RetryPolicy.max_retry_info_wait must be at least 0, not {self.max_retry_info_wait}")
        if self.multiplier < 1:
            raise ValueError(f"RetryPolicy.multiplier must be at least 1, not {self.multiplier}")
        if self.attempt_timeout is not None and not self.attempt_timeout > 0:
            raise ValueError(
                f"RetryPolicy.attempt_timeout must be above 0 seconds or None, not {self.attempt_timeout!r}"
            )


class UseClientDefault:
    """The type of ``USE_CLIENT_DEFAULT``: a per-call option given this takes the client's own setting."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "USE_CLIENT_DEFAULT"

    def __reduce__(self) -> str:
        return "USE_CLIENT_DEFAULT"  # one instance, pickled by name


USE_CLIENT_DEFAULT = UseClientDefault()
"""A method's ``retry=`` when not given: the policy given to ``connect`` (``None`` there means no retries)."""


_KEY = re.compile(r"[0-9a-z_.-]+")


def normalize_metadata(metadata: Metadata | None) -> tuple[tuple[str, str], ...]:
    """``(key, value)`` pairs with keys in lower case (HTTP/2 header names); a key gRPC would refuse,
    a reserved one, or a value that is not a printable ASCII string is a ``ValueError`` here rather
    than a failure of every call later."""
    if not metadata:
        return ()
    pairs = metadata.items() if isinstance(metadata, Mapping) else metadata
    result = []
    for key, value in pairs:
        name = str(key).lower()
        if not _KEY.fullmatch(name) or name.startswith("grpc-") or name.endswith("-bin"):
            raise ValueError(f"metadata key {key!r}: use lower-case letters, digits, '-', '_', '.' (no grpc- or -bin)")
        if not isinstance(value, str) or not value.isascii() or not value.isprintable():
            raise ValueError(f"metadata {name!r}: the value must be a printable ASCII string, not {value!r}")
        result.append((name, value))
    return tuple(result)

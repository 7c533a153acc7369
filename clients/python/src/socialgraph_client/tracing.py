"""The caller's trace context, sent with every call so that the service's spans continue the caller's
trace: OpenTelemetry's propagators write it (W3C ``traceparent`` and ``tracestate``, and
``baggage``, unless ``OTEL_PROPAGATORS`` names others) into the call's metadata.

It needs ``opentelemetry-api``: the ``otel`` extra, installed from a checkout of the repository as
the package itself is (``pip install './clients/python[otel]'``), or any OpenTelemetry setup of the
caller's own. Without it, or with no span current and no baggage set, nothing is added. A
propagator that raises, or writes an entry gRPC metadata cannot carry (``grpc-trace-bin``), never
fails a call: the call goes without it, and a warning is logged now and then. A call whose
metadata already has any key the propagator writes (its own ``traceparent``) gets none of them.

``connect(tracing=...)`` replaces it with another ``Propagator``, or turns it off with None (for
instance when an OpenTelemetry gRPC client interceptor, given in ``interceptors=``, sends the
context itself).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

__all__ = ["Propagator", "otel_context"]

Propagator = Callable[[dict[str, str]], None]
"""Writes the current context into a call's metadata: a dict of header names (lower case) to values."""


def otel_context(carrier: dict[str, str]) -> None:
    """The default ``tracing=``: ``opentelemetry.propagate.inject`` when ``opentelemetry-api`` is
    installed (looked up at the first call, not at import), else nothing."""
    inject = _find_inject()
    if inject is not None:
        inject(carrier)


@functools.cache
def _find_inject() -> Propagator | None:
    try:
        from opentelemetry.propagate import inject
    except ImportError:  # the otel extra is not installed: no context to send
        return None
    return inject

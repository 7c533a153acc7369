"""The spans of the account jobs: one per job run (``account_job <kind>``, a root span: a job is
taken from the registry, not inside a call) and one per batch it commits (``account_job <step>``),
under which the batch's DynamoDB and Redis calls nest. Attributes: the account
(``socialgraph.user_id``), the job's kind and generation, the step, side and size of a batch.
Whether they are made is decided once, when the job and its worker are built."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from graph_service.domain.accounts import Side
from graph_service.telemetry.tracing import current_span, enabled
from graph_service.telemetry.tracing import tracer as _tracer

if TYPE_CHECKING:  # OpenTelemetry is imported only when a span is made
    from opentelemetry.trace import Span, Tracer

__all__ = ["JobSpans"]


class JobSpans:
    """Spans of one job runner; each method a context manager that does nothing when off."""

    def __init__(self, tracer: Tracer | None = None, *, expected: tuple[type[Exception], ...] = ()) -> None:
        """``tracer``: None takes the process's, if it traces (else no span is made). ``expected``:
        exceptions that end a span as an outcome, not a failure (a job superseded by a later call):
        ``error.type`` without the error status (``telemetry/tracing.current_span``)."""
        self._tracer = tracer if tracer is not None else (_tracer(__name__) if enabled() else None)
        self._expected = expected

    def run(self, user_id: int, kind: str, gen: int) -> contextlib.AbstractContextManager[Span | None]:
        """The span of one run of an account's job (``kind``: ``deactivating``, ``reactivating`` or
        ``deleting``)."""
        if self._tracer is None:
            return contextlib.nullcontext()
        attributes: dict[str, str | int] = {
            "socialgraph.user_id": str(user_id),
            "socialgraph.account_job.kind": kind,
            "socialgraph.account_job.gen": gen,
        }
        return current_span(self._tracer, f"account_job {kind}", expected=self._expected, attributes=attributes)

    @staticmethod
    def ended(span: Span | None, outcome: str, moved: int) -> None:
        """Note on a run's span how it ended (``finished``, ``superseded``) and the items it moved
        (a failure shows as the exception that left the span)."""
        if span is not None:
            span.set_attributes({"socialgraph.account_job.outcome": outcome, "socialgraph.account_job.moved": moved})

    def batch(
        self, step: str, user_id: int, kind: str, size: int, side: Side | str | None = None
    ) -> contextlib.AbstractContextManager[Span | None]:
        """The span of one batch of a job: ``step`` (``archive``, ``purge``, ``restore``,
        ``drop_archived``, ``drop_own``, ``drop_reverse``) of ``size`` items of ``side`` (a side of
        the graph, or the sort-key prefix of the items dropped)."""
        if self._tracer is None:
            return contextlib.nullcontext()
        attributes: dict[str, str | int] = {
            "socialgraph.user_id": str(user_id),
            "socialgraph.account_job.kind": kind,
            "socialgraph.account_job.step": step,
            "socialgraph.account_job.batch_size": size,
        }
        if side is not None:
            attributes["socialgraph.account_job.side"] = side.name.lower() if isinstance(side, Side) else side
        return current_span(self._tracer, f"account_job {step}", expected=self._expected, attributes=attributes)

"""``detached``: background work keeps nothing of the context of the call that started it."""

from __future__ import annotations

import contextvars

import structlog
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from graph_service.domain.tasks import detached

MARK: contextvars.ContextVar[str] = contextvars.ContextVar("mark", default="none")


async def test_a_detached_task_sees_no_span_no_bound_log_field_and_no_variable_of_its_starter() -> None:
    tracer = TracerProvider().get_tracer("test")

    async def seen() -> tuple[bool, dict[str, object], str]:
        return trace.get_current_span().get_span_context().is_valid, structlog.contextvars.get_contextvars(), MARK.get()

    with tracer.start_as_current_span("request"), structlog.contextvars.bound_contextvars(request_id="r1"):
        MARK.set("request")
        task = detached(seen(), name="owed")
        assert task.get_name() == "owed"
        assert await task == (False, {}, "none")
        assert trace.get_current_span().get_span_context().is_valid  # the starter's own context is intact

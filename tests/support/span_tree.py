"""Spans as a test reads them, whatever recorded them (the SDK's in-memory exporter in a unit test,
the OTLP receiver in an end-to-end one), their parent links, and the tree they make, rendered to
read in a failure message or to quote (children under their parent, in the order they started)::

    process t1_tweets stream  (consumer, socialgraph-relay)
    └── send t1_tweets  (producer, socialgraph-relay)
        └── process t1_tweets  (consumer, socialgraph-fanout)
            └── EVALSHA  (client, socialgraph-fanout)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from tests.support.otlp_receiver import ReceivedSpan

__all__ = ["Span", "ancestors", "from_received", "from_sdk", "memory_tracer", "render", "the_span"]


@dataclass(frozen=True)
class Span:
    name: str
    trace_id: str
    """32 hex digits."""
    span_id: str
    """16 hex digits."""
    parent_id: str | None
    kind: str
    """``internal``, ``server``, ``client``, ``producer`` or ``consumer``."""
    service: str
    start_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.name}  ({self.kind}, {self.service})"


def memory_tracer(service: str = "test") -> tuple[Tracer, InMemorySpanExporter]:
    """A tracer of a provider of the test's own (the process-wide one stays unset), and where its
    spans go as each ends."""
    exporter = InMemorySpanExporter()
    tracers = TracerProvider(resource=Resource.create({"service.name": service}))
    tracers.add_span_processor(SimpleSpanProcessor(exporter))
    return tracers.get_tracer("test"), exporter


def from_sdk(spans: Iterable[ReadableSpan]) -> list[Span]:
    """What the SDK's ``InMemorySpanExporter`` holds."""
    found = []
    for span in spans:
        context, parent = span.context, span.parent
        assert context is not None
        found.append(
            Span(
                name=span.name,
                trace_id=f"{context.trace_id:032x}",
                span_id=f"{context.span_id:016x}",
                parent_id=None if parent is None else f"{parent.span_id:016x}",
                kind=span.kind.name.lower(),
                service=str(span.resource.attributes.get("service.name", "")),
                start_ns=span.start_time or 0,
                attributes=dict(span.attributes or {}),
            )
        )
    return found


def from_received(spans: Iterable[ReceivedSpan]) -> list[Span]:
    """What the OTLP receiver of the test was sent (``tests/support/otlp_receiver.py``)."""
    return [
        Span(
            name=span.name,
            trace_id=span.trace_id,
            span_id=span.span_id,
            parent_id=span.parent_id or None,
            kind=span.kind.lower(),
            service=span.service,
            start_ns=span.start_ns,
            attributes=dict(span.attributes),
        )
        for span in spans
    ]


def the_span(spans: Sequence[Span], matches: Callable[[Span], bool], what: str) -> Span:
    """The one span that ``matches``; the failure names ``what`` and shows the tree."""
    found = [span for span in spans if matches(span)]
    assert len(found) == 1, f"{len(found)} spans are {what}:\n{render(spans)}"
    return found[0]


def ancestors(spans: Sequence[Span], span: Span) -> list[Span]:
    """The span's parent, its parent's parent, ... as far as ``spans`` hold them."""
    by_id = {s.span_id: s for s in spans}
    chain = []
    parent = by_id.get(span.parent_id or "")
    while parent is not None and parent not in chain:
        chain.append(parent)
        parent = by_id.get(parent.parent_id or "")
    return chain


def render(spans: Sequence[Span]) -> str:
    """Each trace as a tree (children under their parent, in the order they started); a span whose
    parent is not among ``spans`` is a root, marked with its parent's ID."""
    ids = {span.span_id for span in spans}
    children: dict[str | None, list[Span]] = {}
    for span in sorted(spans, key=lambda s: s.start_ns):
        parent = span.parent_id if span.parent_id in ids else None
        children.setdefault(parent, []).append(span)
    lines: list[str] = []

    def walk(span: Span, prefix: str, last: bool, root: bool) -> None:
        missing = f"  [parent {span.parent_id} not seen]" if root and span.parent_id else ""
        lines.append(f"{prefix}{'' if root else ('└── ' if last else '├── ')}{span}{missing}")
        below = children.get(span.span_id, [])
        for n, child in enumerate(below):
            walk(child, prefix if root else prefix + ("    " if last else "│   "), n == len(below) - 1, False)

    for root in children.get(None, []):
        walk(root, "", True, True)
    return "\n".join(lines)

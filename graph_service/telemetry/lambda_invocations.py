"""The figures of one Lambda invocation of a stream trigger, written as one EMF line (``emf.py``) when
it ends, whether it succeeded or raised: the Lambda variants' stand-in for the ``/metrics`` endpoint
of ``socialgraph counters`` and ``socialgraph relay``.

Every line has, under the ``Function`` dimension (the function's name) in namespace ``Socialgraph``:

- ``RecordsRead`` (Count): the stream records of the event (``socialgraph_stream_records_read_total``);
- ``StreamLagSeconds`` (Seconds): at the start of the invocation, now minus the
  ``ApproximateCreationDateTime`` of the event's oldest record (``socialgraph_stream_lag_seconds``;
  absent when no record has one);
- ``InvocationFailures`` (Count): 1 when the invocation raised (Lambda retries the batch, bisected), else 0;
- ``BatchItemFailures`` (Count): the records the handler's answer asked Lambda to retry, when it answered;
- ``DurationMilliseconds`` (Milliseconds): the invocation's own time, client setup included;

and what the handler adds (``count``) from its work. Properties, for Logs Insights: ``Component``
(``counters``, ``relay``), ``RequestId``, and the build's ``Version`` and ``Commit``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any

import structlog

from graph_service.telemetry.build_info import build_info
from graph_service.telemetry.emf import Figure, emf_line
from graph_service.telemetry.streams import record_created_at

__all__ = ["LambdaInvocation"]

log = structlog.get_logger(__name__)


def _print(line: str) -> None:
    print(line, flush=True)  # stdout is the function's log, where CloudWatch reads EMF from


class LambdaInvocation:
    """``with LambdaInvocation(...) as invocation:`` around one invocation; ``count`` what it did."""

    def __init__(
        self,
        function: str,
        component: str,
        event: Mapping[str, Any],
        *,
        request_id: str = "",
        write: Callable[[str], None] = _print,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``function``: the ``Function`` dimension (the function's name); ``event``: the Lambda
        event (its ``Records``); ``write``: where the line goes (stdout, which Lambda sends to
        CloudWatch Logs)."""
        self._function = function
        self._component = component
        self._request_id = request_id
        self._write = write
        self._clock = clock
        records = event.get("Records")
        self._records: Sequence[Any] = records if isinstance(records, list) else []
        self._figures: list[Figure] = []
        self._started = 0.0

    def count(self, name: str, value: float, unit: str = "Count") -> None:
        """A figure of this invocation's work (written with the line at the end)."""
        self._figures.append(Figure(name, value, unit))

    def count_each(self, done: Mapping[str, float], names: Mapping[str, str]) -> None:
        """``count`` each figure of ``done`` that ``names`` names (key -> metric name), in that order."""
        for key, name in names.items():
            if key in done:
                self.count(name, done[key])

    def answered(self, response: Mapping[str, Any]) -> None:
        """The handler's answer: its ``batchItemFailures`` are counted."""
        self.count("BatchItemFailures", len(response.get("batchItemFailures", [])))

    def __enter__(self) -> LambdaInvocation:
        self._started = time.perf_counter()
        now = self._clock()
        self.count("RecordsRead", len(self._records))
        created = [t for t in (record_created_at(r) for r in self._records if isinstance(r, dict)) if t is not None]
        if created:
            self.count("StreamLagSeconds", max(0.0, now - min(created)), "Seconds")
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.count("InvocationFailures", 0 if error is None else 1)
        self.count("DurationMilliseconds", round((time.perf_counter() - self._started) * 1000, 3), "Milliseconds")
        build = build_info()
        properties = {"Component": self._component, "Version": build.version, "Commit": build.commit}
        if self._request_id:
            properties["RequestId"] = self._request_id
        try:
            line = emf_line(
                self._figures,
                {"Function": self._function},
                timestamp_ms=int(self._clock() * 1000),
                properties=properties,
            )
            self._write(line)
        except Exception:  # the figures are not worth the batch: a committed batch must not be retried for them
            log.exception("emf_line_failed", function=self._function)

"""``socialgraph serve`` with every Prometheus update made a no-op: the baseline of ``bench.metrics_overhead``.

Only the benchmark runs this. The service is built exactly as ``serve`` builds it (same interceptor,
same cache, same /metrics endpoint); what is taken away is the work of counting: ``Counter.inc``,
``Gauge.inc/dec/set`` and ``Histogram.observe`` return at once.

Limitation: only those updates are removed. The rest of the metric code on the request path stays
in this baseline: the interceptor's clock reads and its lookup of the (method, caller) children
(a dict lookup per call, ``labels()`` on a call's first status code), and the cache's
``labels``-bound children and per-kind dict lookups. The throughput ratio therefore measures the
updates' cost, not everything metrics cost; ``bench.metrics_overhead`` says so in its output
(``baseline_note``), and its ``implied_ratio`` times the metric objects' per-call code (lookups
included) in-process instead.

Run: .venv/bin/python -m bench.serve_unmetered (reads the same SG_* variables as ``serve``)
"""

from __future__ import annotations

import sys

from prometheus_client import Counter, Gauge, Histogram

from graph_service.entrypoints.cli import main


def _nothing(*args: object, **kwargs: object) -> None:
    return None


def unmeter() -> None:
    """Make every metric update a no-op, in this process only (label lookups stay: see above)."""
    for kind, methods in ((Counter, ("inc",)), (Gauge, ("inc", "dec", "set")), (Histogram, ("observe",))):
        for method in methods:
            setattr(kind, method, _nothing)


if __name__ == "__main__":
    unmeter()
    sys.exit(main(["serve"]))

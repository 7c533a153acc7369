"""``socialgraph serve`` with every Prometheus update made a no-op: the baseline of ``bench.metrics_overhead``.

Only the benchmark runs this. The service is built exactly as ``serve`` builds it (same interceptor,
same cache, same /metrics endpoint); what is taken away is the work of counting: ``Counter.inc``,
``Gauge.inc/dec/set`` and ``Histogram.observe`` return at once. The ratio of the two services'
throughput is then the cost of the metrics on the request path.

Run: .venv/bin/python -m bench.serve_unmetered (reads the same SG_* variables as ``serve``)
"""

from __future__ import annotations

import sys

from prometheus_client import Counter, Gauge, Histogram

from graph_service.entrypoints.cli import main


def _nothing(*args: object, **kwargs: object) -> None:
    return None


def unmeter() -> None:
    """Make every metric update a no-op, in this process only."""
    for kind, methods in ((Counter, ("inc",)), (Gauge, ("inc", "dec", "set")), (Histogram, ("observe",))):
        for method in methods:
            setattr(kind, method, _nothing)


if __name__ == "__main__":
    unmeter()
    sys.exit(main(["serve"]))

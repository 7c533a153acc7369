"""CloudWatch Embedded Metric Format (EMF): metrics written as one JSON log line, which CloudWatch Logs
turns into CloudWatch metrics. What a Lambda function has instead of a ``/metrics`` endpoint.

The line's shape, as the specification gives it
(https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html)::

    {"_aws": {"Timestamp": 1718010001000,
              "CloudWatchMetrics": [{"Namespace": "Socialgraph",
                                     "Dimensions": [["Function"]],
                                     "Metrics": [{"Name": "RecordsRead", "Unit": "Count"}, ...]}]},
     "Function": "socialgraph-counters", "RecordsRead": 100, ..., "Commit": "..."}

Each metric's value and each dimension's value is a member of the root object named after it; other
members (``properties``) are kept in the log line for Logs Insights, not made metrics. A line this
module cannot write correctly (an unknown unit, a name used twice, a value that is not a finite
number) is refused with ``ValueError`` rather than written and silently dropped by CloudWatch.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["NAMESPACE", "UNITS", "Figure", "emf_document", "emf_line"]

NAMESPACE = "Socialgraph"
UNITS = frozenset(
    {
        *("Seconds", "Microseconds", "Milliseconds"),
        *("Bytes", "Kilobytes", "Megabytes", "Gigabytes", "Terabytes"),
        *("Bits", "Kilobits", "Megabits", "Gigabits", "Terabits"),
        *("Percent", "Count", "None"),
        *("Bytes/Second", "Kilobytes/Second", "Megabytes/Second", "Gigabytes/Second", "Terabytes/Second"),
        *("Bits/Second", "Kilobits/Second", "Megabits/Second", "Gigabits/Second", "Terabits/Second"),
        "Count/Second",
    }
)
"""The units CloudWatch accepts (``StandardUnit``)."""
_MAX_METRICS = 100
_MAX_DIMENSIONS = 30
_MAX_NAME = 1024


@dataclass(frozen=True)
class Figure:
    """One metric value of the line."""

    name: str
    value: float
    unit: str = "Count"


def _check_name(name: str, what: str) -> None:
    if not name or len(name) > _MAX_NAME or name.isspace():
        raise ValueError(f"EMF: a {what} name must have 1 to {_MAX_NAME} characters, not {name!r}")


def emf_document(
    figures: Sequence[Figure],
    dimensions: Mapping[str, str],
    *,
    timestamp_ms: int,
    namespace: str = NAMESPACE,
    properties: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The EMF object of ``figures`` under one dimension set (``dimensions``: name -> value)."""
    _check_name(namespace, "namespace")
    if not figures or len(figures) > _MAX_METRICS:
        raise ValueError(f"EMF: 1 to {_MAX_METRICS} metrics in a line, not {len(figures)}")
    if len(dimensions) > _MAX_DIMENSIONS:
        raise ValueError(f"EMF: at most {_MAX_DIMENSIONS} dimensions, not {len(dimensions)}")
    document: dict[str, Any] = {}
    for name, value in dimensions.items():
        _check_name(name, "dimension")
        if not isinstance(value, str) or not 0 < len(value) <= _MAX_NAME:
            raise ValueError(f"EMF: dimension {name} must be a string of 1 to {_MAX_NAME} characters, not {value!r}")
        document[name] = value
    for figure in figures:
        _check_name(figure.name, "metric")
        if figure.unit not in UNITS:
            raise ValueError(f"EMF: {figure.name}: unknown unit {figure.unit!r}")
        number = isinstance(figure.value, int | float) and not isinstance(figure.value, bool)
        if not number or not math.isfinite(figure.value):
            raise ValueError(f"EMF: {figure.name} must be a finite number, not {figure.value!r}")
        if figure.name in document:
            raise ValueError(f"EMF: {figure.name} is named twice")
        document[figure.name] = figure.value
    for name, value in (properties or {}).items():
        if name in document or name == "_aws":
            raise ValueError(f"EMF: property {name} clashes with a metric, a dimension or _aws")
        document[name] = value
    document["_aws"] = {
        "Timestamp": timestamp_ms,
        "CloudWatchMetrics": [
            {
                "Namespace": namespace,
                "Dimensions": [list(dimensions)],
                "Metrics": [{"Name": figure.name, "Unit": figure.unit} for figure in figures],
            }
        ],
    }
    return document


def emf_line(
    figures: Sequence[Figure],
    dimensions: Mapping[str, str],
    *,
    timestamp_ms: int,
    namespace: str = NAMESPACE,
    properties: Mapping[str, Any] | None = None,
) -> str:
    """``emf_document`` as one line of compact JSON."""
    document = emf_document(figures, dimensions, timestamp_ms=timestamp_ms, namespace=namespace, properties=properties)
    return json.dumps(document, separators=(",", ":"), allow_nan=False)

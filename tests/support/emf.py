"""Checking a CloudWatch Embedded Metric Format line against what the specification says a line MUST be
(https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html),
so that a line CloudWatch would reject (and silently not turn into metrics) fails a test instead."""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["emf_lines", "metrics_of", "parse_emf"]

UNITS = {
    *("Seconds", "Microseconds", "Milliseconds", "Bytes", "Kilobytes", "Megabytes", "Gigabytes", "Terabytes"),
    *("Bits", "Kilobits", "Megabits", "Gigabits", "Terabits", "Percent", "Count", "Bytes/Second"),
    *("Kilobytes/Second", "Megabytes/Second", "Gigabytes/Second", "Terabytes/Second", "Bits/Second"),
    *("Kilobits/Second", "Megabits/Second", "Gigabits/Second", "Terabits/Second", "Count/Second", "None"),
}
"""The specification's Unit values."""


def _name(value: Any, what: str) -> None:
    assert isinstance(value, str), f"{what} is not a string: {value!r}"
    assert 1 <= len(value) <= 1024, f"{what} has {len(value)} characters"
    assert value.strip(), f"{what} is blank"


def _number(value: Any, what: str) -> None:
    assert isinstance(value, int | float), f"{what} is not a number: {value!r}"
    assert not isinstance(value, bool), f"{what} is a boolean"
    assert math.isfinite(value), f"{what} is not finite: {value!r}"


def parse_emf(line: str) -> dict[str, Any]:
    """The document of one EMF line; AssertionError naming the first rule it breaks."""
    document = json.loads(line)  # the whole line is one JSON object, nothing before or after
    assert isinstance(document, dict), "the root is not an object"
    meta = document.get("_aws")
    assert isinstance(meta, dict), "no _aws metadata object"
    assert set(meta) <= {"Timestamp", "CloudWatchMetrics"}, f"unknown _aws members: {set(meta)}"
    timestamp = meta.get("Timestamp")
    assert isinstance(timestamp, int), "Timestamp is not an integer"
    assert not isinstance(timestamp, bool), "Timestamp is a boolean"
    assert timestamp > 1_500_000_000_000, "Timestamp is not in milliseconds since the epoch"
    directives = meta.get("CloudWatchMetrics")
    assert isinstance(directives, list), "CloudWatchMetrics is not an array"
    assert directives, "CloudWatchMetrics is empty"
    for directive in directives:
        assert isinstance(directive, dict), directive
        assert set(directive) == {"Namespace", "Dimensions", "Metrics"}, directive
        _name(directive["Namespace"], "Namespace")
        dimension_sets = directive["Dimensions"]
        assert isinstance(dimension_sets, list), "Dimensions is not an array"
        for dimension_set in dimension_sets:
            assert isinstance(dimension_set, list), dimension_set
            assert len(dimension_set) <= 30, dimension_set
            for key in dimension_set:
                _name(key, "a dimension key")
                value = document.get(key)
                assert isinstance(value, str), f"dimension {key}: its root member is not a string: {value!r}"
                _name(value, f"dimension {key}'s value")
        metrics = directive["Metrics"]
        assert isinstance(metrics, list), "Metrics is not an array"
        assert 1 <= len(metrics) <= 100, f"Metrics has {len(metrics)} metrics, not 1 to 100"
        for metric in metrics:
            assert isinstance(metric, dict), metric
            assert set(metric) <= {"Name", "Unit", "StorageResolution"}, metric
            _name(metric.get("Name"), "a metric Name")
            assert metric.get("Unit", "None") in UNITS, f"{metric['Name']}: unit {metric.get('Unit')!r}"
            assert metric.get("StorageResolution", 60) in (1, 60), metric
            value = document.get(metric["Name"])
            values = value if isinstance(value, list) else [value]
            assert 1 <= len(values) <= 100, f"{metric['Name']}: {len(values)} values"
            for item in values:
                _number(item, f"metric {metric['Name']}")
    return document


def emf_lines(output: str) -> list[dict[str, Any]]:
    """The EMF documents among ``output``'s lines (those with an ``_aws`` member), each checked."""
    found = []
    for line in output.splitlines():
        if '"_aws"' in line:
            found.append(parse_emf(line))
    return found


def metrics_of(document: dict[str, Any]) -> dict[str, tuple[float, str]]:
    """Metric name -> (value, unit) of a checked document's one directive."""
    (directive,) = document["_aws"]["CloudWatchMetrics"]
    return {metric["Name"]: (document[metric["Name"]], metric["Unit"]) for metric in directive["Metrics"]}

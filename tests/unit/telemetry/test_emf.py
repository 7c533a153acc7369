"""Embedded Metric Format lines: the shape CloudWatch reads, and a clear refusal of a line it would drop."""

from __future__ import annotations

import math

import pytest

from graph_service.telemetry.emf import NAMESPACE, Figure, emf_line
from tests.support.emf import metrics_of, parse_emf

AT = 1_718_010_001_000


def test_a_line_is_one_document_of_the_specification_shape() -> None:
    line = emf_line(
        [Figure("RecordsRead", 12), Figure("StreamLagSeconds", 1.5, "Seconds")],
        {"Function": "socialgraph-counters"},
        timestamp_ms=AT,
        properties={"Component": "counters"},
    )
    assert "\n" not in line
    document = parse_emf(line)
    assert document["_aws"]["Timestamp"] == AT
    (directive,) = document["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == NAMESPACE == "Socialgraph"
    assert directive["Dimensions"] == [["Function"]]
    assert document["Function"] == "socialgraph-counters"
    assert metrics_of(document) == {"RecordsRead": (12, "Count"), "StreamLagSeconds": (1.5, "Seconds")}
    assert document["Component"] == "counters"


@pytest.mark.parametrize(
    ("figures", "dimensions", "properties", "says"),
    [
        ([Figure("Lag", 1, "Hours")], {"Function": "f"}, {}, "unknown unit 'Hours'"),
        ([Figure("Lag", math.nan)], {"Function": "f"}, {}, "finite number"),
        ([Figure("Lag", True)], {"Function": "f"}, {}, "finite number"),  # a boolean is no number here
        ([Figure("Lag", 1), Figure("Lag", 2)], {"Function": "f"}, {}, "named twice"),
        ([Figure("Function", 1)], {"Function": "f"}, {}, "named twice"),
        ([Figure("Lag", 1)], {"Function": ""}, {}, "dimension Function must be a string"),
        ([Figure("Lag", 1)], {"Function": "f"}, {"Lag": "x"}, "property Lag clashes"),
        ([Figure("Lag", 1)], {"Function": "f"}, {"_aws": {}}, "property _aws clashes"),
        ([], {"Function": "f"}, {}, "1 to 100 metrics"),
        ([Figure(f"M{i}", i) for i in range(101)], {"Function": "f"}, {}, "1 to 100 metrics"),
        ([Figure("", 1)], {"Function": "f"}, {}, "metric name"),
    ],
)
def test_a_line_cloudwatch_would_drop_is_refused(
    figures: list[Figure], dimensions: dict[str, str], properties: dict[str, object], says: str
) -> None:
    with pytest.raises(ValueError, match=says):
        emf_line(figures, dimensions, timestamp_ms=AT, properties=properties)

"""Which ``OTEL_*`` settings turn tracing on, and which are refused (``graph_service.telemetry.tracing``)."""

from __future__ import annotations

import pytest

from graph_service.telemetry.tracing import TracingConfigError, configure_tracing, exporter_names


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, ()),
        ({"OTEL_SERVICE_NAME": "graph"}, ()),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}, ("otlp",)),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4317"}, ("otlp",)),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, ("otlp",)),
        ({"OTEL_TRACES_EXPORTER": " console , otlp,console"}, ("console", "otlp")),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}, ()),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, ()),
        ({"OTEL_SDK_DISABLED": "false", "OTEL_TRACES_EXPORTER": "otlp"}, ("otlp",)),
    ],
)
def test_tracing_is_on_only_when_an_exporter_is_named(environ: dict[str, str], expected: tuple[str, ...]) -> None:
    assert exporter_names(environ) == expected


def test_an_exporter_the_service_does_not_ship_is_refused_by_name() -> None:
    with pytest.raises(TracingConfigError, match="zipkin"):
        exporter_names({"OTEL_TRACES_EXPORTER": "otlp,zipkin"})


def test_otlp_over_http_is_refused_at_start_rather_than_exporting_nothing() -> None:
    environ = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}
    with pytest.raises(TracingConfigError, match="only grpc"):
        configure_tracing("serve", environ)


def test_without_an_exporter_nothing_is_installed() -> None:
    assert configure_tracing("serve", {}) is False

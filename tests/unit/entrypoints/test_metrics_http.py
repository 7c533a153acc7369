"""The metrics endpoint of every process: routes, readiness answers, content negotiation, a taken port."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.openmetrics.exposition import CONTENT_TYPE_LATEST as OPENMETRICS
from prometheus_client.registry import Collector

from graph_service.domain.listening import PortInUse
from graph_service.entrypoints.metrics_http import metrics_address, start_metrics_server
from graph_service.settings import Settings
from tests.support.scrape import Answer, Scrape, get


def test_each_process_has_its_own_default_port_and_the_setting_wins() -> None:
    assert [metrics_address(Settings(), p) for p in ("serve", "counters", "relay", "fanout")] == [
        "127.0.0.1:9464",
        "127.0.0.1:9465",
        "127.0.0.1:9466",
        "127.0.0.1:9467",
    ]
    assert metrics_address(Settings(metrics_address="0.0.0.0:9100"), "relay") == "0.0.0.0:9100"


async def test_routes_and_readiness() -> None:
    registry = CollectorRegistry()
    Counter("things", "Things done.", registry=registry).inc(3)
    problem: list[str] = ["starting"]
    server = await start_metrics_server("127.0.0.1:0", registry, lambda: problem[0] or None)
    try:
        port = server.port
        assert server.url == f"http://127.0.0.1:{port}/metrics"
        metrics = await get(port, "/metrics")
        assert metrics.status == 200
        assert Scrape(metrics.body).value("things_total") == 3
        assert await get(port, "/healthz") == Answer(200, "ok\n")
        assert await get(port, "/readyz") == Answer(503, "starting\n")
        problem[0] = ""
        assert await get(port, "/readyz") == Answer(200, "ready\n")
        assert (await get(port, "/readyz?verbose=1")).status == 200
        assert (await get(port, "/")).status == 404
        assert (await get(port, "/metrics", method="DELETE")).status == 405
    finally:
        await server.aclose()


async def test_openmetrics_when_the_scraper_asks_for_it() -> None:
    server = await start_metrics_server("127.0.0.1:0", CollectorRegistry(), lambda: None)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text; version=1.0.0\r\n\r\n")
        raw = (await reader.read()).decode()
        writer.close()
        assert f"Content-Type: {OPENMETRICS}" in raw
        assert raw.endswith("# EOF\n")
    finally:
        await server.aclose()


async def test_a_taken_port_is_port_in_use_naming_the_address() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(PortInUse, match=rf"127\.0\.0\.1:{port}: address in use \(set SG_METRICS_ADDRESS\)"):
            await start_metrics_server(f"127.0.0.1:{port}", CollectorRegistry(), lambda: None)


async def test_a_client_that_never_finishes_its_request_does_not_stop_others() -> None:
    server = await start_metrics_server("127.0.0.1:0", CollectorRegistry(), lambda: None)
    try:
        _, idle = await asyncio.open_connection("127.0.0.1", server.port)
        idle.write(b"GET /metr")
        assert (await get(server.port, "/healthz")).status == 200
        idle.close()
    finally:
        await server.aclose()


class SlowCollector(Collector):
    """A collector that takes as long as the test says: a scrape of a registry with many series."""

    def __init__(self) -> None:
        self.collecting = threading.Event()
        self.release = threading.Event()
        self.finished = threading.Event()

    def collect(self) -> Iterator[Metric]:
        self.collecting.set()
        self.release.wait(timeout=5)
        self.finished.set()
        yield GaugeMetricFamily("slow_things", "Things slow to count.", value=1)


async def test_a_scrape_is_rendered_off_the_event_loop() -> None:
    """While /metrics is being rendered, the loop goes on: /healthz answers before the render ends
    (rendered on the loop, the loop would be stuck in it until the collector gave up)."""
    registry = CollectorRegistry()
    slow = SlowCollector()
    registry.register(slow)
    server = await start_metrics_server("127.0.0.1:0", registry, lambda: None)
    try:
        scraping = asyncio.create_task(get(server.port, "/metrics"))
        assert await asyncio.to_thread(slow.collecting.wait, 5)
        assert await asyncio.wait_for(get(server.port, "/healthz"), 2) == Answer(200, "ok\n")
        assert not slow.finished.is_set(), "the loop waited for the render"
        slow.release.set()
        scraped = await asyncio.wait_for(scraping, 5)
        assert scraped.status == 200
        assert Scrape(scraped.body).value("slow_things") == 1
    finally:
        slow.release.set()
        await server.aclose()

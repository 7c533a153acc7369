"""Each process's HTTP endpoint (``SG_METRICS_ADDRESS``): ``/metrics``, ``/healthz`` and ``/readyz``.

Served by the process's own event loop (``asyncio.start_server``), not a thread: an answer from
``/healthz`` proves the loop that does the work is turning. ``/readyz`` asks the runtime (for
``serve``: the gRPC server is SERVING; for a consumer: started, and progressing recently) and
answers 200 ``ready`` or 503 with the reason. ``/metrics`` is the text exposition of the process's
registry (OpenMetrics when the scraper asks for it), rendered in a worker thread
(``asyncio.to_thread``; prometheus_client's metrics are thread-safe): rendering walks every series,
which on ``serve`` would otherwise pause the RPCs sharing the loop for the length of a scrape.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
from collections.abc import Callable
from dataclasses import dataclass

import structlog
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from graph_service.domain.listening import PortInUse
from graph_service.settings import Settings

__all__ = ["DEFAULT_PORTS", "MetricsServer", "metrics_address", "start_metrics_server"]

log = structlog.get_logger(__name__)
DEFAULT_PORTS = {"serve": 9464, "counters": 9465, "relay": 9466, "fanout": 9467}
"""Each process's port when ``SG_METRICS_ADDRESS`` is empty (``socialgraph up`` uses the same)."""
Readiness = Callable[[], str | None]
"""None when ready, else why not."""
_REQUEST_SECONDS = 5.0
_MAX_HEAD = 16_384


def metrics_address(settings: Settings, process: str) -> str:
    """``SG_METRICS_ADDRESS``, or 127.0.0.1 and the process's own default port."""
    return settings.metrics_address or f"127.0.0.1:{DEFAULT_PORTS[process]}"


@dataclass
class MetricsServer:
    server: asyncio.Server
    port: int
    url: str

    async def aclose(self) -> None:
        self.server.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.server.wait_closed(), timeout=2.0)


def _response(status: str, content_type: str, body: bytes, *, head: bool = False) -> bytes:
    header = (
        f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
        "Cache-Control: no-store\r\nConnection: close\r\n\r\n"
    ).encode("ascii")
    return header if head else header + body


def _text(status: str, body: str, *, head: bool = False) -> bytes:
    return _response(status, "text/plain; charset=utf-8", f"{body}\n".encode(), head=head)


class _Handler:
    def __init__(self, registry: CollectorRegistry, ready: Readiness) -> None:
        self._registry = registry
        self._ready = ready

    async def answer(self, method: str, path: str, accept: str) -> bytes:
        head = method == "HEAD"
        if method not in {"GET", "HEAD"}:
            return _text("405 Method Not Allowed", "only GET and HEAD")
        route = path.split("?", 1)[0]
        if route == "/metrics":
            encode, content_type = choose_encoder(accept)
            body = await asyncio.to_thread(encode, self._registry)
            return _response("200 OK", content_type, body, head=head)
        if route == "/healthz":
            return _text("200 OK", "ok", head=head)
        if route == "/readyz":
            problem = self._ready()
            return (
                _text("200 OK", "ready", head=head)
                if problem is None
                else _text("503 Service Unavailable", problem, head=head)
            )
        return _text("404 Not Found", "not found: try /metrics, /healthz or /readyz", head=head)

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=_REQUEST_SECONDS)
            lines = head[:_MAX_HEAD].decode("latin-1").split("\r\n")
            parts = lines[0].split(" ")
            if len(parts) != 3:
                writer.write(_text("400 Bad Request", "bad request line"))
            else:
                accept = ""
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "accept":
                        accept = value.strip()
                writer.write(await self.answer(parts[0], parts[1], accept))
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass  # a client that went away or never finished its request gets nothing
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]") or "0.0.0.0", int(port)  # noqa: S104 - an empty host means every interface, as asked


async def start_metrics_server(address: str, registry: CollectorRegistry, ready: Readiness) -> MetricsServer:
    """Listen on ``address`` (host:port; port 0 picks a free one); ``PortInUse`` if it cannot be bound."""
    host, port = _host_port(address)
    try:
        server = await asyncio.start_server(_Handler(registry, ready), host, port, limit=_MAX_HEAD)
    except OSError as exc:
        reason = "address in use" if exc.errno == errno.EADDRINUSE else str(exc)
        raise PortInUse(f"cannot serve metrics on {address}: {reason} (set SG_METRICS_ADDRESS)") from exc
    bound = int(server.sockets[0].getsockname()[1])
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{bound}/metrics"
    log.info("metrics_serving", url=url)
    return MetricsServer(server, bound, url)

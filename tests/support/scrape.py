"""Reading a process's ``/metrics``, ``/healthz`` and ``/readyz`` over HTTP, as Prometheus would."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["Answer", "Scrape", "get", "scrape"]


@dataclass(frozen=True)
class Answer:
    status: int
    body: str


async def get(port: int, path: str, *, method: str = "GET") -> Answer:
    """One HTTP/1.1 request to 127.0.0.1:``port``; the server closes the connection after its answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(), timeout=10)
    finally:
        writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    return Answer(int(head.split(b" ", 2)[1]), body.decode())


class Scrape:
    """The samples of one scrape, by name and labels."""

    def __init__(self, text: str) -> None:
        self.samples: dict[str, list[tuple[dict[str, str], float]]] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                self.samples.setdefault(sample.name, []).append((dict(sample.labels), sample.value))

    def value(self, name: str, **labels: str) -> float | None:
        """The one sample of ``name`` whose labels include ``labels`` (None if there is none)."""
        found = [v for have, v in self.samples.get(name, []) if labels.items() <= have.items()]
        assert len(found) <= 1, f"{name} {labels} matches {len(found)} samples"
        return found[0] if found else None

    def values(self, name: str, **labels: str) -> dict[tuple[tuple[str, str], ...], float]:
        """Every sample of ``name`` whose labels include ``labels``, keyed by all its labels."""
        return {
            tuple(sorted(have.items())): v for have, v in self.samples.get(name, []) if labels.items() <= have.items()
        }


async def scrape(port: int) -> Scrape:
    answer = await get(port, "/metrics")
    assert answer.status == 200, answer
    return Scrape(answer.body)

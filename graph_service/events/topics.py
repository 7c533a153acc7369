"""The relay's and the fanout's verdict on the event topics: checked, never guessed.

``TopicWatch`` asks the brokers (a metadata request that never creates anything:
``graph_service.events.no_auto_create``) whether both topics exist with SG_TOPIC_PARTITIONS
partitions (its ``TopicCheck``, built from the settings by ``graph_service.events.kafka.topic_check``):
at start, every SG_TOPIC_CHECK_SECONDS, and at once after a Kafka error a process reports
(``suspect()``). Its verdict is the process's readiness (``problem()``: ``/readyz`` is 503 while a
topic is missing or mis-sized, or the brokers do not answer), the ``socialgraph_topic_ready`` gauge,
and a warning line per problem kind at most every ``interval`` seconds. ``wait_ok`` holds a process
back, with backoff, until ``create-topics`` has healed the topics: nothing restarts.

Each check uses a fresh admin client, so a broker that restarted (or moved) is found again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import structlog
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from graph_service.domain.retry import Backoff, pause, unless_stopped
from graph_service.telemetry.failures import FailureLog
from graph_service.telemetry.topics import TopicMetrics

__all__ = ["TopicCheck", "TopicWatch", "end_offsets", "topic_problems"]

log = structlog.get_logger(__name__)
UNKNOWN_TOPIC = 3
"""Kafka's UNKNOWN_TOPIC_OR_PARTITION error code."""
CHECK_TIMEOUT = 10.0
Describe = Callable[[dict[str, Any], list[str]], Awaitable[list[dict[str, object]]]]
"""An admin client's ``describe_topics``: (client options, topic names) -> the brokers' answer."""


@dataclass(frozen=True, slots=True)
class TopicCheck:
    """What a ``TopicWatch`` checks, and how often."""

    names: tuple[str, ...]
    """The event topics, tweets first."""
    partitions: int
    """SG_TOPIC_PARTITIONS: the partitions each topic must have."""
    check_seconds: float
    """SG_TOPIC_CHECK_SECONDS: the period of the checks."""
    brokers: str
    """SG_KAFKA_BOOTSTRAP_SERVERS, as the messages name them."""
    client_options: Callable[[], dict[str, Any]]
    """The keyword arguments of a fresh Kafka client (``graph_service.events.kafka.client_options``)."""


@dataclass(frozen=True, slots=True)
class Problem:
    kind: str
    """``missing``, ``partitions`` or ``unreachable``: the label of the failure counter."""
    text: str


def topic_problems(described: list[dict[str, object]], names: list[str], partitions: int) -> dict[str, Problem]:
    """What is wrong with each topic (absent: nothing), from an admin client's ``describe_topics``."""
    found = {str(entry["topic"]): entry for entry in described}
    problems: dict[str, Problem] = {}
    for name in names:
        entry = found.get(name)
        if entry is None or entry.get("error_code") == UNKNOWN_TOPIC:
            problems[name] = Problem("missing", f"topic {name} does not exist; run socialgraph create-topics")
            continue
        if entry.get("error_code"):
            problems[name] = Problem("unreachable", f"topic {name}: metadata error {entry['error_code']}")
            continue
        count = len(entry.get("partitions") or [])  # type: ignore[arg-type]  # the metadata's list of partitions
        if count != partitions:
            problems[name] = Problem(
                "partitions",
                f"topic {name} has {count} partitions, SG_TOPIC_PARTITIONS says {partitions};"
                " recreate it with socialgraph create-topics (or change the setting)",
            )
    return problems


async def _describe(options: dict[str, Any], names: list[str]) -> list[dict[str, object]]:
    admin = AIOKafkaAdminClient(**options, request_timeout_ms=int(CHECK_TIMEOUT * 1000))
    try:
        await admin.start()
        described: list[dict[str, object]] = await admin.describe_topics(names)
        return described
    finally:
        with contextlib.suppress(Exception):
            await admin.close()


async def end_offsets(options: dict[str, Any], topic: str, partitions: int) -> dict[int, int]:
    """The high-water mark of every partition of ``topic`` (checked to exist), from a group-less consumer
    built with the client ``options``."""
    consumer = AIOKafkaConsumer(**options, request_timeout_ms=int(CHECK_TIMEOUT * 1000))
    try:
        await consumer.start()
        wanted = [TopicPartition(topic, p) for p in range(partitions)]
        found = await consumer.end_offsets(wanted)
        return {tp.partition: int(offset) for tp, offset in found.items()}
    finally:
        with contextlib.suppress(Exception):
            await consumer.stop()


class TopicWatch:
    def __init__(
        self,
        config: TopicCheck,
        metrics: TopicMetrics | None = None,
        *,
        describe: Describe = _describe,
        interval: float = 10.0,
    ) -> None:
        """``describe`` is the broker question (swapped by unit tests); ``interval`` paces the log lines."""
        self._config = config
        self._names = list(config.names)
        self._metrics = metrics if metrics is not None else TopicMetrics()
        self._describe = describe
        self._failures = FailureLog(log, interval=interval)
        self._problems: dict[str, Problem] | None = None
        """None: not checked yet."""
        self._suspected = asyncio.Event()
        self._ok = asyncio.Event()
        self.checks = 0

    def problem(self) -> str | None:
        """Why the process is not ready as far as the topics go (None: both fine)."""
        if self._problems is None:
            return "the topics have not been checked yet"
        if not self._problems:
            return None
        return "; ".join(p.text for p in self._problems.values())

    @property
    def ok(self) -> bool:
        return self._problems == {}

    @property
    def wrong(self) -> bool:
        """A topic is missing or mis-sized (not merely a broker that did not answer the last check):
        what a consumer must leave its group for."""
        return any(p.kind != "unreachable" for p in (self._problems or {}).values())

    @property
    def unreachable(self) -> bool:
        """The last check got no answer from the brokers."""
        return bool(self._problems) and all(p.kind == "unreachable" for p in (self._problems or {}).values())

    def release(self) -> None:
        """Let the waiters of ``until_ok`` go, if the last check found both topics fine."""
        if self.ok:
            self._ok.set()

    async def until_ok(self) -> None:
        """Return once a check found both topics fine (at once if the last one did)."""
        await self._ok.wait()

    def hold(self) -> None:
        """Hold the waiters of ``until_ok`` until the next check (and its ``after_check``) has run:
        the relay calls it when it finds a log that went backwards, so nothing is produced before
        the topics are known to be right again. (A restarted local broker acknowledges records sent
        to a topic it no longer has, without showing the topic; a real one refuses them.)"""
        self._ok.clear()
        self._suspected.set()

    def suspect(self) -> None:
        """A Kafka error was seen: check again now rather than at the next period."""
        self._suspected.set()

    async def check(self, *, release: bool = True) -> bool:
        """Ask the brokers once; True when both topics are as configured. ``release=False`` leaves
        the waiters of ``until_ok`` waiting after a check that found the topics healed, until
        ``release()`` (the relay compares the logs with what it produced before producing more)."""
        self._suspected.clear()
        self.checks += 1
        try:
            described = await asyncio.wait_for(
                self._describe(self._config.client_options(), self._names), CHECK_TIMEOUT * 1.5
            )
            problems = topic_problems(described, self._names, self._config.partitions)
        except (KafkaError, OSError, TimeoutError) as exc:
            text = f"Kafka at {self._config.brokers} did not answer: {exc!r}"
            problems = {name: Problem("unreachable", text) for name in self._names}
        was_ok = self.ok
        self._problems = problems
        if problems:
            self._ok.clear()
        elif release:
            self._ok.set()
        for name in self._names:
            self._metrics.ready.labels(name).set(0 if name in problems else 1)
        for problem in {p.text: p for p in problems.values()}.values():
            self._metrics.check_failures.labels(problem.kind).inc()
            self._failures.failure("topic_problem", problem.kind, problem=problem.text)
        if not problems:
            for kind in ("missing", "partitions", "unreachable"):
                self._failures.recovered("topic_problem_healed", kind)
            if not was_ok:
                log.info("topics_ready", topics=self._names, partitions=self._config.partitions)
        return not problems

    async def wait_ok(self, stop: asyncio.Event) -> bool:
        """Check until both topics are fine (True) or ``stop`` is set (False), with backoff."""
        backoff = Backoff(base=0.5, cap=min(30.0, max(1.0, self._config.check_seconds * 2)))
        while not stop.is_set():
            if await self.check():
                return True
            if await pause(backoff.next_delay(), stop):
                break
        return False

    async def run(self, stop: asyncio.Event, after_check: Callable[[bool], Awaitable[None]] | None = None) -> None:
        """Check every SG_TOPIC_CHECK_SECONDS, or sooner when suspected (backing off while the
        suspicions keep coming), until ``stop``; after each check call ``after_check`` with the
        verdict (the relay compares the logs with what it produced), and only then let the waiters
        of ``until_ok`` go."""
        suspicions = Backoff(base=0.2, cap=max(0.2, self._config.check_seconds))
        while not stop.is_set():
            ok = await self.check(release=False)
            if after_check is not None:
                await after_check(ok)
            self.release()
            await unless_stopped(self._suspected.wait(), stop, timeout=self._config.check_seconds)
            if self._suspected.is_set():
                await pause(suspicions.next_delay(), stop)  # a burst of errors makes one check, not one each
            else:
                suspicions.reset()

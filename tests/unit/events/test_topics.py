"""The topic check's verdict: missing, mis-sized or unreachable topics make the process not ready."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from aiokafka.errors import KafkaConnectionError
from prometheus_client import CollectorRegistry

from graph_service.events.topics import TopicCheck, TopicWatch, topic_problems
from graph_service.telemetry.registry import process_registry
from graph_service.telemetry.topics import TopicMetrics

CHECK = TopicCheck(names=("tw", "gr"), partitions=6, check_seconds=0.01, brokers="localhost:9092", client_options=dict)


def described(name: str, partitions: int, error: int = 0) -> dict[str, object]:
    return {"topic": name, "error_code": error, "partitions": [{"partition": p} for p in range(partitions)]}


def test_both_topics_as_configured_are_fine() -> None:
    assert topic_problems([described("tw", 6), described("gr", 6)], ["tw", "gr"], 6) == {}


def test_missing_and_mis_sized_topics_say_what_to_do() -> None:
    problems = topic_problems([described("tw", 4), described("gr", 0, error=3)], ["tw", "gr"], 6)
    assert problems["tw"].kind == "partitions"
    assert "has 4 partitions, SG_TOPIC_PARTITIONS says 6" in problems["tw"].text
    assert problems["gr"].kind == "missing"
    assert "create-topics" in problems["gr"].text
    assert topic_problems([], ["tw"], 6)["tw"].kind == "missing"  # not in the answer at all


class Broker:
    def __init__(self) -> None:
        self.answers: list[list[dict[str, object]] | Exception] = []

    async def describe(self, options: dict[str, object], names: list[str]) -> list[dict[str, object]]:
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


def metric(registry: CollectorRegistry, topic: str) -> float | None:
    return registry.get_sample_value("socialgraph_topic_ready", {"topic": topic})


async def test_the_verdict_is_readiness_and_a_metric_and_heals_without_a_restart() -> None:
    registry = process_registry()
    broker = Broker()
    watch = TopicWatch(CHECK, TopicMetrics(registry), describe=broker.describe)
    assert watch.problem() == "the topics have not been checked yet"

    broker.answers = [KafkaConnectionError("no broker")]
    assert not await watch.check()
    assert watch.unreachable
    assert "did not answer" in (watch.problem() or "")
    assert metric(registry, "tw") == 0

    broker.answers = [[described("tw", 6), described("gr", 0, error=3)]]
    assert not await watch.check()
    assert not watch.unreachable
    assert "topic gr does not exist" in (watch.problem() or "")
    assert (metric(registry, "tw"), metric(registry, "gr")) == (1, 0)
    missing = registry.get_sample_value("socialgraph_topic_check_failures_total", {"kind": "missing"})
    assert missing == 1

    broker.answers = [[described("tw", 6), described("gr", 6)]]
    await asyncio.wait_for(watch.until_ok(), 0) if watch.ok else None
    assert await watch.check()
    assert watch.problem() is None
    await asyncio.wait_for(watch.until_ok(), 1)
    assert metric(registry, "gr") == 1


async def test_wait_ok_retries_until_create_topics_or_a_stop() -> None:
    broker = Broker()
    broker.answers = [[], [], [described("tw", 6), described("gr", 6)]]
    watch = TopicWatch(CHECK, describe=broker.describe)
    assert await asyncio.wait_for(watch.wait_ok(asyncio.Event()), 10)
    assert watch.checks == 3

    stop = asyncio.Event()
    broker.answers = [[]]
    waiting = asyncio.create_task(TopicWatch(CHECK, describe=broker.describe).wait_ok(stop))
    await asyncio.sleep(0)
    stop.set()
    assert await asyncio.wait_for(waiting, 5) is False


async def test_a_suspicion_makes_the_periodic_check_come_at_once() -> None:
    broker = Broker()
    broker.answers = [[described("tw", 6), described("gr", 6)]]
    slow = replace(CHECK, check_seconds=3600)
    watch = TopicWatch(slow, describe=broker.describe)
    seen: list[bool] = []

    async def after(ok: bool) -> None:
        seen.append(ok)

    stop = asyncio.Event()
    running = asyncio.create_task(watch.run(stop, after))
    deadline = asyncio.get_running_loop().time() + 5
    while watch.checks < 1:
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.01)
    broker.answers = [[described("tw", 6)]]
    watch.suspect()
    while watch.checks < 2:
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.01)
    stop.set()
    await asyncio.wait_for(running, 5)
    assert seen[:2] == [True, False]
    assert not watch.ok


async def test_hold_keeps_producers_waiting_until_the_next_check_and_its_comparison() -> None:
    broker = Broker()
    broker.answers = [[described("tw", 6), described("gr", 6)]]
    watch = TopicWatch(CHECK, describe=broker.describe)
    assert await watch.check()
    await asyncio.wait_for(watch.until_ok(), 1)  # fine: no wait
    watch.hold()  # a log went backwards
    waiting = asyncio.create_task(watch.until_ok())
    compared: list[bool] = []

    async def compare(ok: bool) -> None:
        assert not waiting.done()  # still held while the logs are compared
        compared.append(ok)

    stop = asyncio.Event()
    running = asyncio.create_task(watch.run(stop, compare))
    await asyncio.wait_for(waiting, 5)
    assert compared[:1] == [True]
    stop.set()
    await asyncio.wait_for(running, 5)

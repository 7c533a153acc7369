"""The local stack's broker keeps its data across a kill -9, as a real cluster does: topics with
their partition counts, records, and the consumer group's committed offsets. Its data lives in an
object store (s3rver, on disk), which may itself be killed and started again."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from socialgraph_devstack.processes import ManagedProcess, free_port, start_kafka_broker, start_object_store

from graph_service.events.kafka import client_options, ensure_topics
from graph_service.events.topics import TopicWatch
from graph_service.settings import Settings

pytestmark = pytest.mark.faults


@dataclass
class PersistentBroker:
    log_dir: Path
    data_dir: Path
    port: int
    store_port: int
    store: ManagedProcess
    broker: ManagedProcess

    def kill(self, process: ManagedProcess) -> None:
        os.kill(process.process.pid, signal.SIGKILL)
        process.process.wait(10)

    def restart(self, *, store_too: bool) -> None:
        self.kill(self.broker)
        if store_too:
            self.kill(self.store)
            self.store = start_object_store(self.store_port, self.log_dir, self.data_dir)
        self.broker = start_kafka_broker(self.port, self.log_dir, store_port=self.store_port)


@pytest.fixture
def persistent(tmp_path: Path) -> Iterator[PersistentBroker]:
    logs, data, store_port = tmp_path / "logs", tmp_path / "kafka", free_port()
    store = start_object_store(store_port, logs, data)
    port = free_port()
    value = PersistentBroker(logs, data, port, store_port, store, start_kafka_broker(port, logs, store_port=store_port))
    yield value
    value.broker.stop()
    value.store.stop()


async def test_topics_records_and_offsets_survive_kill_9(persistent: PersistentBroker) -> None:
    settings = replace(
        Settings(),
        kafka_bootstrap_servers=f"127.0.0.1:{persistent.port}",
        tweets_topic="tweets",
        graph_events_topic="graph",
        topic_partitions=3,
    )
    assert set(await ensure_topics(settings)) == {"tweets", "graph"}
    producer = AIOKafkaProducer(**client_options(settings), acks="all")
    await producer.start()
    try:
        for n in range(4):
            await producer.send_and_wait("tweets", f"record {n}".encode(), partition=1)
    finally:
        await producer.stop()
    group = AIOKafkaConsumer(**client_options(settings), group_id="fanout", enable_auto_commit=False)
    await group.start()
    try:
        group.assign([TopicPartition("tweets", 1)])
        await group.commit({TopicPartition("tweets", 1): 3})
    finally:
        await group.stop()

    for store_too in (False, True):
        persistent.restart(store_too=store_too)
        assert await TopicWatch(settings).check()  # both topics, 3 partitions each
        assert await ensure_topics(settings) == []  # nothing to create again
        reader = AIOKafkaConsumer(**client_options(settings), group_id=None, auto_offset_reset="earliest")
        await reader.start()
        try:
            reader.assign([TopicPartition("tweets", 1)])
            records = await reader.getmany(timeout_ms=5000)
            values = [r.value for batch in records.values() for r in batch]
        finally:
            await reader.stop()
        assert values == [f"record {n}".encode() for n in range(4)]
        group = AIOKafkaConsumer(**client_options(settings), group_id="fanout", enable_auto_commit=False)
        await group.start()
        try:
            group.assign([TopicPartition("tweets", 1)])
            assert await group.committed(TopicPartition("tweets", 1)) == 3
        finally:
            await group.stop()

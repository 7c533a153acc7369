"""The local stack's broker keeps its data across a kill -9 and across a clean stop, as a real cluster
does: topics with their partition counts, records, each partition's end, and the consumer group's
committed offsets. Its data lives in an object store (s3rver, on disk), which may itself be killed
and started again.

The broker (tansu) counts on the store for what S3 does and s3rver 3.7.1 did not: a conditional PUT
(``If-None-Match: *``, ``If-Match``) refused when it does not hold, listings in key order with the
millisecond of each object, listings of more than one page. Without the first, the first record
produced to a partition after a restart was written at offset 0 over the partition's first batch
(issue 22); without the second, ListOffsets answered the start of some batch of the last second.
``socialgraph_devstack.processes.S3_SEMANTICS`` adds them; the last test checks the store itself.
"""

from __future__ import annotations

import datetime
import os
import signal
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import boto3
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from botocore.config import Config
from botocore.exceptions import ClientError
from socialgraph_devstack.processes import (
    BROKER_BUCKET,
    ManagedProcess,
    free_port,
    start_kafka_broker,
    start_object_store,
)

from graph_service.events.kafka import client_options, ensure_topics, topic_check
from graph_service.events.topics import TopicWatch, end_offsets
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

    def stop_and_start(self) -> None:
        """A clean stop and start, as ``socialgraph up`` does them: SIGTERM to the broker, waited
        for, then to its store; the store started first."""
        self.broker.stop()
        self.store.stop()
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
        assert await TopicWatch(topic_check(settings)).check()  # both topics, 3 partitions each
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


def settings_of(persistent: PersistentBroker) -> Settings:
    return replace(
        Settings(),
        kafka_bootstrap_servers=f"127.0.0.1:{persistent.port}",
        tweets_topic="tweets",
        graph_events_topic="graph",
        topic_partitions=3,
    )


async def read_partition(settings: Settings, partition: int) -> list[bytes]:
    reader = AIOKafkaConsumer(**client_options(settings), group_id=None, auto_offset_reset="earliest")
    await reader.start()
    try:
        tp = TopicPartition("graph", partition)
        reader.assign([tp])
        end = (await reader.end_offsets([tp]))[tp]
        values: list[bytes] = []
        while await reader.position(tp) < end:
            batches = await reader.getmany(tp, timeout_ms=5000)
            assert batches, f"nothing read at {await reader.position(tp)} of {end}"
            values += [r.value for batch in batches.values() for r in batch if r.value is not None]
        return values
    finally:
        await reader.stop()


async def test_a_clean_stop_keeps_every_partition_s_end_and_the_next_record_follows_it(
    persistent: PersistentBroker,
) -> None:
    """Issue 22: after a clean stop and start, the first record produced to a partition, before
    anything read it, was acknowledged at offset 0 and written over the partition's first batch, and
    ListOffsets answered ends below the records acknowledged."""
    settings = settings_of(persistent)
    await ensure_topics(settings)
    producer = AIOKafkaProducer(**client_options(settings), acks="all")
    await producer.start()
    try:
        for n in range(6):  # six batches, most in the same second
            await producer.send_and_wait("graph", f"before {n}".encode(), partition=0)
        await producer.send_and_wait("graph", b"alone", partition=2)
    finally:
        await producer.stop()
    assert await end_offsets(client_options(settings), "graph", 3) == {0: 6, 1: 0, 2: 1}

    persistent.stop_and_start()

    producer = AIOKafkaProducer(**client_options(settings), acks="all")
    await producer.start()
    try:  # produced first: nothing has read partition 0 since the start
        after = await producer.send_and_wait("graph", b"after", partition=0)
    finally:
        await producer.stop()
    assert after.offset == 6
    assert await end_offsets(client_options(settings), "graph", 3) == {0: 7, 1: 0, 2: 1}
    assert await read_partition(settings, 0) == [f"before {n}".encode() for n in range(6)] + [b"after"]


def test_the_object_store_lists_and_writes_as_s3_does(persistent: PersistentBroker) -> None:
    """What the broker counts on, asked of the store alone: keys in order over several pages,
    ``LastModified`` to the millisecond, and conditional PUTs refused when they do not hold."""
    s3: Any = boto3.client(
        "s3",
        endpoint_url=f"http://127.0.0.1:{persistent.store_port}",
        aws_access_key_id="S3RVER",
        aws_secret_access_key="S3RVER",
        region_name="us-east-1",
        config=Config(retries={"max_attempts": 1}),
    )
    keys = [f"listing/{n:05d}.batch" for n in range(12)]
    with ThreadPoolExecutor(4) as pool:  # written out of order, as a partition's batches can be
        list(pool.map(lambda key: s3.put_object(Bucket=BROKER_BUCKET, Key=key, Body=b"x"), reversed(keys)))

    pages = s3.get_paginator("list_objects_v2").paginate(
        Bucket=BROKER_BUCKET, Prefix="listing/", PaginationConfig={"PageSize": 5}
    )  # three pages, each after the last key of the one before (the broker's are 1,000 keys long)
    listed = [item for page in pages for item in page.get("Contents", [])]
    assert [item["Key"] for item in listed] == keys
    stamps: list[datetime.datetime] = [item["LastModified"] for item in listed]
    assert any(stamp.microsecond for stamp in stamps)  # not rounded to the second

    created = s3.put_object(Bucket=BROKER_BUCKET, Key="state.json", Body=b"1", IfNoneMatch="*")
    with pytest.raises(ClientError) as refused:
        s3.put_object(Bucket=BROKER_BUCKET, Key="state.json", Body=b"2", IfNoneMatch="*")
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    s3.put_object(Bucket=BROKER_BUCKET, Key="state.json", Body=b"3", IfMatch=created["ETag"])
    with pytest.raises(ClientError) as stale:
        s3.put_object(Bucket=BROKER_BUCKET, Key="state.json", Body=b"4", IfMatch=created["ETag"])
    assert stale.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert s3.get_object(Bucket=BROKER_BUCKET, Key="state.json")["Body"].read() == b"3"

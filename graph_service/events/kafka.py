"""Kafka client options, topic names, the topic check's config and topic creation, from settings alone
(local broker or MSK with TLS/SASL): the one module of the event adapters that reads ``Settings``."""

from __future__ import annotations

import functools
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError
from aiokafka.helpers import create_ssl_context

from graph_service.events import no_auto_create
from graph_service.events.kinds import Topic
from graph_service.events.topics import TopicCheck
from graph_service.settings import Settings

__all__ = ["client_options", "ensure_topics", "topic_check", "topic_names"]

TOPIC_ALREADY_EXISTS = TopicAlreadyExistsError.errno
no_auto_create.apply()  # before any client of the project is built


def topic_names(settings: Settings) -> dict[Topic, str]:
    """The name of every event topic: tweets, then graph events."""
    return {Topic.TWEETS: settings.tweets_topic, Topic.GRAPH_EVENTS: settings.graph_events_topic}


def client_options(settings: Settings) -> dict[str, Any]:
    """Keyword arguments shared by every producer, consumer and admin client of the project."""
    options: dict[str, Any] = {
        "bootstrap_servers": [s.strip() for s in settings.kafka_bootstrap_servers.split(",") if s.strip()],
        "client_id": settings.kafka_client_id,
        "security_protocol": settings.kafka_security_protocol,
    }
    if settings.kafka_security_protocol in {"SSL", "SASL_SSL"}:
        options["ssl_context"] = create_ssl_context(cafile=settings.kafka_ssl_cafile or None)
    if settings.kafka_security_protocol.startswith("SASL"):
        options.update(
            sasl_mechanism=settings.kafka_sasl_mechanism,
            sasl_plain_username=settings.kafka_sasl_username,
            sasl_plain_password=settings.kafka_sasl_password,
        )
    return options


def topic_check(settings: Settings) -> TopicCheck:
    """What a ``TopicWatch`` checks (every event topic, SG_TOPIC_PARTITIONS) and how often."""
    return TopicCheck(
        names=tuple(topic_names(settings).values()),
        partitions=settings.topic_partitions,
        check_seconds=settings.topic_check_seconds,
        brokers=settings.kafka_bootstrap_servers,
        client_options=functools.partial(client_options, settings),
    )


async def ensure_topics(settings: Settings) -> list[str]:
    """Create the event topics unless they exist; returns the names created. Safe to repeat."""
    names = list(topic_names(settings).values())
    admin = AIOKafkaAdminClient(**client_options(settings))
    await admin.start()
    try:
        response = await admin.create_topics(
            [NewTopic(n, settings.topic_partitions, settings.topic_replication_factor) for n in names]
        )
    finally:
        await admin.close()
    created = []
    for topic, code, message in response.topic_errors:
        if code == 0:
            created.append(topic)
        elif code != TOPIC_ALREADY_EXISTS:
            raise RuntimeError(f"cannot create topic {topic}: {message} (error {code})")
    return created

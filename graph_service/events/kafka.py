"""Kafka client options and topic creation, from settings alone (local broker or MSK with TLS/SASL)."""

from __future__ import annotations

from typing import Any

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError
from aiokafka.helpers import create_ssl_context

from graph_service.events import no_auto_create
from graph_service.settings import Settings

__all__ = ["client_options", "ensure_topics", "topic_names"]

TOPIC_ALREADY_EXISTS = TopicAlreadyExistsError.errno
no_auto_create.apply()  # before any client of the project is built


def topic_names(settings: Settings) -> list[str]:
    """The project's event topics: tweets, then graph events."""
    return [settings.tweets_topic, settings.graph_events_topic]


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


async def ensure_topics(settings: Settings) -> list[str]:
    """Create the event topics unless they exist; returns the names created. Safe to repeat."""
    names = topic_names(settings)
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

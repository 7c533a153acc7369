"""No client of the project ever makes a broker create a topic by asking about it.

A Kafka metadata request (v4+) carries ``allow_auto_topic_creation``, and aiokafka always sends it as
true: a producer, a consumer or an admin client that asks about a missing topic makes a broker with
``auto.create.topics.enable`` create it, with the broker's default partition count instead of
SG_TOPIC_PARTITIONS (seen after a local broker restart: topics of 4 partitions instead of 6, and a
fanout retrying commits to partitions that no longer existed). Topics are made by ``create-topics``
alone, and checked by ``graph_service.events.topics``.

aiokafka has no option for it, so the request class its client and admin client build is replaced,
once, by one that always says false. Importing ``graph_service.events.kafka`` (which every Kafka
client of the project is configured through) applies it.
"""

from __future__ import annotations

from aiokafka import client as _client
from aiokafka.admin import client as _admin_client
from aiokafka.protocol.metadata import MetadataRequest

__all__ = ["NoAutoCreateMetadataRequest", "apply"]


class NoAutoCreateMetadataRequest(MetadataRequest):  # type: ignore[misc]  # aiokafka ships no stubs for it
    """A metadata request that never asks the broker to create the topics it names."""

    def __init__(self, topics: list[str] | None = None, allow_auto_topic_creation: bool | None = None) -> None:
        super().__init__(topics, allow_auto_topic_creation=False)


def apply() -> None:
    """Make aiokafka's clients (producer, consumer, admin) build only such requests. Idempotent."""
    _client.MetadataRequest = NoAutoCreateMetadataRequest
    _admin_client.MetadataRequest = NoAutoCreateMetadataRequest

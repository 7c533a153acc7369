"""Kafka client options come from settings alone: the local broker, MSK with TLS, MSK with SASL/SCRAM;
and so do the topic names and the topic check's config."""

from __future__ import annotations

import ssl

from graph_service.events.kafka import client_options, topic_check, topic_names
from graph_service.events.kinds import Topic
from graph_service.settings import Settings


def test_plaintext_by_default_with_every_bootstrap_server() -> None:
    options = client_options(Settings(kafka_bootstrap_servers="b-1:9092, b-2:9092,"))
    assert options["bootstrap_servers"] == ["b-1:9092", "b-2:9092"]
    assert options["security_protocol"] == "PLAINTEXT"
    assert "ssl_context" not in options
    assert "sasl_mechanism" not in options


def test_tls_uses_a_verifying_context() -> None:
    options = client_options(Settings(kafka_security_protocol="SSL"))
    context = options["ssl_context"]
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname


def test_sasl_scram_over_tls_carries_the_credentials() -> None:
    settings = Settings(
        kafka_security_protocol="SASL_SSL",
        kafka_sasl_mechanism="SCRAM-SHA-512",
        kafka_sasl_username="fanout",
        kafka_sasl_password="secret",
    )
    options = client_options(settings)
    assert options["security_protocol"] == "SASL_SSL"
    assert isinstance(options["ssl_context"], ssl.SSLContext)
    assert (options["sasl_mechanism"], options["sasl_plain_username"], options["sasl_plain_password"]) == (
        "SCRAM-SHA-512",
        "fanout",
        "secret",
    )


def test_the_topic_names_and_the_topic_check_come_from_the_settings() -> None:
    settings = Settings(
        tweets_topic="tw",
        graph_events_topic="gr",
        topic_partitions=4,
        topic_check_seconds=2.5,
        kafka_bootstrap_servers="b-1:9092",
    )
    assert topic_names(settings) == {Topic.TWEETS: "tw", Topic.GRAPH_EVENTS: "gr"}
    check = topic_check(settings)
    assert (check.names, check.partitions, check.check_seconds, check.brokers) == (("tw", "gr"), 4, 2.5, "b-1:9092")
    assert check.client_options() == client_options(settings)

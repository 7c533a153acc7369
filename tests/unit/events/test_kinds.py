"""The registry of event kinds: every kind complete and distinct, and its records read back as written."""

from __future__ import annotations

from typing import get_args

import pytest

from graph_service.events.kafka import topic_names
from graph_service.events.kinds import KINDS, Event, Topic, decode, encode, kind_of
from graph_service.events.records import EVENT_TYPE_HEADER, VERSION_HEADER
from graph_service.settings import Settings
from tests.support.event_examples import EXAMPLES

BY_NAME = {kind.name: kind for kind in KINDS}


def test_every_kind_is_distinct_in_name_message_and_event() -> None:
    assert len(BY_NAME) == len(KINDS)
    assert len({kind.event_type for kind in KINDS}) == len(KINDS)
    assert len({kind.event for kind in KINDS}) == len(KINDS)


def test_the_event_union_is_the_registry() -> None:
    """``Event`` (what ``Fanout.apply`` must handle, checked by mypy) names every kind's event, and only those."""
    assert set(get_args(Event)) == {kind.event for kind in KINDS}


def test_every_kind_has_an_example() -> None:
    assert set(EXAMPLES) == set(BY_NAME)


def test_every_topic_of_a_kind_has_a_configured_name() -> None:
    names = topic_names(Settings())
    assert set(names) == set(Topic)
    assert {kind.topic for kind in KINDS} <= set(names)


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_each_kind_reads_back_what_it_wrote(name: str) -> None:
    event, kind = EXAMPLES[name], BY_NAME[name]
    assert kind_of(event) is kind
    record = encode(event)
    assert record == kind.encode(event)
    assert record.key == str(kind.key(event)).encode()
    assert record.headers == [(EVENT_TYPE_HEADER, kind.event_type), (VERSION_HEADER, b"1")]
    assert kind.event_type == kind.message.DESCRIPTOR.full_name.encode()
    assert decode(record.headers, record.value) == event

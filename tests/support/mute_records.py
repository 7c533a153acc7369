"""DynamoDB Streams records of mute items (``M#``/``MT#`` in the muter's ``followers`` partition), as
GetRecords and a Lambda event give them, TTL deletions included: what the counters consumer and the
relay must let pass without counting or producing anything."""

from __future__ import annotations

from typing import Any

from graph_service.domain.models import Mute
from graph_service.store import items as it

__all__ = ["TTL_IDENTITY", "mute_record"]

TTL_IDENTITY = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
"""The ``userIdentity`` of a record whose item DynamoDB's TTL deleted."""


def mute_record(
    event: str, muter: int, mute: Mute, *, order: bool = False, ttl: bool = False, sequence: str = "100"
) -> dict[str, Any]:
    """One record (NEW_AND_OLD_IMAGES) of ``muter``'s ``M#`` (or, with ``order``, ``MT#``) item of
    ``mute``; ``ttl``: a REMOVE made by DynamoDB's TTL."""
    item_key = it.order_key(it.MUTE_ORDER, muter, mute) if order else it.key(it.MUTE, muter, mute.user_id)
    image = it.mute_item(item_key, mute)
    data: dict[str, Any] = {
        "Keys": item_key,
        "SequenceNumber": sequence,
        "SizeBytes": 120,
        "StreamViewType": "NEW_AND_OLD_IMAGES",
        "ApproximateCreationDateTime": 1_714_564_807.0,
    }
    if event in {"INSERT", "MODIFY"}:
        data["NewImage"] = image
    if event in {"REMOVE", "MODIFY"}:
        data["OldImage"] = image
    record: dict[str, Any] = {
        "eventID": f"mute-{sequence}",
        "eventName": event,
        "eventSource": "aws:dynamodb",
        "dynamodb": data,
    }
    if ttl:
        record["userIdentity"] = TTL_IDENTITY
    return record

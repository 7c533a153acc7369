"""Keys and transaction elements of the edge tables.

Every item of a pair of accounts lives in the ``followers`` table under the partition of the
account it concerns, so one strongly consistent BatchGetItem reads a whole relationship and
every rule can be a condition inside the transaction that writes:

=========================  ==========================================================
``followers`` pk=B, sk     meaning
=========================  ==========================================================
``E#<A>`` / ``T#<t>#<A>``  A follows B (membership / newest-first order); mirrored in
                           ``following`` pk=A as ``E#<B>`` / ``T#<t>#<B>``
``R#<A>`` / ``RT#<t>#<A>`` A's pending request to follow B (membership / order); mirrored in
                           ``following`` pk=A as ``R#<B>`` (so that A's own requests can be found)
``B#<A>``                  B blocks A
``M#<A>`` / ``MT#<t>#<A>`` B mutes A (membership / newest-first order): ``exp`` (when it
                           ends, 0: never), ``ntf`` (BOOL), and ``expires_at`` for TTL
``P``                      B's settings: ``private`` (BOOL)
``b#<A>`` / ``m#<A>``      A blocks / mutes B: the reverse of A's ``B#B`` / ``M#B`` (``other``=A;
                           a mute's carries its ``expires_at``), written and deleted with it, so
                           that a deleted account's blocks and mutes by others can be found
=========================  ==========================================================

``following`` pk=A, sk=``O``: ``n``, how many follows plus pending requests A has made, moved in
the same transaction as each of those items, so the following cap (SPEC §7.2) is one condition
on A's own item: exact under concurrency, and never an item that other accounts' follows touch.
"""

from __future__ import annotations

from typing import Any

from graph_service.domain.models import Edge, Mute
from graph_service.dynamodb.tables import TTL_ATTRIBUTE

__all__ = [
    "BLOCK",
    "BLOCKED_BY",
    "EDGE",
    "EDGE_ORDER",
    "FOLLOW_ELEMENTS",
    "MUTE",
    "MUTED_BY",
    "MUTE_ATTRIBUTES",
    "MUTE_ORDER",
    "OUTGOING",
    "REQUEST",
    "REQUEST_ORDER",
    "SETTINGS",
    "check_absent",
    "check_public",
    "count_outgoing",
    "delete",
    "delete_if_at",
    "edge_deletes",
    "edge_puts",
    "follow_elements",
    "item",
    "key",
    "mute_item",
    "order_key",
    "outgoing_key",
    "parse_mute",
    "put",
    "reclaimed_after",
    "request_deletes",
    "request_puts",
    "reverse_item",
    "settings_key",
]

EDGE = "E#"
EDGE_ORDER = "T#"
REQUEST = "R#"
REQUEST_ORDER = "RT#"
BLOCK = "B#"
MUTE = "M#"
MUTE_ORDER = "MT#"
BLOCKED_BY = "b#"
MUTED_BY = "m#"
SETTINGS = "P"
OUTGOING = "O"
ID_DIGITS = 20

Item = dict[str, Any]


def key(prefix: str, owner: int, other: int) -> Item:
    """A membership item: ``prefix`` is EDGE, REQUEST, BLOCK or MUTE."""
    return {"pk": {"N": str(owner)}, "sk": {"S": f"{prefix}{other:0{ID_DIGITS}d}"}}


def order_key(prefix: str, owner: int, edge: Edge) -> Item:
    """An ordering item: ``prefix`` is EDGE_ORDER, REQUEST_ORDER or MUTE_ORDER."""
    return {"pk": {"N": str(owner)}, "sk": {"S": f"{prefix}{edge.position}"}}


def settings_key(user_id: int) -> Item:
    return {"pk": {"N": str(user_id)}, "sk": {"S": SETTINGS}}


def outgoing_key(user_id: int) -> Item:
    """In the ``following`` table: the count of the user's follows plus pending requests."""
    return {"pk": {"N": str(user_id)}, "sk": {"S": OUTGOING}}


def count_outgoing(table: str, user_id: int, delta: int, *, cap: int = 0) -> Item:
    """Move the user's count of follows plus pending requests by ``delta``; when ``cap`` is set
    (and it grows), only if it stays at most ``cap``, a missing count being 0.

    ``ADD`` makes a missing ``n`` equal to ``delta``, so a user without the item may pass only when
    ``delta`` itself fits: ``Follow`` moves by 1, which always fits; an import moves by one
    follower's rows in a batch (up to 14), which may not. Then the condition is ``n <= cap - delta``
    alone: below 0, no count meets it, and a missing one never compares true."""
    element: Item = {
        "TableName": table,
        "Key": outgoing_key(user_id),
        "UpdateExpression": "ADD #n :delta",
        "ExpressionAttributeNames": {"#n": "n"},
        "ExpressionAttributeValues": {":delta": {"N": str(delta)}},
    }
    if cap and delta > 0:
        fits = "#n <= :most" if delta > cap else "attribute_not_exists(#n) OR #n <= :most"
        element["ConditionExpression"] = fits
        element["ExpressionAttributeValues"][":most"] = {"N": str(cap - delta)}
    return {"Update": element}


def item(item_key: Item, edge: Edge) -> Item:
    return {**item_key, "other": {"N": str(edge.user_id)}, "at": {"N": str(edge.at_us)}}


MUTE_ATTRIBUTES = {"#o": "other", "#at": "at", "#exp": "exp", "#ntf": "ntf"}
"""The names of a mute item's attributes, for a projection of ``#o, #at, #exp, #ntf``."""


def reclaimed_after(expires_us: int) -> int:
    """``expires_at`` of a mute ending at ``expires_us``: epoch seconds, rounded up, so that DynamoDB's
    TTL never reclaims a mute before it has ended."""
    return -(-expires_us // 1_000_000)


def mute_item(item_key: Item, mute: Mute) -> Item:
    """A mute's membership (``M#``) or order (``MT#``) item: the muted account, when the mute was
    made, when it ends (0: never) and the notifications flag; with an end, ``expires_at`` too."""
    body = {**item(item_key, mute), "exp": {"N": str(mute.expires_us)}, "ntf": {"BOOL": mute.notifications}}
    if mute.expires_us > 0:
        body[TTL_ATTRIBUTE] = {"N": str(reclaimed_after(mute.expires_us))}
    return body


def reverse_item(prefix: str, owner: int, other: int, *, expires_us: int = 0) -> Item:
    """``owner`` is blocked (``BLOCKED_BY``) or muted (``MUTED_BY``) by ``other``; a mute's reverse
    is reclaimed by TTL with the mute."""
    body = {**key(prefix, owner, other), "other": {"N": str(other)}}
    if expires_us > 0:
        body[TTL_ATTRIBUTE] = {"N": str(reclaimed_after(expires_us))}
    return body


def parse_mute(found: Item) -> Mute:
    """The mute an ``M#`` or ``MT#`` item holds."""
    return Mute(
        user_id=int(found["other"]["N"]),
        at_us=int(found["at"]["N"]),
        expires_us=int(found.get("exp", {}).get("N", "0")),
        notifications=bool(found.get("ntf", {}).get("BOOL", False)),
    )


def put(table: str, body: Item, *, only_new: bool = False) -> Item:
    element: Item = {"TableName": table, "Item": body}
    if only_new:
        element["ConditionExpression"] = "attribute_not_exists(pk)"
    return {"Put": element}


def delete(table: str, item_key: Item) -> Item:
    return {"Delete": {"TableName": table, "Key": item_key}}


def delete_if_at(table: str, item_key: Item, at_us: int) -> Item:
    """Delete a membership item only if it is still the one made at ``at_us``."""
    return {
        "Delete": {
            "TableName": table,
            "Key": item_key,
            "ConditionExpression": "#at = :at",
            "ExpressionAttributeNames": {"#at": "at"},
            "ExpressionAttributeValues": {":at": {"N": str(at_us)}},
        }
    }


def check_public(table: str, user_id: int) -> Item:
    """The account's settings item says it is public (or it has none)."""
    return {
        "ConditionCheck": {
            "TableName": table,
            "Key": settings_key(user_id),
            "ConditionExpression": "attribute_not_exists(#p) OR #p = :public",
            "ExpressionAttributeNames": {"#p": "private"},
            "ExpressionAttributeValues": {":public": {"BOOL": False}},
        }
    }


def check_absent(table: str, item_key: Item) -> Item:
    return {"ConditionCheck": {"TableName": table, "Key": item_key, "ConditionExpression": "attribute_not_exists(pk)"}}


FOLLOW_ELEMENTS = 7
"""How many elements ``follow_elements`` returns (the outgoing count's update comes on top)."""


def edge_puts(followers: str, following: str, follower_id: int, followee_id: int, at_us: int) -> list[Item]:
    """The four items of a follow edge: ``E#`` (only if new) and ``T#`` in each table."""
    made, mirror = Edge(follower_id, at_us), Edge(followee_id, at_us)
    return [
        put(followers, item(key(EDGE, followee_id, follower_id), made), only_new=True),
        put(followers, item(order_key(EDGE_ORDER, followee_id, made), made)),
        put(following, item(key(EDGE, follower_id, followee_id), mirror), only_new=True),
        put(following, item(order_key(EDGE_ORDER, follower_id, mirror), mirror)),
    ]


def edge_deletes(followers: str, following: str, follower_id: int, followee_id: int, at_us: int) -> list[Item]:
    """The four items of the follow edge made at ``at_us`` deleted (its ``E#`` only if it is still that one)."""
    return [
        delete_if_at(followers, key(EDGE, followee_id, follower_id), at_us),
        delete(followers, order_key(EDGE_ORDER, followee_id, Edge(follower_id, at_us))),
        delete(following, key(EDGE, follower_id, followee_id)),
        delete(following, order_key(EDGE_ORDER, follower_id, Edge(followee_id, at_us))),
    ]


def request_puts(followers: str, following: str, follower_id: int, followee_id: int, at_us: int) -> list[Item]:
    """A pending request's ``R#`` (only if new) and ``RT#`` in ``followers``, and its mirror ``R#`` in
    ``following`` (the requester's own requests)."""
    request, mirror = Edge(follower_id, at_us), Edge(followee_id, at_us)
    return [
        put(followers, item(key(REQUEST, followee_id, follower_id), request), only_new=True),
        put(followers, item(order_key(REQUEST_ORDER, followee_id, request), request)),
        put(following, item(key(REQUEST, follower_id, followee_id), mirror)),
    ]


def request_deletes(followers: str, following: str, requester_id: int, user_id: int, at_us: int) -> list[Item]:
    """A pending request's three items deleted (its ``R#`` only if it is still the one made at ``at_us``)."""
    return [
        delete_if_at(followers, key(REQUEST, user_id, requester_id), at_us),
        delete(followers, order_key(REQUEST_ORDER, user_id, Edge(requester_id, at_us))),
        delete(following, key(REQUEST, requester_id, user_id)),
    ]


def follow_elements(followers: str, following: str, follower_id: int, followee_id: int, at_us: int) -> list[Item]:
    """The elements of one new follow edge, as ``DynamoGraphStore.add_edge`` writes them (it calls
    this), without the follower's outgoing count (a batch of many follows moves each follower's
    count once):

    0 ``E#`` put in ``followers`` (only new), 1 its ``T#`` order item, 2 ``E#`` put in ``following``
    (only new), 3 its ``T#`` order item, 4 no pending request of the pair, 5 and 6 no block either way.
    """
    return [
        *edge_puts(followers, following, follower_id, followee_id, at_us),
        check_absent(followers, key(REQUEST, followee_id, follower_id)),
        check_absent(followers, key(BLOCK, follower_id, followee_id)),
        check_absent(followers, key(BLOCK, followee_id, follower_id)),
    ]

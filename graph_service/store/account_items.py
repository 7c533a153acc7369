"""Keys and transaction elements of the account lifecycle (SPEC §3b), beside the graph's items.

=============================  =================================================================
``followers`` pk=U, sk         meaning
=============================  =================================================================
``A``                          U's lifecycle state: ``st`` (``Lifecycle``'s letter), ``gen`` (moved
                               by every change), ``done``/``total`` (the job's progress), ``at``
                               (when the change was made); no item: active, generation 0
``X#<side>#<other>``           an edge or request touching U, archived by a deactivation: ``other``,
                               ``at`` (when it was made), ``gen`` (the job that archived it)
``followers`` pk=0, sk
``J#<U>``                      U has a job to run: ``gen`` (the state's), and the lease of the
                               worker running it (``owner``, ``until``: epoch ms)
=============================  =================================================================

A *side* (``domain/accounts.py``) says how the edge or request touches U: ``F`` other follows U,
``G`` U follows other, ``R`` other asked to follow U, ``Q`` U asked to follow other. An archived item moves to the other
account's partition (the mirrored side) when U comes back while the other is away: it then comes
back with the other's own reactivation.

No user has ID 0, so the jobs' partition is nobody's; the stream consumers ignore its items.
"""

from __future__ import annotations

from typing import Any

from graph_service.domain.accounts import AccountStatus, Archived, Lifecycle, Side
from graph_service.store import items as it

__all__ = [
    "ARCHIVE",
    "ARCHIVE_MARK",
    "JOB",
    "JOBS_PK",
    "RESTORED_MARK",
    "STATE",
    "archive_item",
    "archive_key",
    "check_away",
    "check_in_graph",
    "check_state",
    "check_states",
    "delete_archived",
    "job_key",
    "parse_archived",
    "parse_status",
    "state_key",
]

STATE = "A"
JOB = "J#"
JOBS_PK = 0
ARCHIVE = "X#"
ARCHIVE_MARK = "arch"
"""Set (to the job's generation) on a ``followers`` ``E#`` just before a job removes it: its REMOVE
record then says the edge left with an account, not by an unfollow (no ``FollowEvent``)."""
RESTORED_MARK = "rest"
"""Set on a ``followers`` ``E#`` a restore puts back: its INSERT record is no new follow either."""

Item = dict[str, Any]


def state_key(user_id: int) -> Item:
    return {"pk": {"N": str(user_id)}, "sk": {"S": STATE}}


def job_key(user_id: int) -> Item:
    return {"pk": {"N": str(JOBS_PK)}, "sk": {"S": f"{JOB}{user_id:0{it.ID_DIGITS}d}"}}


def archive_key(owner: int, side: Side, other: int) -> Item:
    return {"pk": {"N": str(owner)}, "sk": {"S": f"{ARCHIVE}{side.value}#{other:0{it.ID_DIGITS}d}"}}


def archive_item(archived: Archived, gen: int) -> Item:
    return {
        **archive_key(archived.owner, archived.side, archived.other),
        "other": {"N": str(archived.other)},
        "at": {"N": str(archived.at_us)},
        "gen": {"N": str(gen)},
    }


def delete_archived(table: str, archived: Archived) -> Item:
    """The archived item deleted, only if it is still there, holding the same ``at``: a second
    worker of the same job (a lease that ran out under a stalled one) never moves it twice."""
    return {
        "Delete": {
            "TableName": table,
            "Key": archive_key(archived.owner, archived.side, archived.other),
            "ConditionExpression": "#at = :at",
            "ExpressionAttributeNames": {"#at": "at"},
            "ExpressionAttributeValues": {":at": {"N": str(archived.at_us)}},
        }
    }


def parse_archived(found: Item) -> Archived:
    side = Side(found["sk"]["S"][len(ARCHIVE)])
    return Archived(int(found["pk"]["N"]), side, int(found["other"]["N"]), int(found["at"]["N"]))


def parse_status(user_id: int, found: Item | None) -> AccountStatus:
    if not found:
        return AccountStatus(user_id)
    return AccountStatus(
        user_id=user_id,
        state=Lifecycle(found["st"]["S"]),
        gen=int(found.get("gen", {}).get("N", "0")),
        edges_done=int(found.get("done", {}).get("N", "0")),
        edges_total=int(found.get("total", {}).get("N", "0")),
        at_us=int(found.get("at", {}).get("N", "0")),
        previous=Lifecycle(found["prev"]["S"]) if "prev" in found else Lifecycle.ACTIVE,
    )


def check_state(table: str, user_id: int, gen: int, *states: Lifecycle, done: int = 0) -> Item:
    """The account is still at generation ``gen`` in one of ``states`` (a job's fence); with
    ``done``, its progress moves by that much in the same element."""
    names = {"#gen": "gen", "#st": "st"}
    values: Item = {":gen": {"N": str(gen)}}
    for n, state in enumerate(states):
        values[f":st{n}"] = {"S": state.value}
    condition = f"#gen = :gen AND #st IN ({', '.join(f':st{n}' for n in range(len(states)))})"
    element: Item = {
        "TableName": table,
        "Key": state_key(user_id),
        "ConditionExpression": condition,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }
    if not done:
        return {"ConditionCheck": element}
    names["#done"] = "done"
    values[":n"] = {"N": str(done)}
    return {"Update": {**element, "UpdateExpression": "ADD #done :n"}}


def check_states(table: str, user_id: int, *states: Lifecycle, missing: bool = False) -> Item:
    """The account is in one of ``states`` (``missing``: or has no state item: never deactivated)."""
    listed = ", ".join(f":s{n}" for n in range(len(states)))
    condition = f"#st IN ({listed})" if not missing else f"attribute_not_exists(pk) OR #st IN ({listed})"
    return {
        "ConditionCheck": {
            "TableName": table,
            "Key": state_key(user_id),
            "ConditionExpression": condition,
            "ExpressionAttributeNames": {"#st": "st"},
            "ExpressionAttributeValues": {f":s{n}": {"S": state.value} for n, state in enumerate(states)},
        }
    }


def check_in_graph(table: str, user_id: int) -> Item:
    """The account is active or coming back (no state item: never deactivated)."""
    return check_states(table, user_id, Lifecycle.ACTIVE, Lifecycle.REACTIVATING, missing=True)


def check_away(table: str, user_id: int) -> Item:
    """The account is deactivated (its job running or done): an archived item may move to it."""
    return check_states(table, user_id, Lifecycle.DEACTIVATING, Lifecycle.DEACTIVATED)

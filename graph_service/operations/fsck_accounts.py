"""The account lifecycle's invariants (SPEC §3b), checked on the items read of one account (pure; no I/O).

The lifecycle's items (``store/account_items.py``): ``followers`` pk=U ``A`` (U's state),
``X#<side>#<other>`` (an edge or request touching U, archived), and the jobs' registry
``followers`` pk=0 ``J#<U>``. What must hold:

- Every such item is well formed (``state_malformed``, ``archived_malformed``, ``job_malformed``).
  No write makes a malformed item, so no write in flight explains one: these are reported at once.
- Once U's job is done (U ``ACTIVE``, ``DEACTIVATED`` or ``DELETED``; while one runs, U is between
  two states and the job is what makes the rules true, so they are not judged):

  - ``ACTIVE`` (``a``, or no state item): no archived item in U's partition (``archived_in_active``);
    a reactivation restores or drops each one before it ends.
  - ``DELETED``: none either (``archived_of_deleted``): the deletion dropped them, and an archived
    item is handed over only to an account that is deactivated.
  - ``DEACTIVATED`` or ``DELETED``: no live ``E#`` or ``R#`` in either of U's partitions
    (``live_edge_of_inactive``). Every edge and request touching U has an item in U's own
    partitions (``followers`` ``E#``/``R#`` for those made to U, ``following`` ``E#``/``R#`` for
    those U made; a missing half is the pair rules' ``edge_one_sided``/``request_mirror_unpaired``),
    so U's partitions are enough and nobody else's is searched.
  - An archived item and a live item of the same pair and direction never coexist
    (``archived_and_live``), judged on U's partitions as above: side ``F`` against ``followers``
    ``E#<other>``, ``G`` against ``following`` ``E#<other>``, ``R`` against ``followers``
    ``R#<other>``, ``Q`` against ``following`` ``R#<other>``.

- A registered job is the job of its account's state: the same generation, in a state whose job
  runs. The transactions that change a state (re)write or delete the entry with it, and a worker
  drops an entry left behind at its next poll, so a disagreement lasts moments; it is ``job_stale``
  only once the entry's lease (``until``; 0 for one never taken) ended over ``STALE_AFTER_MS`` ago:
  then no worker has read the registry for that long, or none can drop the entry. A job of the
  right state that waits for a worker (every worker down, ``SG_ACCOUNT_JOBS=0``) is no violation:
  the account jobs' metrics show it.

An ``AccountView`` holds only what was found: these rules are all about items present, so an
item not read is simply not judged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from graph_service.domain.accounts import Archived, JobEntry, Lifecycle, Side
from graph_service.domain.ids import is_id
from graph_service.dynamodb.operations import Item
from graph_service.dynamodb.tables import FOLLOWERS, FOLLOWING
from graph_service.operations.fsck_pairs import ItemKey, member_key
from graph_service.operations.fsck_report import Violation
from graph_service.store import account_items as ai
from graph_service.store import items as it

__all__ = [
    "STALE_AFTER_MS",
    "AccountView",
    "archived_key",
    "evaluate_account",
    "evaluate_job",
    "is_live",
    "job_user",
    "live_key",
    "read_archived",
    "read_job",
    "read_state",
    "state_item_key",
    "suspect_keys",
]

STALE_AFTER_MS = 3_600_000
"""How long after its lease ended a registered job that is not its account's may stay (1 hour)."""

_ARCHIVED_SK = re.compile(rf"{ai.ARCHIVE}([{''.join(s.value for s in Side)}])#([0-9]{{{it.ID_DIGITS}}})")
_JOB_SK = re.compile(rf"{ai.JOB}([0-9]{{{it.ID_DIGITS}}})")
_ANY_JOB_SK = re.compile(rf"{ai.JOB}([0-9]+)")
_LIVE = (it.EDGE, it.REQUEST)
_SETTLED_AWAY = (Lifecycle.DEACTIVATED, Lifecycle.DELETED)


def _integer(found: Item, name: str, *, required: bool = True) -> int | None:
    """The attribute as an integer; None when absent and not ``required``; ValueError otherwise."""
    if name not in found:
        if required:
            raise ValueError(f"no `{name}`")
        return None
    value = found[name]
    if not isinstance(value, dict) or "N" not in value:
        raise ValueError(f"`{name}` is not a number")
    try:
        return int(value["N"])
    except ValueError:
        raise ValueError(f"`{name}` is not an integer: {value['N']}") from None


def _letter(found: Item, name: str) -> Lifecycle:
    value = found.get(name)
    text = value.get("S") if isinstance(value, dict) else None
    try:
        return Lifecycle(text)
    except ValueError:
        raise ValueError(f"`{name}` is not a state's letter: {value}") from None


def read_state(found: Item) -> Lifecycle:
    """The state an ``A`` item holds; ValueError saying what is malformed."""
    state = _letter(found, "st")
    _integer(found, "gen")
    for name in ("done", "total", "at"):
        _integer(found, name, required=False)
    if "prev" in found:
        _letter(found, "prev")
    return state


def read_archived(found: Item) -> Archived:
    """The archived edge or request an ``X#`` item holds; ValueError saying what is malformed."""
    sk = str(found["sk"]["S"])
    matched = _ARCHIVED_SK.fullmatch(sk)
    if matched is None:
        raise ValueError(f"the key is not {ai.ARCHIVE}<F|G|R|Q>#<{it.ID_DIGITS}-digit ID>")
    keyed = int(matched[2])
    if not is_id(keyed):
        raise ValueError(f"the key names no account: {keyed}")
    other, at = _integer(found, "other"), _integer(found, "at")
    _integer(found, "gen")
    if other != keyed:
        raise ValueError(f"`other` is {other}, the key says {keyed}")
    assert at is not None
    return Archived(int(found["pk"]["N"]), Side(matched[1]), keyed, at)


def read_job(found: Item) -> JobEntry:
    """The registered job a ``J#`` item holds; ValueError saying what is malformed."""
    matched = _JOB_SK.fullmatch(str(found["sk"]["S"]))
    if matched is None:
        raise ValueError(f"the key is not {ai.JOB}<{it.ID_DIGITS}-digit ID>")
    user = int(matched[1])
    if not is_id(user):
        raise ValueError(f"the key names no account: {user}")
    gen = _integer(found, "gen")
    until = _integer(found, "until", required=False)
    assert gen is not None
    owner = found.get("owner", {"S": ""})
    if not isinstance(owner, dict) or "S" not in owner:
        raise ValueError("`owner` is not a string")
    return JobEntry(user, gen, str(owner["S"]), until or 0)


def job_user(sk: str) -> int:
    """The account a registry item's key names (0: none)."""
    matched = _ANY_JOB_SK.fullmatch(sk)
    return int(matched[1]) if matched and is_id(int(matched[1])) else 0


def state_item_key(user: int) -> ItemKey:
    return FOLLOWERS, user, ai.STATE


def archived_key(archived: Archived) -> ItemKey:
    return FOLLOWERS, archived.owner, f"{ai.ARCHIVE}{archived.side.value}#{archived.other:0{it.ID_DIGITS}d}"


def live_key(archived: Archived) -> ItemKey:
    """Where a live item of the archived item's pair and direction would be in its owner's partitions."""
    table, prefix = {
        Side.FOLLOWER: (FOLLOWERS, it.EDGE),
        Side.FOLLOWING: (FOLLOWING, it.EDGE),
        Side.REQUESTER: (FOLLOWERS, it.REQUEST),
        Side.REQUESTED: (FOLLOWING, it.REQUEST),
    }[archived.side]
    return member_key(table, archived.owner, prefix, archived.other)


def is_live(sk: str) -> bool:
    """A live edge's or request's membership item (``E#``/``R#``, not their order items)."""
    return sk.startswith(_LIVE)


@dataclass(frozen=True)
class AccountView:
    user: int
    state: Lifecycle
    """``ACTIVE`` when there is no state item."""
    archived: tuple[Archived, ...] = ()
    """Archived items found (well formed) in the user's ``followers`` partition."""
    live: dict[ItemKey, int] = field(default_factory=dict)
    """Live ``E#``/``R#`` items found in the user's partitions: key -> ``at``."""


def _where(key: ItemKey) -> str:
    table, owner, sk = key
    return f"{table} pk={owner} {sk[: -it.ID_DIGITS]}{int(sk[-it.ID_DIGITS :])}"


def _other(key: ItemKey) -> int:
    return int(key[2][-it.ID_DIGITS :])


def evaluate_account(view: AccountView) -> list[Violation]:
    """Every violation of the lifecycle's rules about one account that ``view`` shows."""
    state = view.state
    if state.job_running:
        return []
    name = state.name.lower()
    found: list[Violation] = []
    for archived in view.archived:
        where = f"{_where(archived_key(archived))} (at {archived.at_us})"
        if state is Lifecycle.ACTIVE:
            found.append(Violation("archived_in_active", view.user, archived.other, f"{where} while {name}"))
        elif state is Lifecycle.DELETED:
            found.append(Violation("archived_of_deleted", view.user, archived.other, f"{where} while {name}"))
        live = live_key(archived)
        if live in view.live:
            detail = f"{where} beside {_where(live)} (at {view.live[live]})"
            found.append(Violation("archived_and_live", view.user, archived.other, detail))
    if state in _SETTLED_AWAY:
        for key, at in sorted(view.live.items()):
            detail = f"{_where(key)} (at {at}) while {name}"
            found.append(Violation("live_edge_of_inactive", view.user, _other(key), detail))
    return found


def suspect_keys(view: AccountView) -> list[tuple[ItemKey, ...]]:
    """The keys to read again (beside the state item) to judge each violation ``view`` shows: an
    archived item with its live key, a live item alone. A second look reads these, not the whole
    account: a deactivated account's archive is as large as its graph was."""
    state = view.state
    if state.job_running:
        return []
    units: list[tuple[ItemKey, ...]] = []
    for archived in view.archived:
        live = live_key(archived)
        if state in (Lifecycle.ACTIVE, Lifecycle.DELETED) or live in view.live:
            units.append((archived_key(archived), live))
    if state in _SETTLED_AWAY:
        units += [(key,) for key in sorted(view.live)]
    return units


def evaluate_job(job: JobEntry, state: Item | None, now_ms: int) -> list[Violation]:
    """``job_stale`` if the registered ``job`` is not its account's (``state``: the account's state
    item, None when it has none) and its lease ended over ``STALE_AFTER_MS`` before ``now_ms``."""
    if now_ms - job.until_ms <= STALE_AFTER_MS:
        return []
    try:
        current = Lifecycle.ACTIVE if state is None else read_state(state)
    except ValueError:
        return []  # the state item is malformed: reported from the account's partition
    gen = 0 if state is None else int(state["gen"]["N"])
    if gen == job.gen and current.job_running:
        return []
    lease = "never taken" if job.until_ms == 0 else f"ended at {job.until_ms} ms"
    detail = (
        f"followers pk={ai.JOBS_PK} {ai.JOB}{job.user_id} (gen {job.gen}, lease {lease}) but {job.user_id}"
        f" is {current.name.lower()} at gen {gen}"
    )
    return [Violation("job_stale", job.user_id, None, detail)]

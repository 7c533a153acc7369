"""Role interfaces of the account lifecycle (SPEC §3b), beside ``ports.py``'s graph roles.

``DynamoAccounts`` plays ``AccountStore`` and ``AccountJobStore``; ``CachedAccountStates`` serves
``AccountStates`` through the graph cache (``AccountStateCache``); the unit tests pass
``tests/support/fakes/accounts.py``, held to the same contract.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from graph_service.domain.accounts import AccountStatus, Archived, JobEntry, Lifecycle, Moved, Restored, Side
from graph_service.domain.models import Counts, Edge

__all__ = ["AccountForgetting", "AccountJobStore", "AccountStateCache", "AccountStates", "AccountStore", "JobRegistry"]


class AccountStates(Protocol):
    async def states(self, user_ids: Sequence[int]) -> dict[int, Lifecycle]:
        """Each account's lifecycle state, as of the last acknowledged change (``ACTIVE`` for an
        account that was never deactivated)."""
        ...


class AccountStore(AccountStates, Protocol):
    """The states as stored: what the lifecycle RPCs decide from and write."""

    async def status(self, user_id: int) -> AccountStatus:
        """The account's state, generation and job progress, strongly consistent."""
        ...

    async def change(self, current: AccountStatus, to: Lifecycle, at_us: int, *, total: int = 0) -> bool:
        """Move the account to ``to`` at the next generation and register its job, only if it is
        still at ``current``'s generation (False: it moved meanwhile; nothing was written)."""
        ...

    async def forget_archived(self, follower_id: int, followee_id: int, *, edge: bool = True) -> None:
        """The pair's archived request (and ``edge``: edge) in that direction, wherever it is
        archived, forgotten."""
        ...

    async def settle_late(self, user_id: int, side: Side, edge: Edge) -> bool:
        """An edge or request just made with the account (``side``: how it touches it), which has
        left the graph meanwhile: archived (or deleted) as its job would, unless it is back (True:
        this call moved it)."""
        ...


class AccountStateCache(Protocol):
    async def get_states(self, user_ids: Sequence[int]) -> dict[int, Lifecycle]:
        """The cached states of those accounts that have one cached."""
        ...

    async def privacy_epoch(self, user_id: int) -> str | None:
        """The user's settings epoch before a store read (None: do not fill)."""
        ...

    async def fill_state(self, user_id: int, state: Lifecycle, seen: str) -> None:
        """Cache the state read from the store, unless the settings epoch moved past ``seen``."""
        ...


class JobRegistry(Protocol):
    """The jobs to run and who runs each (the worker's: ``account_jobs/worker.py``)."""

    async def status(self, user_id: int) -> AccountStatus: ...

    async def jobs(self) -> list[JobEntry]: ...

    async def lease(self, user_id: int, gen: int, owner: str, now_ms: int, until_ms: int) -> bool: ...

    async def release(self, user_id: int, gen: int, owner: str) -> None: ...

    async def defer(self, user_id: int, gen: int, owner: str, delay_ms: int) -> None: ...

    async def drop_job(self, user_id: int, gen: int) -> None: ...


class AccountJobStore(Protocol):
    """What a job reads and writes (``DynamoAccounts``; ``store/account_store.py`` says how). Every
    write is fenced by the account's state at the job's generation: False or ``SUPERSEDED`` mean
    the account moved on and the job must stop."""

    async def status(self, user_id: int) -> AccountStatus: ...

    async def states(self, user_ids: Sequence[int]) -> dict[int, Lifecycle]: ...

    async def set_total(self, user_id: int, gen: int, state: Lifecycle, total: int) -> bool: ...

    async def finish(self, user_id: int, gen: int, state: Lifecycle) -> bool: ...

    async def count(self, user_id: int, side: Side | None) -> int: ...

    async def live(self, user_id: int, side: Side, limit: int) -> list[Edge]: ...

    async def archived(self, user_id: int, side: Side | None, limit: int) -> list[Archived]: ...

    async def owned(self, user_id: int, prefix: str, limit: int) -> list[str]: ...

    def per_batch(self, side: Side, *, archive: bool) -> int: ...

    def per_restore(self, side: Side) -> int: ...

    async def mark(self, user_id: int, gen: int, side: Side, edges: Sequence[Edge], *states: Lifecycle) -> bool: ...

    async def clear_marks(self, user_id: int) -> int: ...

    async def archive(
        self, user_id: int, gen: int, side: Side, edges: Sequence[Edge], *, late: bool = False
    ) -> Moved: ...

    async def purge(
        self, user_id: int, gen: int, side: Side, edges: Sequence[Edge], *, late: bool = False
    ) -> Moved: ...

    async def restore(self, user_id: int, gen: int, side: Side, found: Sequence[Archived]) -> Restored: ...

    async def hand_over(self, user_id: int, gen: int, found: Archived) -> bool: ...

    async def drop_archived(self, user_id: int, gen: int, state: Lifecycle, found: Sequence[Archived]) -> bool: ...

    async def drop_owned(self, user_id: int, gen: int, sort_keys: Sequence[str]) -> bool: ...

    async def drop_blocks_and_mutes_of(self, user_id: int, gen: int, sort_keys: Sequence[str]) -> bool: ...

    async def counters(self, user_id: int) -> Counts: ...

    async def drop_counters(self, user_id: int, gen: int, version: int) -> Moved: ...


class AccountForgetting(Protocol):
    """An adapter that keeps something about an account outside the tables (cache entries, the
    rate limit's ledger, timelines): a deleted account's is removed."""

    async def forget_account(self, user_id: int) -> None: ...

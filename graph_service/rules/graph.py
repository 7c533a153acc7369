"""The graph's rules, one object per capability, wired from the ports they read and write.

The composition root (``entrypoints/server.py``) passes the adapters; the unit tests pass the
in-memory fakes. The gRPC edge (``api/servicer.py``) calls one of these per RPC.
"""

from __future__ import annotations

from dataclasses import dataclass

from graph_service.domain.account_ports import AccountStates, AccountStore
from graph_service.domain.ports import (
    FollowBudget,
    GraphChanges,
    GraphReads,
    GraphWrites,
    MuteStore,
    RelationshipReads,
)
from graph_service.rules.accepting import Acceptance
from graph_service.rules.accounts import AccountLifecycle
from graph_service.rules.blocks import Blocks
from graph_service.rules.follow_tickets import FollowTickets
from graph_service.rules.follows import Follows
from graph_service.rules.graph_queries import GraphQueries
from graph_service.rules.intersections import Intersections, KnownFollowers
from graph_service.rules.limits import RuleLimits
from graph_service.rules.mutes import Mutes
from graph_service.rules.page_tokens import PageTokenCodec
from graph_service.rules.paging import Pager
from graph_service.rules.presence import Presence
from graph_service.rules.requests import FollowRequests
from graph_service.rules.suggestions import Suggester

__all__ = ["GraphRules", "graph_rules"]


@dataclass(frozen=True, slots=True)
class GraphRules:
    follows: Follows
    """Follow, Unfollow, RemoveFollower."""
    requests: FollowRequests
    """SetPrivacy, ListFollowRequests, AcceptFollowRequest, RejectFollowRequest."""
    blocks: Blocks
    """Block, Unblock."""
    queries: GraphQueries
    """IsFollowing, the follower and following lists, counts, GetRelationships."""
    known: KnownFollowers
    """ListKnownFollowers, ListMutualFollows."""
    suggestions: Suggester
    """SuggestFollows."""
    mutes: Mutes
    """Mute, Unmute, ListMutes."""
    accounts: AccountLifecycle
    """DeactivateAccount, ReactivateAccount, DeleteAccount, GetAccountState."""


def graph_rules(
    writes: GraphWrites,
    changes: GraphChanges,
    reads: GraphReads,
    relationships: RelationshipReads,
    suggester: Suggester,
    limits: RuleLimits,
    *,
    budget: FollowBudget,
    mutes: MuteStore,
    states: AccountStates,
    accounts: AccountStore,
) -> GraphRules:
    """``writes`` (and the strongly consistent reads a write decides from) go to the store;
    ``reads`` and ``relationships`` may be served through the cache; ``changes`` is told what every
    acknowledged write settled. ``mutes`` is the store (a user's mutes are read
    from it directly: ``ListMutes`` is not cached). ``states`` may be served through the cache;
    ``accounts`` is the store of the lifecycle states."""
    pager = Pager(PageTokenCodec(*limits.page_token_secrets), limits.default_page_size, limits.max_page_size)
    presence = Presence(states, accounts, changes)
    acceptance = Acceptance(writes, changes, presence)
    tickets = FollowTickets(budget, limits.follow_rate_limit, limits.follow_rate_window_seconds)
    return GraphRules(
        follows=Follows(writes, changes, reads, acceptance, tickets, presence, max_following=limits.max_following),
        requests=FollowRequests(writes, changes, reads, acceptance, pager, presence),
        blocks=Blocks(writes, changes, presence),
        queries=GraphQueries(reads, relationships, pager, presence, max_batch_size=limits.max_batch_size),
        known=KnownFollowers(Intersections(reads, limits.intersection_candidate_limit), pager, presence),
        suggestions=suggester,
        mutes=Mutes(mutes, mutes, changes, pager),
        accounts=AccountLifecycle(accounts, changes),
    )

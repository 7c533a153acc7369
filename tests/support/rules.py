"""The graph rules wired on the in-memory graph, as the unit tests of the rules build them."""

from __future__ import annotations

from graph_service.domain.ports import FollowBudget
from graph_service.rules.graph import GraphRules, graph_rules
from graph_service.rules.limits import RuleLimits
from graph_service.rules.suggestions import Suggester
from tests.support.contracts.follow_budget import ManualClock
from tests.support.fakes.accounts import FakeAccounts
from tests.support.fakes.changes import RecordingChanges
from tests.support.fakes.follow_budget import FakeFollowBudget
from tests.support.fakes.graph import FakeGraph

__all__ = ["rules_on"]


def rules_on(
    graph: FakeGraph,
    limits: RuleLimits,
    *,
    changes: RecordingChanges | None = None,
    budget: FollowBudget | None = None,
    accounts: FakeAccounts | None = None,
) -> GraphRules:
    """Every rule over ``graph`` (the store, the reads, the relationships and the mutes at once);
    ``budget`` defaults to a ledger on a clock that never moves; ``accounts`` (the lifecycle states)
    to a fresh one over ``graph``."""
    states = accounts if accounts is not None else FakeAccounts(graph)
    suggester = Suggester(graph, graph, graph, None, limits, states)
    return graph_rules(
        graph,
        changes or RecordingChanges(),
        graph,
        graph,
        suggester,
        limits,
        budget=budget if budget is not None else FakeFollowBudget(ManualClock()),
        mutes=graph,
        states=states,
        accounts=states,
    )

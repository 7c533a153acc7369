"""Model-based test of the relationship rules: random write sequences against one cached server, every read
checked against a plain in-memory model.

Hypothesis drives a ``RuleBasedStateMachine`` over 5 users (so follows, requests, blocks and removals of the same
pairs collide often). The servers (gRPC service with Redis caching on, the counters consumer) start once per test
on one event loop the test owns; each hypothesis example works on a fresh range of user IDs, so examples never
see each other's data and no table reset is needed.

The model is five sets (edges, pending requests, blocks, mutes, private accounts) implementing the documented
policies (mutes without a duration: their end is tested in tests/integration/api/test_mutes.py).
After every step each read RPC is compared with it for every user / pair; at the end of each example GetCounts
must converge (the counters consumer runs) to the model's edge counts.

SuggestFollows is served from a per-user cache (``suggest_cache_ttl_seconds``) that every write involving the user
drops, but writes among the user's followees do not (graph_service/rules/suggestions.py). So besides the exclusion rules
(never self, followed, requested or blocked either way), which must always hold, an answer must be the model's fresh
ranking (mutual_count = how many of the user's followees follow the account, score, order) or exactly the previous
answer when no write involving the user came between (see ``SUGGESTIONS_MAY_BE_CACHED``).

Users are shown as local indices 0..4 everywhere (steps, assertion messages); the RPCs use ``base + index``. A
failure prints the shrunk sequence of steps, each step's drawn arguments just above it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from hypothesis import HealthCheck
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from socialgraph.v1 import social_graph_pb2 as pb

from graph_service.entrypoints.server import ServerRuntime
from graph_service.settings import Settings
from tests.support.graph_calls import FLAGS
from tests.support.polling import eventually
from tests.support.runtimes import make_settings, running_counters, running_server, stub_for
from tests.support.tables import create_tables

if TYPE_CHECKING:
    from socialgraph.v1.social_graph_pb2_grpc import SocialGraphServiceAsyncStub as Stub

T = TypeVar("T")
Pair = tuple[int, int]
Outcome = tuple[str, str]  # ("OK", follow state or "") or (status code name, ErrorInfo reason)
Entry = tuple[int, int]  # (local user index, timestamp in microseconds)
Suggested = list[tuple[int, int, float]]  # (local user index, mutual_count, score), in answer order

N_USERS = 5
ID_STRIDE = 100  # user IDs of one example: base + 0..4, a fresh base per example
FIRST_BASE = 1_000
STEPS = 20
EXAMPLES = 3  # with STEPS, 60 rule steps a run (about 12 s on a quiet machine): CI must stay under 12 minutes
COUNTS_DEADLINE = 20.0
READS_IN_FLIGHT = 8

# False demands the fresh ranking from every SuggestFollows call: that fails on the suggestion cache (module docstring),
# e.g. Follow(3, 0), Follow(0, 2), SuggestFollows(3) = [2], Unfollow(0, 2), SuggestFollows(3) still [2].
SUGGESTIONS_MAY_BE_CACHED = True

OK: Outcome = ("OK", "")
FOLLOWING: Outcome = ("OK", "FOLLOWING")
REQUESTED: Outcome = ("OK", "REQUESTED")
SELF_RELATION: Outcome = ("INVALID_ARGUMENT", "SELF_RELATION")

HYPOTHESIS_SETTINGS = hsettings(
    max_examples=EXAMPLES,
    stateful_step_count=STEPS,
    deadline=None,
    derandomize=True,  # a fixed seed derived from the test: CI runs are reproducible
    database=None,
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

USERS = st.integers(min_value=0, max_value=N_USERS - 1)


# -- the model ----------------------------------------------------------------------------------


@dataclass
class Model:
    """The graph as the policies say it must be; edges and requests remember the step that made them."""

    edges: dict[Pair, int] = field(default_factory=dict)  # (follower, followee) -> step it was made
    requests: dict[Pair, int] = field(default_factory=dict)  # (requester, asked account) -> step it was made
    blocks: set[Pair] = field(default_factory=set)  # (blocker, blocked)
    mutes: dict[Pair, bool] = field(default_factory=dict)  # (muter, muted) -> notifications muted too
    private: set[int] = field(default_factory=set)
    step: int = 0

    def blocked(self, a: int, b: int) -> bool:
        return (a, b) in self.blocks or (b, a) in self.blocks

    def follow(self, a: int, b: int) -> Outcome:
        if a == b:
            return ("INVALID_ARGUMENT", "SELF_FOLLOW")
        if self.blocked(a, b):
            return ("FAILED_PRECONDITION", "BLOCKED")
        if (a, b) in self.edges:
            return FOLLOWING
        if b in self.private:
            self.requests.setdefault((a, b), self.step)
            return REQUESTED
        assert (a, b) not in self.requests, "model: a public account never keeps a pending request"
        self.edges[(a, b)] = self.step
        return FOLLOWING

    def unfollow(self, a: int, b: int) -> Outcome:
        self.edges.pop((a, b), None)
        self.requests.pop((a, b), None)
        return OK

    def block(self, a: int, b: int) -> Outcome:
        if a == b:
            return SELF_RELATION
        self.blocks.add((a, b))
        for pair in ((a, b), (b, a)):
            self.edges.pop(pair, None)
            self.requests.pop(pair, None)
        return OK

    def unblock(self, a: int, b: int) -> Outcome:
        if a == b:
            return SELF_RELATION
        self.blocks.discard((a, b))
        return OK

    def set_privacy(self, u: int, private: bool) -> list[int]:
        """Returns the requesters whose pending requests turning public accepted."""
        if private:
            self.private.add(u)
            return []
        self.private.discard(u)
        accepted = sorted(r for r, t in self.requests if t == u)
        for r in accepted:
            del self.requests[(r, u)]
            self.edges[(r, u)] = self.step  # one sweep: their relative order is not defined
        return accepted

    def accept(self, u: int, r: int) -> Outcome:
        if u == r:
            return SELF_RELATION
        if (r, u) in self.requests:
            del self.requests[(r, u)]
            self.edges[(r, u)] = self.step
            return OK
        if (r, u) in self.edges:
            return OK
        return ("NOT_FOUND", "FOLLOW_REQUEST_NOT_FOUND")

    def reject(self, u: int, r: int) -> Outcome:
        if u == r:
            return SELF_RELATION
        self.requests.pop((r, u), None)
        return OK

    def mute(self, a: int, b: int, notifications: bool = False) -> Outcome:
        """A mute changes no follow, request or block; a repeat replaces the flag."""
        if a == b:
            return SELF_RELATION
        self.mutes[(a, b)] = notifications
        return OK

    def mute_notifications(self, a: int, b: int) -> Outcome:
        return self.mute(a, b, notifications=True)

    def unmute(self, a: int, b: int) -> Outcome:
        if a == b:
            return SELF_RELATION
        self.mutes.pop((a, b), None)
        return OK

    def remove_follower(self, u: int, f: int) -> Outcome:
        if u == f:
            return SELF_RELATION
        self.edges.pop((f, u), None)
        self.requests.pop((f, u), None)
        return OK

    # -- what reads must answer --

    def followers(self, u: int) -> set[int]:
        return {a for a, b in self.edges if b == u}

    def following(self, u: int) -> set[int]:
        return {b for a, b in self.edges if a == u}

    def relationship(self, actor: int, target: int) -> tuple[bool, ...]:
        if actor == target:
            return (False,) * 8
        return (
            (actor, target) in self.edges,
            (target, actor) in self.edges,
            (actor, target) in self.requests,
            (target, actor) in self.requests,
            (actor, target) in self.blocks,
            (target, actor) in self.blocks,
            (actor, target) in self.mutes,
            self.mutes.get((actor, target), False),
        )

    def suggestions(self, u: int) -> Suggested:
        """Every second-degree account by how many of u's followees follow it, ties by ascending ID, minus the
        excluded ones (u, followed, requested, blocked either way)."""
        followees = self.following(u)
        tally = Counter(b for a, b in self.edges if a in followees and b != u)
        ranked = sorted(tally.items(), key=lambda item: (-item[1], item[0]))
        return [
            (c, n, n / len(followees))
            for c, n in ranked
            if (u, c) not in self.edges and (u, c) not in self.requests and not self.blocked(u, c)
        ]

    def counts(self) -> dict[int, tuple[int, int]]:
        return {u: (len(self.followers(u)), len(self.following(u))) for u in range(N_USERS)}


PAIRS = st.sampled_from([(a, b) for a in range(N_USERS) for b in range(N_USERS) if a != b])
# What one step does: a pair write (see PAIR_WRITES), 1-4 follows, SetPrivacy, or a pair write of a user with itself.
STEP_KINDS = [
    "Follow",
    "FollowSeveral",
    "Unfollow",
    "Block",
    "Unblock",
    "SetPrivacy",
    "AcceptFollowRequest",
    "RejectFollowRequest",
    "RemoveFollower",
    "Mute",
    "MuteNotifications",
    "Unmute",
    "SelfPair",
]

# The writes of a pair of users: (the model's rule, the call of local users turned into IDs).
PAIR_WRITES: dict[str, tuple[Callable[[Model, int, int], Outcome], Callable[[Stub, int, int], Awaitable[Any]]]] = {
    "Follow": (Model.follow, lambda s, a, b: s.Follow(pb.FollowRequest(follower_id=a, followee_id=b))),
    "Unfollow": (Model.unfollow, lambda s, a, b: s.Unfollow(pb.UnfollowRequest(follower_id=a, followee_id=b))),
    "Block": (Model.block, lambda s, a, b: s.Block(pb.BlockRequest(blocker_id=a, blocked_id=b))),
    "Unblock": (Model.unblock, lambda s, a, b: s.Unblock(pb.UnblockRequest(blocker_id=a, blocked_id=b))),
    "AcceptFollowRequest": (
        Model.accept,
        lambda s, u, r: s.AcceptFollowRequest(pb.AcceptFollowRequestRequest(user_id=u, requester_id=r)),
    ),
    "RejectFollowRequest": (
        Model.reject,
        lambda s, u, r: s.RejectFollowRequest(pb.RejectFollowRequestRequest(user_id=u, requester_id=r)),
    ),
    "RemoveFollower": (
        Model.remove_follower,
        lambda s, u, f: s.RemoveFollower(pb.RemoveFollowerRequest(user_id=u, follower_id=f)),
    ),
    "Mute": (Model.mute, lambda s, a, b: s.Mute(pb.MuteRequest(muter_id=a, muted_id=b))),
    "MuteNotifications": (
        Model.mute_notifications,
        lambda s, a, b: s.Mute(pb.MuteRequest(muter_id=a, muted_id=b, notifications=True)),
    ),
    "Unmute": (Model.unmute, lambda s, a, b: s.Unmute(pb.UnmuteRequest(muter_id=a, muted_id=b))),
}


# -- the servers, on a loop the test owns -------------------------------------------------------


@dataclass
class Env:
    loop: asyncio.AbstractEventLoop
    stub: Stub
    bases: itertools.count[int] = field(default_factory=lambda: itertools.count(FIRST_BASE, ID_STRIDE))
    # Reads in flight at once: the server shares this loop, and a burst of all ~80 check calls at once
    # stalls its Redis replies towards redis_timeout_seconds (past it the cache breaker sends reads to DynamoDB).
    slots: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(READS_IN_FLIGHT))

    def run(self, coro: Awaitable[T]) -> T:
        return self.loop.run_until_complete(coro)

    async def read(self, call: Callable[[], Awaitable[T]]) -> T:
        async with self.slots:
            return await call()


@contextlib.asynccontextmanager
async def running_stack(settings: Settings) -> AsyncIterator[tuple[ServerRuntime, Stub]]:
    """The cached server and the counters consumer, both tasks of the current loop."""
    await create_tables(settings, streams=True)
    async with running_server(settings) as server, running_counters(settings), stub_for(server.port) as stub:
        yield server, cast("Stub", stub)


def outcome_of(error: grpc.aio.AioRpcError) -> Outcome:
    """(status code name, ErrorInfo reason) of a failed call."""
    status = rpc_status.from_call(cast("grpc.Call", error))
    reasons = []
    for detail in status.details if status is not None else []:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            reasons.append(info.reason)
    return error.code().name, ",".join(reasons) or f"<no ErrorInfo: {error.details()}>"


async def attempt(call: Callable[[], Awaitable[Any]]) -> tuple[Outcome, Any]:
    """The outcome of a call made on the running loop, and its reply if it succeeded."""
    try:
        return OK, await call()
    except grpc.aio.AioRpcError as error:
        return outcome_of(error), None


def descending(entries: Sequence[Entry]) -> bool:
    """Newest first: (timestamp, user) strictly decreasing, as the lists' sort keys are."""
    keys = [(at, u) for u, at in entries]
    return all(x > y for x, y in itertools.pairwise(keys))


# -- the state machine ----------------------------------------------------------------------------


class RelationshipMachine(RuleBasedStateMachine):
    env: ClassVar[Env]

    def __init__(self) -> None:
        super().__init__()
        self.base = next(self.env.bases)
        self.model = Model()
        self.seen_at: dict[tuple[str, Pair, int], int] = {}  # (kind, pair, step made) -> the server's timestamp
        self.last_suggested: dict[int, Suggested] = {}  # answers no write involving the user has invalidated
        self.broken = False

    # -- plumbing --

    def uid(self, index: int) -> int:
        return self.base + index

    def local(self, user_id: int) -> int:
        index = user_id - self.base
        assert 0 <= index < N_USERS, f"user ID {user_id} is not one of this example's users"
        return index

    def run(self, coro: Awaitable[T]) -> T:
        try:
            return self.env.run(coro)
        except BaseException:
            self.broken = True
            raise

    def write(self, name: str, call: Callable[[], Awaitable[Any]], expected: Outcome, touched: Sequence[int]) -> None:
        """Run one write, compare its outcome with the model's, and forget the suggestions it drops (``touched``)."""
        got, reply = self.run(attempt(call))
        if isinstance(reply, pb.FollowResponse):
            got = ("OK", pb.FollowState.Name(reply.state).removeprefix("FOLLOW_STATE_"))
        if got != expected:
            self.broken = True
            raise AssertionError(f"{name}: expected {expected}, got {got}")
        if got[0] == "OK":
            for user in touched:
                self.last_suggested.pop(user, None)

    def pair_write(self, op: str, a: int, b: int) -> None:
        """One of the pair writes (see ``PAIR_WRITES``) of local users ``a`` and ``b``."""
        model_op, build = PAIR_WRITES[op]
        self.model.step += 1
        expected = model_op(self.model, a, b)
        stub, first, second = self.env.stub, self.uid(a), self.uid(b)
        touched = (a, b) if a != b else ()  # Unfollow(u, u) succeeds as a no-op: it writes nothing
        self.write(f"{op}({a}, {b})", lambda: build(stub, first, second), expected, touched)

    def pick(self, data: st.DataObject, groups: Sequence[set[Pair]]) -> Pair:
        """A pair of two different users: from each non-empty group (pairs with an edge, a request or a block that
        the write acts on) as often as from all pairs, since a random pair of 5 users seldom hits one."""
        branches = [st.sampled_from(sorted(group)) for group in groups if group]
        return data.draw(st.one_of(*branches, PAIRS), label="pair")

    # -- rules (users are local indices; a pair is two different users) --

    @initialize(private=st.sets(USERS, max_size=2), pairs=st.lists(PAIRS, max_size=8))
    def start(self, private: set[int], pairs: list[Pair]) -> None:
        """SetPrivacy(u, True) for each of ``private``, then Follow(a, b) for each pair: every example starts from
        a graph with edges and requests to act on."""
        for u in sorted(private):
            self.set_privacy(u, True)
        for a, b in pairs:
            self.pair_write("Follow", a, b)

    @rule(kind=st.sampled_from(STEP_KINDS), data=st.data())
    def step(self, kind: str, data: st.DataObject) -> None:
        """One step of a kind drawn evenly from ``STEP_KINDS``; its arguments are drawn (and shown) after it. One rule
        for all kinds, as Hypothesis would otherwise leave some rules out of many examples (swarm testing)."""
        if kind == "FollowSeveral":  # dense enough graphs for the intersections and suggestions to find something
            for a, b in data.draw(st.lists(PAIRS, min_size=1, max_size=4), label="Follow pairs"):
                self.pair_write("Follow", a, b)
        elif kind == "SetPrivacy":
            self.set_privacy(data.draw(USERS, label="user"), data.draw(st.booleans(), label="private"))
        elif kind == "SelfPair":  # INVALID_ARGUMENT (SELF_FOLLOW, SELF_RELATION); Unfollow: a no-op
            op = data.draw(st.sampled_from(list(PAIR_WRITES)), label="write")
            u = data.draw(USERS, label="user")
            self.pair_write(op, u, u)
        else:
            self.pair_write(kind, *self.pick(data, self.targets(kind)))

    def targets(self, op: str) -> list[set[Pair]]:
        """Groups of (first, second) argument pairs on which ``op`` has something to act."""
        edges, requests, blocks = set(self.model.edges), set(self.model.requests), self.model.blocks

        def flipped(pairs: set[Pair]) -> set[Pair]:
            return {(b, a) for a, b in pairs}

        if op in ("Follow", "Block"):  # repeats, follow backs, follows across a block (BLOCKED)
            return [edges | flipped(edges), requests | flipped(requests), blocks | flipped(blocks)]
        if op == "Unfollow":
            return [edges, requests]
        if op == "Unblock":
            return [set(blocks)]
        if op in ("Mute", "MuteNotifications", "Unmute"):  # repeats and unmutes act on a mute
            return [set(self.model.mutes)]
        if op == "RejectFollowRequest":
            return [flipped(requests)]
        # AcceptFollowRequest (a pending request, or an accepted one: OK) and RemoveFollower (user, follower)
        return [flipped(requests), flipped(edges)]

    def set_privacy(self, u: int, private: bool) -> None:
        """SetPrivacy(u, private). Turning public accepts every pending request: a write between u and each
        requester. The privacy flag itself plays no part in u's suggestions, so alone it drops none."""
        self.model.step += 1
        accepted = self.model.set_privacy(u, private)
        request = pb.SetPrivacyRequest(user_id=self.uid(u), private=private)
        touched = [u, *accepted] if accepted else []
        self.write(f"SetPrivacy({u}, {private})", lambda: self.env.stub.SetPrivacy(request), OK, touched)

    # -- every read, after every step --

    @precondition(lambda self: self.model.step > 0)
    @invariant()
    def every_read_agrees_with_the_model(self) -> None:
        self.run(self.check_reads())

    def teardown(self) -> None:
        """With the counters consumer running, GetCounts of every user converges to the model's edge counts."""
        if self.broken:
            return  # the example failed already: report that failure, not a consequence of it
        self.run(self.check_counts())

    async def check_counts(self) -> None:
        stub = self.env.stub

        async def probe() -> dict[int, tuple[int, int]]:
            replies = await asyncio.gather(
                *(stub.GetCounts(pb.GetCountsRequest(user_id=self.uid(u))) for u in range(N_USERS))
            )
            return {u: (r.followers_count, r.following_count) for u, r in enumerate(replies)}

        want = self.model.counts()
        await eventually(probe, lambda got: got == want, timeout=COUNTS_DEADLINE)

    async def check_reads(self) -> None:
        users = range(N_USERS)
        pairs = [(a, b) for a in users for b in users]
        (
            following,
            followers,
            relationships,
            requests,
            mutuals,
            known,
            suggestions,
            is_following,
            mutes,
        ) = await asyncio.gather(
            asyncio.gather(*(self.list_following(u) for u in users)),
            asyncio.gather(*(self.list_followers(u) for u in users)),
            asyncio.gather(*(self.relationships(u) for u in users)),
            asyncio.gather(*(self.follow_requests(u) for u in users)),
            asyncio.gather(*(self.mutual_follows(u) for u in users)),
            asyncio.gather(*(self.known_followers(v, u) for v, u in pairs)),
            asyncio.gather(*(self.suggest_follows(u) for u in users)),
            asyncio.gather(*(self.is_following(a, b) for a, b in pairs)),
            asyncio.gather(*(self.list_mutes(u) for u in users)),
        )
        model = self.model

        # ListMutes: the model's mutes of each user with their notifications flag, newest first.
        for u in users:
            got_mutes = {(muted, notifications) for muted, notifications, _ in mutes[u]}
            want_mutes = {(b, n) for (a, b), n in model.mutes.items() if a == u}
            assert got_mutes == want_mutes, f"ListMutes({u}) = {mutes[u]}, model says {sorted(want_mutes)}"
            assert len(mutes[u]) == len(want_mutes), f"ListMutes({u}) = {mutes[u]} repeats an entry"
            made = [at for _, _, at in mutes[u]]
            assert made == sorted(made, reverse=True), f"ListMutes({u}) = {mutes[u]} is not newest first"

        # IsFollowing, every ordered pair (a user never follows itself).
        got_edges = {pair for pair, following in zip(pairs, is_following, strict=True) if following}
        assert got_edges == set(model.edges), diff("IsFollowing", got_edges, set(model.edges))

        # ListFollowers / ListFollowing: the model's sets, newest first, each edge's followed_at stable and
        # the same in both lists, and ordered as the edges were made.
        for u in users:
            for name, entries, want, edge_of in (
                ("ListFollowers", followers[u], model.followers(u), lambda o, u=u: (o, u)),
                ("ListFollowing", following[u], model.following(u), lambda o, u=u: (u, o)),
            ):
                where = f"{name}({u}) = {entries}"
                assert {o for o, _ in entries} == want, f"{where}, model says {sorted(want)}"
                assert len(entries) == len(want), f"{where} repeats an entry"
                assert descending(entries), f"{where} is not newest first"
                self.check_times(where, "edge", [(edge_of(o), at) for o, at in entries], model.edges)

        # GetRelationships(actor, every user): all six flags, in request order.
        for actor in users:
            got = relationships[actor]
            want_rel = [(t, model.relationship(actor, t)) for t in users]
            assert [t for t, _ in got] == list(users), f"GetRelationships({actor}) answered targets {got}"
            wrong = {t: (named(flags), named(want)) for (t, flags), (_, want) in zip(got, want_rel, strict=True)}
            wrong = {t: pair for t, pair in wrong.items() if pair[0] != pair[1]}
            assert not wrong, f"GetRelationships({actor}): target -> (flags set, model's flags): {wrong}"

        # ListFollowRequests: the pending requesters, newest first, requested_at stable.
        for u in users:
            entries = requests[u]
            where = f"ListFollowRequests({u}) = {entries}"
            want = {r for r, t in model.requests if t == u}
            assert {r for r, _ in entries} == want, f"{where}, model says {sorted(want)}"
            assert len(entries) == len(want), f"{where} repeats an entry"
            assert descending(entries), f"{where} is not newest first"
            self.check_times(where, "request", [((r, u), at) for r, at in entries], model.requests)

        # ListMutualFollows(u) and ListKnownFollowers(v, u): followers of u (in ListFollowers order, which is
        # checked above) whom u, resp. v, follows, with the followed_at of their follow of u.
        for u in users:
            want_ids = [f for f, _ in followers[u] if (u, f) in model.edges]
            assert mutuals[u] == want_ids, f"ListMutualFollows({u}) = {mutuals[u]}, model says {want_ids}"
        for (v, u), entries in zip(pairs, known, strict=True):
            want_known = [(f, at) for f, at in followers[u] if (v, f) in model.edges]
            assert entries == want_known, f"ListKnownFollowers(viewer={v}, user={u}) = {entries}, want {want_known}"

        # SuggestFollows: never self, followed, requested or blocked either way; mutual_count and score as the
        # model computes them, highest first (ties by ascending ID).
        for u in users:
            got_s = suggestions[u]
            where = f"SuggestFollows({u}) = {got_s}"
            for c, _, _ in got_s:
                assert c != u, f"{where} suggests the user itself"
                assert (u, c) not in model.edges, f"{where} suggests {c}, whom {u} follows"
                assert (u, c) not in model.requests, f"{where} suggests {c}, whom {u} asked to follow"
                assert not model.blocked(u, c), f"{where} suggests {c}, blocked either way with {u}"
            fresh = model.suggestions(u)
            last = self.last_suggested.get(u) if SUGGESTIONS_MAY_BE_CACHED else None
            assert got_s in (fresh, last), f"{where}; model computes {fresh}" + (
                f" (the previous answer, still cacheable, was {last})" if last is not None else ""
            )
            self.last_suggested[u] = got_s

    def check_times(self, where: str, kind: str, found: list[tuple[Pair, int]], made: dict[Pair, int]) -> None:
        """A timestamp never changes while its edge/request lives, and newer ones were made at later steps."""
        steps = []
        for pair, at in found:
            key = (kind, pair, made[pair])
            first = self.seen_at.setdefault(key, at)
            assert at == first, f"{where}: {kind} {pair} (made at step {made[pair]}) had time {first}, now {at}"
            steps.append(made[pair])
        assert steps == sorted(steps, reverse=True), f"{where}: not in the order made (steps {steps})"

    # -- reads returning local indices --

    async def is_following(self, a: int, b: int) -> bool:
        request = pb.IsFollowingRequest(follower_id=self.uid(a), followee_id=self.uid(b))
        return (await self.env.read(lambda: self.env.stub.IsFollowing(request))).following

    async def suggest_follows(self, u: int) -> Suggested:
        request = pb.SuggestFollowsRequest(user_id=self.uid(u), limit=0)
        reply = await self.env.read(lambda: self.env.stub.SuggestFollows(request))
        return [(self.local(s.user_id), s.mutual_count, s.score) for s in reply.suggestions]

    async def list_followers(self, u: int) -> list[Entry]:
        request = pb.ListFollowersRequest(user_id=self.uid(u))
        reply = await self.env.read(lambda: self.env.stub.ListFollowers(request))
        assert not reply.next_page_token, f"ListFollowers({u}): a next page after at most {N_USERS} entries"
        return [(self.local(e.user_id), e.followed_at.ToMicroseconds()) for e in reply.followers]

    async def list_following(self, u: int) -> list[Entry]:
        request = pb.ListFollowingRequest(user_id=self.uid(u))
        reply = await self.env.read(lambda: self.env.stub.ListFollowing(request))
        assert not reply.next_page_token, f"ListFollowing({u}): a next page after at most {N_USERS} entries"
        return [(self.local(e.user_id), e.followed_at.ToMicroseconds()) for e in reply.following]

    async def relationships(self, actor: int) -> list[tuple[int, tuple[bool, ...]]]:
        request = pb.GetRelationshipsRequest(actor_id=self.uid(actor), target_ids=[self.uid(t) for t in range(N_USERS)])
        reply = await self.env.read(lambda: self.env.stub.GetRelationships(request))
        return [
            (
                self.local(r.target_id),
                (
                    r.following,
                    r.followed_by,
                    r.requested,
                    r.requested_by,
                    r.blocking,
                    r.blocked_by,
                    r.muting,
                    r.muting_notifications,
                ),
            )
            for r in reply.relationships
        ]

    async def follow_requests(self, u: int) -> list[Entry]:
        request = pb.ListFollowRequestsRequest(user_id=self.uid(u))
        reply = await self.env.read(lambda: self.env.stub.ListFollowRequests(request))
        assert not reply.next_page_token, f"ListFollowRequests({u}): a next page after at most {N_USERS} entries"
        return [(self.local(e.user_id), e.requested_at.ToMicroseconds()) for e in reply.requests]

    async def mutual_follows(self, u: int) -> list[int]:
        request = pb.ListMutualFollowsRequest(user_id=self.uid(u))
        reply = await self.env.read(lambda: self.env.stub.ListMutualFollows(request))
        assert not reply.next_page_token, f"ListMutualFollows({u}): a next page after at most {N_USERS} entries"
        return [self.local(e.user_id) for e in reply.users]

    async def list_mutes(self, u: int) -> list[tuple[int, bool, int]]:
        """(muted, notifications, muted_at) of each mute, in answer order."""
        reply = await self.env.read(lambda: self.env.stub.ListMutes(pb.ListMutesRequest(user_id=self.uid(u))))
        assert not reply.next_page_token, f"ListMutes({u}): a next page after at most {N_USERS} entries"
        return [(self.local(m.user_id), m.notifications, m.muted_at.ToMicroseconds()) for m in reply.mutes]

    async def known_followers(self, v: int, u: int) -> list[Entry]:
        request = pb.ListKnownFollowersRequest(viewer_id=self.uid(v), user_id=self.uid(u))
        reply = await self.env.read(lambda: self.env.stub.ListKnownFollowers(request))
        assert not reply.next_page_token, f"ListKnownFollowers({v}, {u}): a next page after at most {N_USERS}"
        return [(self.local(e.user_id), e.followed_at.ToMicroseconds()) for e in reply.followers]


def named(flags: tuple[bool, ...]) -> str:
    return "{" + ", ".join(name for name, on in zip(FLAGS, flags, strict=True) if on) + "}"


def diff(name: str, got: set[Pair], want: set[Pair]) -> str:
    return f"{name}: extra {sorted(got - want)}, missing {sorted(want - got)}"


def run_machine(settings: Settings, check: Callable[[Env], None]) -> None:
    """Start the stack on a fresh event loop, hand it to ``check``, and stop it on the same loop."""
    loop = asyncio.new_event_loop()
    stack = contextlib.AsyncExitStack()
    try:
        server, stub = loop.run_until_complete(stack.enter_async_context(running_stack(settings)))
        check(Env(loop=loop, stub=stub))
        cache = server.cache
        assert cache is not None
        assert cache.hits > 0, "the checks never read from the cache"
    finally:
        loop.run_until_complete(stack.aclose())
        loop.close()


# A normal run takes about a minute; a failure adds up to 5 minutes of shrinking (Hypothesis' own limit).
@pytest.mark.timeout(600)
def test_relationship_rules_match_a_model_under_random_sequences(dynamodb_local: str, redis_url: str) -> None:
    """Random Follow/Unfollow/Block/Unblock/SetPrivacy/Accept/Reject/RemoveFollower sequences over 5 users: every
    write's outcome and, after each step, every read RPC for every user and pair agree with the model; counts
    converge to it at the end of each sequence."""

    def check(env: Env) -> None:
        class Machine(RelationshipMachine):
            pass

        Machine.env = env
        run_state_machine_as_test(Machine, settings=HYPOTHESIS_SETTINGS)

    # Caching on, with a Redis timeout above the stalls of one loop shared by server, consumer and checks, so that
    # the circuit breaker does not send the checks to DynamoDB for a second at a time.
    run_machine(make_settings(dynamodb_local, redis_url), check)

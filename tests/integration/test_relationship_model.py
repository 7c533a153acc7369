"""Model-based test of the relationship rules: random write sequences against one cached server, every read
checked against a plain in-memory model.

Hypothesis drives a ``RuleBasedStateMachine`` over 5 users (so follows, requests, blocks and removals of the same
pairs collide often). The servers (gRPC service with Redis caching on, the counters consumer) start once per test
on one event loop the test owns; each hypothesis example works on a fresh range of user IDs, so examples never
see each other's data and no table reset is needed.

The model is four sets (edges, pending requests, blocks, private accounts) implementing the documented policies.
After every step each read RPC is compared with it for every user / pair; at the end of each example GetCounts
must converge (the counters consumer runs) to the model's edge counts.

Users are shown as local indices 0..4 everywhere (rules, assertion messages); the RPCs use ``base + index``.
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
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from hypothesis import HealthCheck
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test
from socialgraph.v1 import social_graph_pb2 as pb

from graph_service.settings import Settings
from graph_service.store.tables import ensure_tables
from tests.conftest import make_settings, running_counters, running_server, stub_for
from tests.servers import eventually

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
STEPS = 25
EXAMPLES = 30
COUNTS_DEADLINE = 20.0

# Suggestions are cached per user (suggest_cache_ttl_seconds, default 300 s) and that entry is dropped by every write
# involving the user, but not by writes among the user's followees (suggestions.py docstring). So an answer may be
# either freshly computed, or exactly the previous answer if no write involving the user came in between. Set this
# to False to demand a fresh ranking on every call (fails on that documented cache; see the module docstring).
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
            return (False,) * 6
        return (
            (actor, target) in self.edges,
            (target, actor) in self.edges,
            (actor, target) in self.requests,
            (target, actor) in self.requests,
            (actor, target) in self.blocks,
            (target, actor) in self.blocks,
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


# -- the servers, on a loop the test owns -------------------------------------------------------


@dataclass
class Env:
    loop: asyncio.AbstractEventLoop
    stub: Stub
    bases: itertools.count[int] = field(default_factory=lambda: itertools.count(FIRST_BASE, ID_STRIDE))

    def run(self, coro: Awaitable[T]) -> T:
        return self.loop.run_until_complete(coro)


@contextlib.asynccontextmanager
async def running_stack(settings: Settings) -> AsyncIterator[Stub]:
    """The cached server and the counters consumer, both tasks of the current loop."""
    await ensure_tables(settings)
    async with running_server(settings) as server, running_counters(settings), stub_for(server.port) as stub:
        yield cast("Stub", stub)


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


async def attempt(call: Awaitable[Any]) -> tuple[Outcome, Any]:
    try:
        return OK, await call
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

    def write(self, name: str, call: Awaitable[Any], expected: Outcome, touched: Sequence[int]) -> Any:
        """Run one write, compare its outcome with the model's, and forget cached suggestions it must drop."""
        self.model.step += 1
        got, reply = self.run(attempt(call))
        if isinstance(reply, pb.FollowResponse):
            got = ("OK", pb.FollowState.Name(reply.state).removeprefix("FOLLOW_STATE_"))
        if got != expected:
            self.broken = True
            raise AssertionError(f"{name}: expected {expected}, got {got}")
        if got[0] == "OK":
            for user in touched:
                self.last_suggested.pop(user, None)
        return reply

    # -- rules (arguments are local user indices) --

    @rule(a=USERS, b=USERS)
    def follow(self, a: int, b: int) -> None:
        expected = self.model.follow(a, b)
        call = self.env.stub.Follow(pb.FollowRequest(follower_id=self.uid(a), followee_id=self.uid(b)))
        self.write(f"Follow({a}, {b})", call, expected, (a, b))

    @rule(a=USERS, b=USERS)
    def unfollow(self, a: int, b: int) -> None:
        expected = self.model.unfollow(a, b)
        call = self.env.stub.Unfollow(pb.UnfollowRequest(follower_id=self.uid(a), followee_id=self.uid(b)))
        self.write(f"Unfollow({a}, {b})", call, expected, (a, b))

    @rule(a=USERS, b=USERS)
    def block(self, a: int, b: int) -> None:
        expected = self.model.block(a, b)
        call = self.env.stub.Block(pb.BlockRequest(blocker_id=self.uid(a), blocked_id=self.uid(b)))
        self.write(f"Block({a}, {b})", call, expected, (a, b))

    @rule(a=USERS, b=USERS)
    def unblock(self, a: int, b: int) -> None:
        expected = self.model.unblock(a, b)
        call = self.env.stub.Unblock(pb.UnblockRequest(blocker_id=self.uid(a), blocked_id=self.uid(b)))
        self.write(f"Unblock({a}, {b})", call, expected, (a, b))

    @rule(u=USERS, private=st.booleans())
    def set_privacy(self, u: int, private: bool) -> None:
        accepted = self.model.set_privacy(u, private)
        call = self.env.stub.SetPrivacy(pb.SetPrivacyRequest(user_id=self.uid(u), private=private))
        self.write(f"SetPrivacy({u}, {private})", call, OK, [u, *accepted] if accepted else [])

    @rule(u=USERS, r=USERS)
    def accept_follow_request(self, u: int, r: int) -> None:
        expected = self.model.accept(u, r)
        request = pb.AcceptFollowRequestRequest(user_id=self.uid(u), requester_id=self.uid(r))
        self.write(f"AcceptFollowRequest({u}, {r})", self.env.stub.AcceptFollowRequest(request), expected, (u, r))

    @rule(u=USERS, r=USERS)
    def reject_follow_request(self, u: int, r: int) -> None:
        expected = self.model.reject(u, r)
        request = pb.RejectFollowRequestRequest(user_id=self.uid(u), requester_id=self.uid(r))
        self.write(f"RejectFollowRequest({u}, {r})", self.env.stub.RejectFollowRequest(request), expected, (u, r))

    @rule(u=USERS, f=USERS)
    def remove_follower(self, u: int, f: int) -> None:
        expected = self.model.remove_follower(u, f)
        call = self.env.stub.RemoveFollower(pb.RemoveFollowerRequest(user_id=self.uid(u), follower_id=self.uid(f)))
        self.write(f"RemoveFollower({u}, {f})", call, expected, (u, f))

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
        stub = self.env.stub
        following, followers, relationships, requests, mutuals, known, suggestions = await asyncio.gather(
            asyncio.gather(*(self.list_following(u) for u in users)),
            asyncio.gather(*(self.list_followers(u) for u in users)),
            asyncio.gather(*(self.relationships(u) for u in users)),
            asyncio.gather(*(self.follow_requests(u) for u in users)),
            asyncio.gather(*(self.mutual_follows(u) for u in users)),
            asyncio.gather(*(self.known_followers(v, u) for v, u in pairs)),
            asyncio.gather(
                *(stub.SuggestFollows(pb.SuggestFollowsRequest(user_id=self.uid(u), limit=0)) for u in users)
            ),
        )
        is_following = await asyncio.gather(
            *(
                stub.IsFollowing(pb.IsFollowingRequest(follower_id=self.uid(a), followee_id=self.uid(b)))
                for a, b in pairs
            )
        )
        model = self.model

        # IsFollowing, every ordered pair (a user never follows itself).
        got_edges = {pair for pair, reply in zip(pairs, is_following, strict=True) if reply.following}
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
            assert got == want_rel, f"GetRelationships({actor}) = {got}, model says {want_rel}"

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
            got_s = [(self.local(s.user_id), s.mutual_count, s.score) for s in suggestions[u].suggestions]
            where = f"SuggestFollows({u}) = {got_s}"
            for c, _, _ in got_s:
                assert c != u, f"{where} suggests the user itself"
                assert (u, c) not in model.edges, f"{where} suggests {c}, whom {u} follows"
                assert (u, c) not in model.requests, f"{where} suggests {c}, whom {u} asked to follow"
                assert not model.blocked(u, c), f"{where} suggests {c}, blocked either way with {u}"
            fresh = model.suggestions(u)
            last = self.last_suggested.get(u) if SUGGESTIONS_MAY_BE_CACHED else None
            assert got_s in (fresh, last), (
                f"{where}; model computes {fresh}"
                + (f" (the previous answer, still cacheable, was {last})" if last is not None else "")
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

    async def list_followers(self, u: int) -> list[Entry]:
        reply = await self.env.stub.ListFollowers(pb.ListFollowersRequest(user_id=self.uid(u)))
        assert not reply.next_page_token, f"ListFollowers({u}): a next page after at most {N_USERS} entries"
        return [(self.local(e.user_id), e.followed_at.ToMicroseconds()) for e in reply.followers]

    async def list_following(self, u: int) -> list[Entry]:
        reply = await self.env.stub.ListFollowing(pb.ListFollowingRequest(user_id=self.uid(u)))
        assert not reply.next_page_token, f"ListFollowing({u}): a next page after at most {N_USERS} entries"
        return [(self.local(e.user_id), e.followed_at.ToMicroseconds()) for e in reply.following]

    async def relationships(self, actor: int) -> list[tuple[int, tuple[bool, ...]]]:
        request = pb.GetRelationshipsRequest(actor_id=self.uid(actor), target_ids=[self.uid(t) for t in range(N_USERS)])
        reply = await self.env.stub.GetRelationships(request)
        return [
            (
                self.local(r.target_id),
                (r.following, r.followed_by, r.requested, r.requested_by, r.blocking, r.blocked_by),
            )
            for r in reply.relationships
        ]

    async def follow_requests(self, u: int) -> list[Entry]:
        reply = await self.env.stub.ListFollowRequests(pb.ListFollowRequestsRequest(user_id=self.uid(u)))
        assert not reply.next_page_token, f"ListFollowRequests({u}): a next page after at most {N_USERS} entries"
        return [(self.local(e.user_id), e.requested_at.ToMicroseconds()) for e in reply.requests]

    async def mutual_follows(self, u: int) -> list[int]:
        reply = await self.env.stub.ListMutualFollows(pb.ListMutualFollowsRequest(user_id=self.uid(u)))
        assert not reply.next_page_token, f"ListMutualFollows({u}): a next page after at most {N_USERS} entries"
        return [self.local(e.user_id) for e in reply.users]

    async def known_followers(self, v: int, u: int) -> list[Entry]:
        request = pb.ListKnownFollowersRequest(viewer_id=self.uid(v), user_id=self.uid(u))
        reply = await self.env.stub.ListKnownFollowers(request)
        assert not reply.next_page_token, f"ListKnownFollowers({v}, {u}): a next page after at most {N_USERS}"
        return [(self.local(e.user_id), e.followed_at.ToMicroseconds()) for e in reply.followers]


def diff(name: str, got: set[Pair], want: set[Pair]) -> str:
    return f"{name}: extra {sorted(got - want)}, missing {sorted(want - got)}"


def run_machine(settings: Settings, check: Callable[[Env], None]) -> None:
    """Start the stack on a fresh event loop, hand it to ``check``, and stop it on the same loop."""
    loop = asyncio.new_event_loop()
    stack = contextlib.AsyncExitStack()
    try:
        stub = loop.run_until_complete(stack.enter_async_context(running_stack(settings)))
        check(Env(loop=loop, stub=stub))
    finally:
        loop.run_until_complete(stack.aclose())
        loop.close()


def test_relationship_rules_match_a_model_under_random_sequences(dynamodb_local: str, redis_url: str) -> None:
    """Random Follow/Unfollow/Block/Unblock/SetPrivacy/Accept/Reject/RemoveFollower sequences over 5 users: every
    write's outcome and, after each step, every read RPC for every user and pair agree with the model; counts
    converge to it at the end of each sequence."""

    def check(env: Env) -> None:
        class Machine(RelationshipMachine):
            pass

        Machine.env = env
        run_state_machine_as_test(Machine, settings=HYPOTHESIS_SETTINGS)

    run_machine(make_settings(dynamodb_local, redis_url), check)

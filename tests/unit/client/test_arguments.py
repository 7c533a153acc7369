"""Every method's arguments are checked before anything is sent: a bad one is a ``ValueError`` naming it."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any, cast

import pytest
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph_client import AsyncSocialGraphClient, SocialGraphClient, rpcs
from socialgraph_client.arguments import MAX_USER_ID, request, rule_for


class NoCalls:
    """Stands for a transport that must not be reached: the check comes first."""

    def call(self, *args: object) -> object:
        raise AssertionError(f"sent despite a bad argument: {args[:2]}")


class AsyncNoCalls:
    async def call(self, *args: object) -> object:
        raise AssertionError(f"sent despite a bad argument: {args[:2]}")


SYNC = SocialGraphClient(cast(Any, NoCalls()))
ASYNC = AsyncSocialGraphClient(cast(Any, AsyncNoCalls()))
SKIPPED = {"connect", "close"}


def methods() -> Iterator[str]:
    """Every public method of the clients but ``connect`` and ``close``."""
    for name, member in vars(SocialGraphClient).items():
        if not name.startswith("_") and callable(member) and name not in SKIPPED:
            yield name


def valid_arguments(name: str) -> dict[str, Any]:
    """Arguments the method accepts: each ID distinct, each list of IDs one long."""
    given: dict[str, Any] = {}
    for number, parameter in enumerate(inspect.signature(getattr(SocialGraphClient, name)).parameters.values()):
        if parameter.name == "self" or parameter.default is not inspect.Parameter.empty:
            continue
        if parameter.name.endswith("_ids"):
            given[parameter.name] = [number + 10]
        elif parameter.name.endswith("_id"):
            given[parameter.name] = number
        elif parameter.name == "private":
            given[parameter.name] = True
        else:
            raise AssertionError(f"{name}: no valid value for {parameter.name}")
    return given


def parameters_of(suffix: str) -> list[tuple[str, str]]:
    """(method, parameter) for each parameter of each method whose name ends with ``suffix``."""
    return [
        (name, parameter)
        for name in methods()
        for parameter in inspect.signature(getattr(SocialGraphClient, name)).parameters
        if parameter.endswith(suffix) or parameter == suffix
    ]


def refused(name: str, **arguments: Any) -> str:
    """The ``ValueError`` message both clients give for ``name(**arguments)``; they must agree."""
    messages = []
    for client in (SYNC, ASYNC):
        method = getattr(client, name)
        with pytest.raises(ValueError, match=r" must be ") as caught:  # noqa: PT012 - the call and its first step
            outcome = method(**arguments)
            if inspect.iscoroutine(outcome):
                _run(outcome)
            elif hasattr(outcome, "__anext__"):
                _run(outcome.__anext__())
            elif hasattr(outcome, "__next__"):
                next(outcome)
        messages.append(str(caught.value))
    assert messages[0] == messages[1]
    return messages[0]


def _run(step: Any) -> None:
    """Drive a coroutine that must fail at its first step (before any await of the transport)."""
    try:
        step.send(None)
    finally:
        step.close()


USER_IDS = parameters_of("_id")
BAD_IDS = ["5", -1, 0, True, 1.0, None, MAX_USER_ID + 1]


@pytest.mark.parametrize(("name", "parameter"), USER_IDS, ids=[f"{n}.{p}" for n, p in USER_IDS])
def test_every_user_id_argument_of_every_method_is_checked(name: str, parameter: str) -> None:
    """Not an integer (a string, a float, None, a bool), below 1 or above 2**64-1."""
    for bad in BAD_IDS:
        message = refused(name, **valid_arguments(name) | {parameter: bad})
        if bad == MAX_USER_ID + 1:
            assert (
                message == f"{parameter} must be at most 2**64-1 (user IDs are unsigned 64-bit integers), not {bad!r}"
            )
        else:
            assert message == f"{parameter} must be a positive integer, not {bad!r}"


def test_every_method_with_a_user_id_is_covered() -> None:
    """The parametrised test above covers at least one ID of every method but the one of lists only."""
    assert {name for name, _ in USER_IDS} == set(methods()) - {"batch_get_counts"}
    assert ("follow", "follower_id") in USER_IDS
    assert ("follow", "followee_id") in USER_IDS


LISTS = parameters_of("_ids")


@pytest.mark.parametrize(("name", "parameter"), LISTS)
def test_lists_of_ids_are_checked_item_by_item_and_a_string_is_not_a_list(name: str, parameter: str) -> None:
    base = valid_arguments(name)
    assert refused(name, **base | {parameter: [1, "2"]}) == f"{parameter}[1] must be a positive integer, not '2'"
    assert refused(name, **base | {parameter: "12"}) == f"{parameter} must be a list of user IDs, not '12'"
    assert refused(name, **base | {parameter: 7}) == f"{parameter} must be a list of user IDs, not 7"


COUNTS = parameters_of("page_size") + parameters_of("limit")


@pytest.mark.parametrize(("name", "parameter"), COUNTS, ids=[f"{n}.{p}" for n, p in COUNTS])
def test_page_sizes_and_limits_are_counts_from_zero(name: str, parameter: str) -> None:
    for bad in (-1, True, "10", 2**31):
        message = refused(name, **valid_arguments(name) | {parameter: bad})
        if bad == 2**31:
            assert message == f"{parameter} must be at most 2**31-1, not {bad!r}"
        else:
            assert message == f"{parameter} must be an integer from 0 up (0: the default), not {bad!r}"


def test_every_paged_method_is_covered() -> None:
    paged = {name for name, _ in parameters_of("page_size")}
    assert paged == {name for name in methods() if name.startswith(("list_", "iter_", "get_home"))}
    assert len(paged) == 14


TOKENS = parameters_of("page_token")


@pytest.mark.parametrize(("name", "parameter"), TOKENS)
def test_a_page_token_is_a_string(name: str, parameter: str) -> None:
    message = refused(name, **valid_arguments(name) | {parameter: None})
    assert message.startswith("page_token must be a str")


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("set_privacy", {"user_id": 1, "private": "yes"}, "private must be True or False, not 'yes'"),
        ("mute", {"muter_id": 1, "muted_id": 2, "notifications": 1}, "notifications must be True or False, not 1"),
        ("mute", {"muter_id": 1, "muted_id": 2, "duration": 3600}, "duration must be a datetime.timedelta or None"),
    ],
)
def test_flags_and_durations_are_checked(name: str, arguments: dict[str, Any], message: str) -> None:
    assert refused(name, **arguments).startswith(message)


class Index:
    """An integer that is not an ``int`` (as ``numpy.int64`` is): accepted through ``__index__``."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value


def test_good_arguments_are_converted_into_the_request() -> None:
    built = request(pb.FollowRequest, follower_id=Index(7), followee_id=MAX_USER_ID)
    assert (built.follower_id, built.followee_id) == (7, MAX_USER_ID)
    mute = request(pb.MuteRequest, muter_id=1, muted_id=2, duration=timedelta(seconds=-1), notifications=False)
    assert (mute.duration.seconds, mute.HasField("duration")) == (-1, True)  # the server gives its reason
    assert not request(pb.MuteRequest, muter_id=1, muted_id=2, duration=None).HasField("duration")
    listed = request(pb.ListFollowersRequest, user_id=1, page_size=0, page_token="")
    assert listed == pb.ListFollowersRequest(user_id=1)


def test_every_field_of_every_request_has_a_rule() -> None:
    """A field added to a request message without a rule here fails this test, not a caller's call."""
    fields = {field.name for rpc in rpcs.ALL for field in rpc.request.DESCRIPTOR.fields}
    rules: dict[str, Callable[[str, Any], object]] = {name: rule_for(name) for name in fields}
    assert len(rules) == len(fields)
    with pytest.raises(LookupError, match="no argument rule"):
        rule_for("colour")

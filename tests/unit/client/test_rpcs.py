"""The client's RPC table matches the services the protos declare, and both clients cover it."""

from __future__ import annotations

import inspect
import re

from socialgraph_client import AsyncSocialGraphClient, SocialGraphClient, rpcs
from socialgraph_client.rpcs import Kind

from tests.support.declared_rpcs import declared_methods


def declared() -> dict[str, tuple[str, str]]:
    """Every RPC of the protos' services: path -> (request, response) full names."""
    return {
        path: (method.input_type.full_name, method.output_type.full_name) for path, method in declared_methods().items()
    }


def test_table_lists_every_rpc_of_the_protos_with_its_types() -> None:
    """A proto RPC missing from ``rpcs.ALL`` (or typed differently) fails here."""
    table = {rpc.path: (rpc.request.DESCRIPTOR.full_name, rpc.response.DESCRIPTOR.full_name) for rpc in rpcs.ALL}
    assert len(table) == len(rpcs.ALL)
    assert table == declared()


def test_writes_are_the_rpcs_that_change_the_graph() -> None:
    """The kind picks the default deadline: every mutating RPC is a write, the list intersections are heavy."""
    writes = {rpc.name for rpc in rpcs.ALL if rpc.kind is Kind.WRITE}
    assert writes == {
        "Follow", "Unfollow", "SetPrivacy", "AcceptFollowRequest", "RejectFollowRequest",
        "Block", "Unblock", "RemoveFollower", "Mute", "Unmute",
        "DeactivateAccount", "ReactivateAccount", "DeleteAccount",
    }  # fmt: skip
    heavy = {rpc.name for rpc in rpcs.ALL if rpc.kind is Kind.HEAVY}
    assert heavy == {"SuggestFollows", "ListKnownFollowers", "ListMutualFollows"}


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def test_every_rpc_has_a_method_in_both_clients_and_every_list_an_iterator() -> None:
    """``list_followers`` for ListFollowers (pages), plus ``iter_followers`` for each list RPC."""
    for client in (SocialGraphClient, AsyncSocialGraphClient):
        for rpc in rpcs.ALL:
            assert callable(getattr(client, snake(rpc.name), None)), (client.__name__, rpc.name)
            if "page_token" in rpc.request.DESCRIPTOR.fields_by_name:
                iterator = "iter_" + snake(rpc.name).removeprefix("list_").removeprefix("get_")
                assert callable(getattr(client, iterator, None)), (client.__name__, iterator)


def public(client: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(getattr(client, name))
        for name in vars(client)
        if not name.startswith("_") and callable(getattr(client, name))
    }


def test_sync_and_async_clients_have_the_same_methods_and_parameters() -> None:
    """Same names, same parameters and defaults, same return types (``AsyncIterator`` for ``Iterator``)."""
    sync, aio = public(SocialGraphClient), public(AsyncSocialGraphClient)
    assert sync.keys() == aio.keys()
    assert len(sync) >= len(rpcs.ALL) + 6
    for name, signature in sync.items():
        other = aio[name]
        assert list(signature.parameters.values()) == list(other.parameters.values()), name
        want = str(other.return_annotation).replace("AsyncIterator", "Iterator")
        want = want.replace("AsyncSocialGraphClient", "SocialGraphClient")
        assert str(signature.return_annotation) == want, name
        if name not in ("connect", "close") and not name.startswith("iter_"):
            assert inspect.iscoroutinefunction(getattr(AsyncSocialGraphClient, name)), name
            assert not inspect.iscoroutinefunction(getattr(SocialGraphClient, name)), name

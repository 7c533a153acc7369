"""The routing rules of the packed Cluster fanout (``redis_client/cluster_packed.py``), without a
server: keys grouped by the owner of their slot, and error replies sorted into what is sent again
(MOVED to the slot's new owner, ASK to the named node) and what is raised (NOSCRIPT first)."""

from __future__ import annotations

from redis.crc import key_slot
from redis.exceptions import AskError, MovedError, NoScriptError, ResponseError

from graph_service.redis_client.cluster_packed import group_by_node, sort_replies
from graph_service.timelines import keys


def owner(slot: int) -> str:
    """A slot map of three masters, as ``redis-cli --cluster create`` splits the slots."""
    return "a" if slot <= 5460 else "b" if slot <= 10922 else "c"


def test_keys_are_grouped_by_the_owner_of_their_hash_tag_slot_in_the_order_given() -> None:
    users = list(range(1, 301))
    home = [keys.home(u) for u in users]
    groups = group_by_node(home, owner)
    assert set(groups) == {"a", "b", "c"}
    assert sorted(k for group in groups.values() for k in group) == sorted(home)
    for node, group in groups.items():  # a key's slot is the CRC16 of its hash tag (the user ID)
        assert group == [keys.home(u) for u in users if owner(key_slot(str(u).encode())) == node]


def test_keys_sharing_a_hash_tag_share_a_node() -> None:
    groups = group_by_node(["home_timeline:{7}", "recent:{7}", "x{7}y"], owner)
    assert list(groups.values()) == [["home_timeline:{7}", "recent:{7}", "x{7}y"]]


def test_no_keys_no_groups() -> None:
    assert group_by_node([], owner) == {}


def test_moved_keys_are_sent_to_the_new_owner_and_asked_keys_to_the_named_node() -> None:
    replies = sort_replies(
        [
            ("k1", MovedError("12 127.0.0.1:7001")),
            ("k2", AskError("13 127.0.0.1:7002")),
            ("k3", AskError("14 127.0.0.1:7002")),
            ("k4", AskError("15 10.0.0.9:7003")),
        ]
    )
    assert [(key, error.slot_id, error.port) for key, error in replies.moved] == [("k1", 12, 7001)]
    assert replies.asked == {("127.0.0.1", 7002): ["k2", "k3"], ("10.0.0.9", 7003): ["k4"]}
    assert replies.error is None


def test_the_first_error_is_raised_but_noscript_before_any_other() -> None:
    wrong = ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value")
    later = ResponseError("OOM command not allowed")
    noscript = NoScriptError("No matching script.")
    assert sort_replies([("k1", wrong), ("k2", later)]).error is wrong
    assert sort_replies([("k1", wrong), ("k2", noscript), ("k3", NoScriptError("again"))]).error is noscript


def test_redirects_and_an_error_reply_are_kept_apart() -> None:
    wrong = ResponseError("WRONGTYPE")
    replies = sort_replies([("k1", wrong), ("k2", MovedError("3 127.0.0.1:7001"))])
    assert replies.error is wrong
    assert [key for key, _ in replies.moved] == ["k2"]
    assert replies.asked == {}

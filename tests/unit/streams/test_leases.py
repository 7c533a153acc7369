"""The lease rules that need no DynamoDB: timing, who may take a shard, each reader's share, names."""

from __future__ import annotations

import os
import socket

import pytest

from graph_service.streams.leases import LeaseClock, LeaseView, fair_share, owner_id


@pytest.mark.parametrize("lease_seconds", [1.0, 2.0, 10.0, 60.0])
def test_a_dead_owners_shard_is_taken_within_the_lease_seconds(lease_seconds: float) -> None:
    """Granted for less than SG_LEASE_SECONDS, renewed and looked for often enough: the worst
    takeover (owner dead just after a renewal, survivor's look just before the expiry) fits."""
    clock = LeaseClock(lease_seconds)
    assert clock.look_seconds < clock.renew_seconds < clock.grant_seconds < lease_seconds
    assert clock.grant_seconds >= 3 * clock.renew_seconds  # two renewals may fail before it runs out
    assert clock.takeover_seconds <= 0.8 * lease_seconds  # the rest is for the calls' latency
    assert (LeaseClock(10).grant_seconds, LeaseClock(10).renew_seconds, LeaseClock(10).look_seconds) == (7, 2, 1)


def test_only_a_live_lease_of_another_owner_keeps_a_reader_off_a_shard() -> None:
    now = 1000.0
    assert not LeaseView().held_by_other("me", now)  # never owned, or released
    assert not LeaseView("me", now + 5).held_by_other("me", now)  # already mine
    assert not LeaseView("other", now - 0.001).held_by_other("me", now)  # expired: a dead owner's
    assert LeaseView("other", now + 0.001).held_by_other("me", now)
    assert LeaseView("other", now + 5).live_owner(now) == "other"
    assert LeaseView("other", now - 5).live_owner(now) is None


def test_each_reader_takes_free_shards_up_to_an_even_share_among_live_owners() -> None:
    assert fair_share(4, set(), "me") == 4  # alone: everything
    assert fair_share(4, {"me"}, "me") == 4
    assert fair_share(4, {"a"}, "me") == 2
    assert fair_share(5, {"a", "me"}, "me") == 3  # rounded up: together they can hold every shard
    assert fair_share(1, {"a", "b"}, "me") == 1
    assert fair_share(0, {"a"}, "me") == 0


def test_owner_names_tell_host_and_process_and_never_repeat() -> None:
    first, second = owner_id(), owner_id()
    assert first != second
    host, pid, _ = first.rsplit(":", 2)
    assert (host, pid) == (socket.gethostname(), str(os.getpid()))

"""A tracking link's rules, on a transport the test plays (no server): a fence answered says yes; one
not answered within the Redis timeout says no and aborts the connection; the reads waiting for one
fence share it, and a cancelled one does not cancel the others; a heartbeat goes out when no read
sends fences; a reply that is not a fence's drops the link; on a cluster master, the probes of a
fence say no for a slot the node no longer serves."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.crc import key_slot

from graph_service.cache.tracking_link import CLUSTER_SLOTS, FENCE, HEARTBEAT_TIMEOUTS, TrackingLink, probe_key

TIMEOUT = 0.05
TRUSTED = b"*1\r\n$5\r\ntests\r\n"


class Transport:
    """What a link uses of an asyncio transport; answers each write with ``reply`` while ``answering``."""

    def __init__(self, link: TrackingLink, reply: bytes = TRUSTED) -> None:
        self.link = link
        self.written: list[bytes] = []
        self.answering = False
        self.reply = reply
        self.aborted = False
        self.wrote = asyncio.Event()

    def is_closing(self) -> bool:
        return self.aborted

    def write(self, data: bytes) -> None:
        self.written.append(data)
        self.wrote.set()
        if self.answering:
            asyncio.get_running_loop().call_soon(self.link.data_received, self.reply)

    def abort(self) -> None:
        if not self.aborted:
            self.aborted = True
            asyncio.get_running_loop().call_soon(self.link.connection_lost, None)

    @property
    def fences(self) -> int:
        return sum(data.count(FENCE) for data in self.written)


class Events:
    def __init__(self) -> None:
        self.invalidated: list[list[Any] | None] = []
        self.moved = 0
        self.lost = 0


@contextlib.asynccontextmanager
async def link_of(
    *, trust: bool = True, answering: bool = False, gap: float = 0.0
) -> AsyncIterator[tuple[TrackingLink, Transport, Events]]:
    """A link on a transport the test plays; fences paced ``gap`` apart (none: each goes out as
    soon as the one before it is answered)."""
    events = Events()

    def moved() -> None:
        events.moved += 1

    def lost(link: TrackingLink) -> None:
        events.lost += 1

    link = TrackingLink(
        timeout=TIMEOUT,
        trust=trust,
        invalidated=events.invalidated.append,
        seen=lambda generation: generation is not None,
        moved=moved,
        lost=lost,
        gap=gap,
    )
    transport = Transport(link)
    transport.answering = answering
    link.connection_made(transport)  # type: ignore[arg-type]  # the transport the test plays
    link._watch_fences()
    try:
        yield link, transport, events
    finally:
        link.close()
        await asyncio.wait_for(link.closed, 1)


async def test_an_answered_fence_says_yes_and_is_not_given_up_later() -> None:
    async with link_of(answering=True) as (link, transport, events):
        assert await link.ask() is True
        await asyncio.sleep(3 * TIMEOUT)  # past its timeout: answered, it is not given up on
        assert not transport.aborted
        assert events.lost == 0


async def test_a_fence_not_answered_within_the_timeout_says_no_and_aborts_the_connection() -> None:
    async with link_of() as (link, transport, events):
        started = time.monotonic()
        answers = await asyncio.gather(*(link.ask() for _ in range(5)))
        waited = time.monotonic() - started
        assert answers == [False] * 5
        assert TIMEOUT <= waited < TIMEOUT + 0.5, waited
        assert transport.fences == 1  # the first went out; the others waited for the next, never sent
        assert transport.aborted
        await asyncio.wait_for(link.closed, 1)
        assert events.lost == 1
        assert await asyncio.wait_for(link.ask(), 1) is False  # the connection is gone: at once


async def test_reads_waiting_behind_a_fence_in_flight_share_the_next_one() -> None:
    async with link_of() as (link, transport, _):
        first = link.ask()
        behind = [link.ask() for _ in range(3)]
        assert len({id(answer) for answer in behind}) == 1  # one answer for all three
        assert transport.fences == 1
        transport.answering = True
        link.data_received(TRUSTED)  # the first fence's answer: the next goes out, answered at once
        assert await first is True
        assert await asyncio.gather(*behind) == [True] * 3
        assert transport.fences == 2


async def test_a_cancelled_read_does_not_cancel_the_others_waiting_for_its_fence() -> None:
    async with link_of() as (link, transport, _):
        in_flight = link.ask()  # the two reads below wait for the next fence, together
        cancelled = asyncio.create_task(_wait(link))
        other = asyncio.create_task(_wait(link))
        await asyncio.sleep(0)  # the loop runs ready tasks in order: both have asked by the time this resumes
        assert link._next is not None
        assert len(link._next.answer._callbacks) == 2  # type: ignore[attr-defined]  # both wait on the one answer
        cancelled.cancel()
        transport.answering = True
        link.data_received(TRUSTED)  # the fence in flight; the next goes out and is answered
        assert await in_flight is True
        assert await other is True
        with pytest.raises(asyncio.CancelledError):
            await cancelled


async def _wait(link: TrackingLink) -> bool:
    return await link.ask()


async def test_a_reply_when_no_fence_is_in_flight_drops_the_link() -> None:
    async with link_of() as (link, transport, events):
        link.data_received(TRUSTED)
        assert transport.aborted
        await asyncio.wait_for(link.closed, 1)
        assert events.lost == 1


async def test_a_reply_that_is_not_the_trust_check_s_drops_the_link_and_says_no() -> None:
    async with link_of() as (link, transport, _):
        answer = link.ask()
        link.data_received(b"-NOSCRIPT No matching script\r\n")
        assert await answer is False
        assert transport.aborted


async def test_invalidations_are_handed_on_with_their_keys_or_none_after_a_flush() -> None:
    async with link_of() as (link, _, events):
        link.data_received(b">2\r\n$10\r\ninvalidate\r\n*2\r\n$8\r\nsg:{1}:a\r\n$8\r\nsg:{2}:b\r\n>2\r\n$10\r\ninval")
        link.data_received(b"idate\r\n_\r\n")  # split across reads, and a FLUSHALL's null
        assert events.invalidated == [["sg:{1}:a", "sg:{2}:b"], None]


async def test_the_heartbeat_finds_a_dead_link_without_reads() -> None:
    async with link_of(answering=True) as (_, transport, events):
        deadline = time.monotonic() + 2 + 2 * HEARTBEAT_TIMEOUTS * TIMEOUT
        while transport.fences < 2:  # a live link: the heartbeat's fences are answered
            assert time.monotonic() < deadline, "no heartbeat"
            await asyncio.sleep(TIMEOUT / 5)
        assert not transport.aborted
        transport.answering = False  # then the link dies: the next heartbeat goes unanswered
        deadline = time.monotonic() + 1 + (HEARTBEAT_TIMEOUTS + 1) * TIMEOUT
        while not transport.aborted:
            assert time.monotonic() < deadline, "a dead link went unnoticed"
            await asyncio.sleep(TIMEOUT / 5)
        await asyncio.wait_for(asyncio.shield(_closed(transport.link)), 1)
        assert events.lost == 1


async def _closed(link: TrackingLink) -> None:
    await link.closed


async def test_reads_keep_the_heartbeat_quiet() -> None:
    """Fences that reads send and Redis answers are proof enough: no heartbeat goes out meanwhile."""
    async with link_of(answering=True) as (link, transport, _):
        end = time.monotonic() + 2 * HEARTBEAT_TIMEOUTS * TIMEOUT
        reads = 0
        while time.monotonic() < end:
            assert await link.ask() is True
            reads += 1
            await asyncio.sleep(TIMEOUT / 2)  # a fence answered well within the heartbeat's interval
        assert transport.fences == reads


def test_every_cluster_slot_has_a_probe_key_of_its_own_outside_the_cache_s_prefix() -> None:
    keys = [probe_key(slot) for slot in range(CLUSTER_SLOTS)]
    assert [key_slot(key.encode()) for key in keys] == list(range(CLUSTER_SLOTS))
    assert not any(key.startswith("sg:") for key in keys)


async def test_a_cluster_fence_probes_each_slot_and_says_no_for_one_the_node_gave_away() -> None:
    async with link_of(trust=False) as (link, transport, events):
        answer = link.ask({7, 9000})
        (written,) = transport.written
        assert probe_key(7).encode() in written
        assert probe_key(9000).encode() in written
        assert FENCE not in written  # the trust check goes to the trust record's node
        link.data_received(b":0\r\n:0\r\n")
        assert await answer is True

        answer = link.ask({7, 9000})
        link.data_received(b":0\r\n-MOVED 9000 127.0.0.1:7002\r\n")
        assert await answer is False
        assert events.moved == 1

        answer = link.ask({9000})
        link.data_received(b"-ASK 9000 127.0.0.1:7002\r\n")  # migrating: no, but not moved yet
        assert await answer is False
        assert events.moved == 1
        assert not transport.aborted


async def test_a_heartbeat_of_a_node_without_the_trust_record_is_a_ping() -> None:
    async with link_of(trust=False) as (link, transport, _):
        answer = link.ask()
        assert transport.written == [b"*1\r\n$4\r\nPING\r\n"]
        link.data_received(b"+PONG\r\n")
        assert await answer is True


async def test_fences_are_paced_a_gap_apart_and_shared_by_the_reads_meanwhile() -> None:
    """Idle, a read's fence goes out at once; one asked within the gap after the last fence waits
    out the gap, and every read asking meanwhile shares it."""
    gap = 0.05
    async with link_of(answering=True, gap=gap) as (link, transport, _):
        first = link.ask()
        assert transport.fences == 1  # at once: no fence went out before
        assert await first is True
        started = asyncio.get_running_loop().time()
        later = [link.ask() for _ in range(5)]
        assert transport.fences == 1  # within the gap: waiting
        assert await asyncio.gather(*later) == [True] * 5
        assert asyncio.get_running_loop().time() - started >= gap * 0.9
        assert transport.fences == 2  # one fence for the five

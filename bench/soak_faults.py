"""The soak's faults: a schedule spread over the run, each fault injected and healed by the soak
itself, with the times it happened (the windows in which errors are expected)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from bench.soak_stack import COMPONENTS, SoakStack

__all__ = ["DESCRIPTIONS", "GRACE", "Crash", "Fault", "inject", "plan", "supervise", "windows"]

ORDER = ("redis", "counters", "fanout", "broker")
"""Each round in this order: Redis restarts empty (timelines live only in Redis), so putting it
first leaves the round's other faults inside the stretch whose timelines are checked."""
DOWN = {"redis": 10.0, "counters": 3.0, "fanout": 3.0, "broker": 5.0}
DESCRIPTIONS = {
    "redis": "Redis stopped (SIGTERM), 10 s down, started again empty",
    "counters": "counters kill -9, started again after 3 s",
    "fanout": "fanout kill -9, started again after 3 s",
    "broker": "broker kill -9, started again after 5 s (empty), then create-topics",
}
WATCH = {
    "redis": ("serve", "counters", "fanout"),
    "counters": ("counters",),
    "fanout": ("fanout",),
    "broker": ("relay", "fanout"),
}
"""Whose /readyz must answer 200 again for the stack to count as recovered."""
GRACE = 5.0
"""Seconds after a heal during which errors still count as the fault's (clients reconnecting)."""
READY_DEADLINE = 60.0


@dataclass
class Fault:
    kind: str
    planned: float
    """Seconds after the start of the run; the times below likewise."""
    injected: float | None = None
    healed: float | None = None
    ready: float | None = None
    """When every component of ``WATCH`` answered /readyz 200 again (None: not within 60 s)."""
    error: str | None = None


def plan(seconds: float, rounds: int) -> list[Fault]:
    """``rounds`` times each fault (in ``ORDER``), evenly spread over ``seconds``."""
    kinds = [kind for _ in range(rounds) for kind in ORDER]
    return [Fault(kind, round(seconds * (i + 1) / (len(kinds) + 1), 1)) for i, kind in enumerate(kinds)]


def windows(faults: list[Fault]) -> list[tuple[float, float]]:
    """(from, to) of each injected fault, ``GRACE`` seconds past its heal (open-ended if it never healed)."""
    return [
        (f.injected, f.healed + GRACE if f.healed is not None else float("inf"))
        for f in faults
        if f.injected is not None
    ]


def _break(stack: SoakStack, kind: str) -> None:
    if kind == "redis":
        stack.stop_redis()
    elif kind == "broker":
        stack.kill_broker()
    else:
        stack.kill_child(kind)


def _heal(stack: SoakStack, kind: str) -> None:
    if kind == "redis":
        stack.start_redis()
    elif kind == "broker":
        stack.start_broker()
    else:
        stack.start_child(kind)


async def _watch_ready(stack: SoakStack, fault: Fault, since: Callable[[], float]) -> None:
    deadline = time.monotonic() + READY_DEADLINE
    while time.monotonic() < deadline:
        ready = await asyncio.gather(*(asyncio.to_thread(stack.ready, c) for c in WATCH[fault.kind]))
        if all(ready):
            fault.ready = since()
            return
        await asyncio.sleep(0.25)


async def inject(stack: SoakStack, faults: list[Fault], origin: float, say: Callable[[str], None]) -> None:
    """Each fault at its planned time (after the previous one healed): broken, left down, healed.
    The blocking steps run in threads, so the load goes on meanwhile; ``say`` tells the progress."""

    def since() -> float:
        return round(time.monotonic() - origin, 1)

    watchers = []
    for fault in faults:
        await asyncio.sleep(max(0.0, origin + fault.planned - time.monotonic()))
        fault.injected = since()
        say(f"{fault.injected:.1f} s: {DESCRIPTIONS[fault.kind]}")
        try:
            await asyncio.to_thread(_break, stack, fault.kind)
            await asyncio.sleep(DOWN[fault.kind])
            await asyncio.to_thread(_heal, stack, fault.kind)
        except Exception as exc:  # reported; the soak goes on to its checks
            fault.error = f"{type(exc).__name__}: {exc}"
            say(f"{since():.1f} s: {fault.kind} fault failed: {fault.error}")
            continue
        fault.healed = since()
        say(f"{fault.healed:.1f} s: {fault.kind} healed")
        watchers.append(asyncio.create_task(_watch_ready(stack, fault, since)))
    await asyncio.gather(*watchers)


@dataclass
class Crash:
    """A process that ended without the soak stopping it, and what followed: a child of the service
    is started again with backoff (1 s, doubling to 16 s) until its metrics port answers, its later
    exits meanwhile belong to the same crash; a server is left down."""

    component: str
    at: float
    exit_code: int
    last_words: str
    again: list[str] = field(default_factory=list)
    """Later exits before it came back up: "exit 3 at 98.7 s: <last words>"."""
    up: float | None = None
    """When its metrics port answered again."""


RESTART_DELAYS = (1.0, 2.0, 4.0, 8.0, 16.0)


async def supervise(
    stack: SoakStack, origin: float, stop: asyncio.Event, say: Callable[[str], None], crashes: list[Crash]
) -> None:
    """Until ``stop``: note every process that ends unprompted and start the ``python -m graph_service``
    children again, as a process manager would (DynamoDB Local in memory, Redis and the broker are
    left down: starting them would hide what was lost)."""
    open_: dict[str, Crash] = {}
    restart_at: dict[str, float] = {}

    def since() -> float:
        return round(time.monotonic() - origin, 1)

    while not stop.is_set():
        for name, code, last_words in await asyncio.to_thread(stack.exited):
            say(f"{since():.1f} s: {name} exited {code} unprompted: {last_words}")
            crash = open_.get(name)
            if crash is None:
                crash = Crash(name, since(), code, last_words)
                crashes.append(crash)
            else:
                crash.again.append(f"exit {code} at {since():.1f} s: {last_words}")
            if name in COMPONENTS:
                open_[name] = crash
                delay = RESTART_DELAYS[min(len(crash.again), len(RESTART_DELAYS) - 1)]
                restart_at[name] = time.monotonic() + delay
        for name, at in list(restart_at.items()):
            if time.monotonic() >= at:
                del restart_at[name]
                await asyncio.to_thread(stack.respawn, name)
        for name, crash in list(open_.items()):
            if name not in restart_at and name not in stack.down and await asyncio.to_thread(stack.listening, name):
                crash.up = since()
                del open_[name]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.5)

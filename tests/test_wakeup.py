"""The streams' wake-up call (server/wakeup.py) behaves as asyncio.Event does for its one
waiter: a set before the wait is not lost, clear makes the next wait wait, a cancelled
waiter leaves it usable, and a second waiter at once is refused, not silently starved."""

from __future__ import annotations

import asyncio
import tracemalloc

import pytest

from server.wakeup import Wakeup

WAIT = 5.0  # a deadline for awaited events, never reached when the code is right


async def test_a_set_before_the_wait_is_kept_until_cleared() -> None:
    wakeup = Wakeup()
    wakeup.set()
    assert wakeup.is_set()
    await asyncio.wait_for(wakeup.wait(), WAIT)  # returns at once
    await asyncio.wait_for(wakeup.wait(), WAIT)  # still set: waits for nothing
    wakeup.clear()
    assert not wakeup.is_set()
    waiting = asyncio.create_task(wakeup.wait())
    await asyncio.sleep(0)
    assert not waiting.done()
    wakeup.set()
    await asyncio.wait_for(waiting, WAIT)


async def test_the_waiter_wakes_on_set_once_however_many_sets() -> None:
    wakeup = Wakeup()
    woken = 0

    async def waiter() -> None:
        nonlocal woken
        for _ in range(3):
            await wakeup.wait()
            wakeup.clear()
            woken += 1

    task = asyncio.create_task(waiter())
    await asyncio.sleep(0)  # the waiter runs until it waits
    for expected in (1, 2, 3):
        assert woken == expected - 1
        wakeup.set()
        wakeup.set()  # a second set while set changes nothing
        await asyncio.sleep(0)  # it wakes, counts and waits again (or ends)
        assert woken == expected
    await asyncio.wait_for(task, WAIT)


async def test_a_cancelled_waiter_leaves_it_usable() -> None:
    wakeup = Wakeup()
    waiting = asyncio.create_task(wakeup.wait())
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert not wakeup.is_set()
    again = asyncio.create_task(wakeup.wait())
    await asyncio.sleep(0)
    wakeup.set()
    await asyncio.wait_for(again, WAIT)


async def test_a_second_waiter_at_once_is_refused() -> None:
    wakeup = Wakeup()
    first = asyncio.create_task(wakeup.wait())
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="one waiter"):
        await wakeup.wait()
    wakeup.set()
    await asyncio.wait_for(first, WAIT)


def _bytes_of(make: type) -> int:
    """What 1,000 of them hold, as Python allocated it."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        made = [make() for _ in range(1000)]
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(made) == 1000
    return held


def test_it_holds_a_fifth_of_an_events_memory_or_less() -> None:
    assert _bytes_of(Wakeup) * 5 < _bytes_of(asyncio.Event)

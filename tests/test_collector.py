"""The server's own schedule of full collections (server/lifecycle.py ``keep_collected``):
every pass collects what came since the last and freezes what survives; every
``thaw_every``-th pass first thaws, so a garbage cycle among frozen objects is freed then, not
never."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

from server.lifecycle import keep_collected

DEADLINE = 30.0


class Node:
    me: Node | None = None


def cycle() -> weakref.ref[Node]:
    """A garbage cycle nothing else holds (only refcounting cannot free it)."""
    node = Node()
    node.me = node
    return weakref.ref(node)


@pytest.fixture
def passes() -> Iterator[list[asyncio.Event]]:
    """One event per full collection from here on, set when it is over."""
    done: list[asyncio.Event] = [asyncio.Event() for _ in range(8)]
    count = 0

    def told(phase: str, info: dict[str, Any]) -> None:
        nonlocal count
        if phase == "stop" and info["generation"] == 2 and count < len(done):
            done[count].set()
            count += 1

    was_enabled = gc.isenabled()
    gc.disable()  # only the passes collect (as the server's young collections would not)
    gc.callbacks.append(told)
    try:
        yield done
    finally:
        gc.callbacks.remove(told)
        gc.unfreeze()  # the passes froze this whole process: give it back to the collector
        if was_enabled:
            gc.enable()


async def test_a_fresh_garbage_cycle_is_freed_by_the_next_pass(
        passes: list[asyncio.Event]) -> None:
    collecting = asyncio.get_running_loop().create_task(keep_collected(0.01, thaw_every=100))
    try:
        await asyncio.wait_for(passes[0].wait(), DEADLINE)
        fresh = cycle()
        assert fresh() is not None
        await asyncio.wait_for(passes[1].wait(), DEADLINE)
        assert fresh() is None
    finally:
        collecting.cancel()


async def test_a_frozen_garbage_cycle_lives_until_the_thaw_and_no_longer(
        passes: list[asyncio.Event]) -> None:
    frozen = cycle()
    gc.freeze()  # as a pass leaves what survived it
    collecting = asyncio.get_running_loop().create_task(keep_collected(0.01, thaw_every=3))
    try:
        await asyncio.wait_for(passes[1].wait(), DEADLINE)  # passes 1 and 2: frozen, kept
        assert frozen() is not None
        await asyncio.wait_for(passes[2].wait(), DEADLINE)  # pass 3 thaws first
        assert frozen() is None
    finally:
        collecting.cancel()

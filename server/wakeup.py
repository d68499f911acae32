"""One task's wake-up call: ``asyncio.Event``'s set, clear, is_set and wait, for a single
waiter at a time, in about a tenth of its memory.

Every open Play stream holds two (its writer's, woken by new messages; its reader's, woken
by room for results) and every WatchTable stream one; an ``asyncio.Event`` keeps a deque of
waiters, about 600 bytes even when empty (issue 29: memory per table). This keeps the one
waiter's future, made on the loop it first waits on, and looks the loop up only once."""

from __future__ import annotations

import asyncio


class Wakeup:
    __slots__ = ("_is_set", "_loop", "_waiter")

    def __init__(self) -> None:
        self._is_set = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiter: asyncio.Future[None] | None = None

    def is_set(self) -> bool:
        return self._is_set

    def set(self) -> None:
        """Set it; the task waiting, if any, wakes."""
        if self._is_set:
            return
        self._is_set = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def clear(self) -> None:
        self._is_set = False

    async def wait(self) -> None:
        """Return once it is set (at once if it is). One waiter at a time: a second task
        waiting meanwhile is a bug (RuntimeError). A waiter cancelled leaves it as it was."""
        if self._is_set:
            return
        if self._waiter is not None:
            raise RuntimeError("a Wakeup has one waiter at a time")
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        waiter = self._waiter = self._loop.create_future()
        try:
            await waiter
        finally:
            self._waiter = None

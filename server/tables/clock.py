"""Time for the tables: the wall clock (deadlines are shown to players as timestamps) and
callbacks after a delay. The server uses the event loop; tests drive a manual clock."""

from __future__ import annotations

import asyncio
import contextvars
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Protocol


class Handle(Protocol):
    def cancel(self) -> None: ...


class Scheduler(Protocol):
    """What a table needs of time: ``now()`` in seconds since the epoch, and a callback
    after a delay (its handle cancels it)."""

    def now(self) -> float: ...

    def call_later(self, delay: float, callback: Callable[[], None]) -> Handle: ...


class LoopScheduler:
    """The running asyncio loop, with the wall clock."""

    def now(self) -> float:
        return time.time()

    def call_later(self, delay: float, callback: Callable[[], None]) -> Handle:
        # An empty context: a timer is not part of the request that armed it (its logs
        # must not carry that request's fields).
        return asyncio.get_running_loop().call_later(max(0.0, delay), callback,
                                                     context=contextvars.Context())


class _ManualHandle:
    __slots__ = ("is_cancelled",)

    def __init__(self) -> None:
        self.is_cancelled = False

    def cancel(self) -> None:
        self.is_cancelled = True


class ManualScheduler:
    """A clock that moves only when told (tests, simulations): ``advance`` runs every
    callback that falls due, in time order, at its own time."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self._now = start
        self._queue: list[tuple[float, int, _ManualHandle, Callable[[], None]]] = []
        self._order = itertools.count()

    def now(self) -> float:
        return self._now

    def call_later(self, delay: float, callback: Callable[[], None]) -> Handle:
        handle = _ManualHandle()
        heapq.heappush(self._queue, (self._now + max(0.0, delay), next(self._order), handle,
                                     callback))
        return handle

    def pending(self) -> int:
        return sum(not h.is_cancelled for _, _, h, _ in self._queue)

    def next_due(self) -> float | None:
        while self._queue and self._queue[0][2].is_cancelled:
            heapq.heappop(self._queue)
        return self._queue[0][0] if self._queue else None

    def run_due(self) -> int:
        """Run the callbacks due now (and those they schedule for now); how many ran."""
        ran = 0
        while (due := self.next_due()) is not None and due <= self._now:
            _, _, handle, callback = heapq.heappop(self._queue)
            handle.is_cancelled = True
            callback()
            ran += 1
        return ran

    def advance(self, seconds: float) -> int:
        """Move the clock forward, running each callback at its due time."""
        end = self._now + seconds
        ran = 0
        while (due := self.next_due()) is not None and due <= end:
            self._now = max(self._now, due)
            ran += self.run_due()
        self._now = end
        return ran

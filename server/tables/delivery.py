"""From commit to visible: a table's events reach its watchers, and the lobby's changes its
watchers, only once the store has committed them.

One task for the server's life does it: woken at the end of every step, it waits for the
next commit (which also commits what the server did by itself, bots and timers, without a
request waiting on it), then delivers what that commit made durable.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Awaitable, Callable

from server.observability import Metrics
from server.store.base import Storage, StorageFailed
from server.tables.lobby import Lobby
from server.tables.table import Table


class Delivery:
    def __init__(self, store: Storage, lobby: Lobby, metrics: Metrics,
                 durable: Callable[[], Awaitable[None]]) -> None:
        self._store = store
        self._lobby = lobby
        self._metrics = metrics
        self._durable = durable
        self._undelivered: dict[Table, int] = {}  # table -> the sequence its watchers await
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    def table_changed(self, table: Table) -> None:
        """A step of ``table`` ended: deliver its events after the next commit."""
        self._undelivered[table] = table.sequence
        self.kick()

    def forget(self, table: Table) -> None:
        """The table left this node: nothing of it is delivered any more."""
        self._undelivered.pop(table, None)

    def kick(self) -> None:
        """Wake the task (started on first use)."""
        if self._task is None:
            with contextlib.suppress(RuntimeError):  # no loop: the next sync commits it
                self._task = asyncio.get_running_loop().create_task(
                    self._run(), context=contextvars.Context())
        self._wake.set()

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _run(self) -> None:
        try:
            while True:
                if not (self._undelivered or self._store.has_pending
                        or self._lobby.has_staged):
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                marks, self._undelivered = self._undelivered, {}
                staged = self._lobby.take_staged()
                try:
                    await self._durable()
                except StorageFailed:
                    return  # fail-stop: nothing more is shown; the server is stopping
                resync = self._metrics.snapshots_for_slow.inc
                for table, upto in marks.items():
                    if not table.is_released:
                        table.fanout.deliver(upto, resync)
                self._lobby.deliver(staged)
        finally:
            self._task = None

"""From commit to visible, in one place: ``Delivery`` is the barrier every answer waits for
(``committed``) and the only one that shows what a commit made durable: a table's events to
its watchers (``Fanout.deliver``), the lobby's changes to its watchers (``Lobby.deliver``).

``committed`` syncs the store, then evicts the tables another node took meanwhile (their
commits were refused: nobody may hear of them), and raises TABLE_MOVED when the table asked
about was one of them. One task for the server's life shows what was committed: woken at
the end of every step, it waits for the next commit (which also commits what the server did
by itself, bots and timers, without a request waiting on it), then delivers what that commit
made durable. A store that fails shows nothing more (fail-stop).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Callable

from server.errors import ServiceError
from server.observability import Metrics
from server.store.base import Storage, StorageFailed
from server.tables.lobby import Lobby
from server.tables.ownership import OwnershipPort
from server.tables.table import Table

Evict = Callable[[str, ServiceError], None]  # a lost table leaves memory, its streams told


class Delivery:
    def __init__(self, store: Storage, lobby: Lobby, metrics: Metrics,
                 ownership: OwnershipPort, evict: Evict) -> None:
        self._store = store
        self._lobby = lobby
        self._metrics = metrics
        self._ownership = ownership
        self._evict = evict
        self._undelivered: dict[Table, int] = {}  # table -> the sequence its watchers await
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    async def committed(self, table: Table | None = None) -> None:
        """Return once everything done so far is committed. Tables another node took from
        this one meanwhile are evicted first; ``table`` among them: TABLE_MOVED.

        :raises StorageFailed: the store failed (fail-stop).
        :raises ServiceError: UNAVAILABLE TABLE_MOVED: ``table`` moved to another node.
        """
        await self._store.sync()
        for table_id in self._ownership.take_lost():
            self._evict(table_id, ServiceError.table_moved("this table moved to another node"))
        if table is not None and table.is_lost:
            raise ServiceError.table_moved("this table moved to another node")

    def step_ended(self, table: Table) -> None:
        """A table changed (a step ended, it was made): deliver its events after the next
        commit. A table that left this node: nothing more of it is delivered (the lobby's
        change, its removal, still is)."""
        if table.is_released:
            self._undelivered.pop(table, None)
        else:
            self._undelivered[table] = table.sequence
        self.kick()

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
                    await self.committed()
                except StorageFailed:
                    return  # fail-stop: nothing more is shown; the server is stopping
                resync = self._metrics.snapshots_for_slow.inc
                for table, upto in marks.items():
                    if not table.is_released:  # evicted meanwhile: its commits were refused
                        table.fanout.deliver(upto, resync)
                self._lobby.deliver(staged)
        finally:
            self._task = None

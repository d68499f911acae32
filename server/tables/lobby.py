"""The lobby: which tables a client may want to see (ListTables), and the WatchLobby streams.

``LobbySource`` is what the service asks of a lobby, whoever keeps it: ``Lobby`` here, from
this node's tables in memory (paged by creation order), or a cluster's, from the shared
database (paged by creation time and table id). Both use one page-token format and both
mark a truncated snapshot.

Here, a table's lobby key (phase, hand number, seats) is compared at the end of each of its
steps, only while someone watches the lobby; a change is staged with the table's summary and
shown once the step is durable, like a table's own events. Each stream's queue is bounded; a
stream that falls behind gets a fresh snapshot instead of its backlog.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from copas.v1 import copas_pb2

from server.tables import paging, views
from server.tables.views import TableFacts

SNAPSHOT_MAX = 100
LobbyKey = tuple[object, ...]


@dataclass(frozen=True, slots=True)
class LobbyFilter:
    """ListTables' and WatchLobby's filters."""

    only_joinable: bool = False
    preset: str = ""
    """Empty: any preset."""
    players: int = 0
    """0: any number of players."""
    include_finished: bool = False

    def matches(self, table: TableFacts) -> bool:
        if table.is_released:
            return False
        if table.is_finished and not self.include_finished:
            return False
        if self.only_joinable and not (table.is_waiting and table.has_free_seat()):
            return False
        if self.preset and table.preset != self.preset:
            return False
        return not (self.players and table.rules.players != self.players)


ANY_TABLE = LobbyFilter()


def lobby_key(table: TableFacts) -> LobbyKey:
    """What the lobby shows of a table changes when this does."""
    game = table.game
    return (table.is_released, views.phase_of(table), game.hand_number if game else -1,
            tuple((s.is_taken, s.name, game.has_left[s.number] if game else False)
                  for s in table.seats))


class LobbySource(Protocol):
    """What ListTables and WatchLobby ask of the lobby."""

    async def page(self, size: int, token: str, wanted: LobbyFilter
                   ) -> tuple[list[copas_pb2.TableSummary], str]:
        """Matching tables, newest first, after the page ``token``; and the next token."""

    def watch(self, wanted: LobbyFilter) -> AsyncIterator[copas_pb2.WatchLobbyResponse]:
        """A snapshot, then the tables added, changed and removed."""


class LobbyWatcher:
    __slots__ = ("filter", "is_closed", "needs_snapshot", "queue", "shown", "wakeup")

    def __init__(self, lobby_filter: LobbyFilter) -> None:
        self.filter = lobby_filter
        self.queue: deque[copas_pb2.WatchLobbyResponse] = deque()
        self.shown: set[str] = set()
        self.wakeup = asyncio.Event()
        self.needs_snapshot = True
        self.is_closed = False

    def push(self, message: copas_pb2.WatchLobbyResponse, limit: int) -> None:
        if self.needs_snapshot:
            return
        if len(self.queue) >= limit:
            self.queue.clear()
            self.needs_snapshot = True
        else:
            self.queue.append(message)
        self.wakeup.set()

    def close(self) -> None:
        self.is_closed = True
        self.wakeup.set()


class Lobby:
    """This node's lobby: its tables (newest last in ``tables()``), the WatchLobby streams,
    and table changes waiting for the disk."""

    def __init__(self, queue_limit: int, tables: Callable[[], Iterable[TableFacts]],
                 durable: Callable[[], Awaitable[None]]) -> None:
        self.watchers: set[LobbyWatcher] = set()
        self.queue_limit = queue_limit
        self._tables = tables
        self._durable = durable
        self._keys: dict[str, LobbyKey] = {}
        self._staged: list[tuple[TableFacts, copas_pb2.TableSummary]] = []

    def table_changed(self, table: TableFacts) -> None:
        """At a step's end: stage the table's summary when what the lobby shows changed."""
        if not self.watchers:
            return
        key = lobby_key(table)
        if self._keys.get(table.id) == key:
            return
        if table.is_released:
            self._keys.pop(table.id, None)
        else:
            self._keys[table.id] = key
        self._staged.append((table, views.summary(table)))

    @property
    def has_staged(self) -> bool:
        return bool(self._staged)

    def take_staged(self) -> list[tuple[TableFacts, copas_pb2.TableSummary]]:
        """The changes staged so far (the next commit makes them durable)."""
        staged, self._staged = self._staged, []
        return staged

    def deliver(self, staged: list[tuple[TableFacts, copas_pb2.TableSummary]]) -> None:
        """``staged`` is durable: show it."""
        for table, summary in staged:
            for watcher in self.watchers:
                is_shown = table.id in watcher.shown
                if watcher.filter.matches(table):
                    watcher.shown.add(table.id)
                    watcher.push(copas_pb2.WatchLobbyResponse(table_changed=summary)
                                 if is_shown else
                                 copas_pb2.WatchLobbyResponse(table_added=summary),
                                 self.queue_limit)
                elif is_shown:
                    watcher.shown.discard(table.id)
                    watcher.push(copas_pb2.WatchLobbyResponse(table_removed=table.id),
                                 self.queue_limit)

    def _snapshot(self, watcher: LobbyWatcher) -> copas_pb2.WatchLobbyResponse:
        """The matching tables, newest first."""
        watcher.queue.clear()
        watcher.needs_snapshot = False
        found = [t for t in reversed(list(self._tables())) if watcher.filter.matches(t)]
        shown = found[:SNAPSHOT_MAX]
        watcher.shown = {t.id for t in shown}
        for table in shown:
            self._keys[table.id] = lobby_key(table)
        return copas_pb2.WatchLobbyResponse(snapshot=copas_pb2.LobbySnapshot(
            tables=[views.summary(t) for t in shown], is_truncated=len(found) > SNAPSHOT_MAX))

    async def page(self, size: int, token: str, wanted: LobbyFilter
                   ) -> tuple[list[copas_pb2.TableSummary], str]:
        size = paging.page_size(size)
        position = paging.decode(token)
        before = position[0] if position is not None else None
        page: list[TableFacts] = []
        more = False
        for table in reversed(list(self._tables())):  # newest first
            if before is not None and table.order >= before:
                continue
            if not wanted.matches(table):
                continue
            if len(page) == size:
                more = True
                break
            page.append(table)
        summaries = [views.summary(t) for t in page]
        await self._durable()  # show only what is durable
        return summaries, paging.encode((page[-1].order, "")) if more else ""

    async def watch(self, wanted: LobbyFilter
                    ) -> AsyncIterator[copas_pb2.WatchLobbyResponse]:
        watcher = LobbyWatcher(wanted)
        self.watchers.add(watcher)
        try:
            while not watcher.is_closed:
                if watcher.needs_snapshot:
                    await self._durable()  # show only what is durable
                    yield self._snapshot(watcher)
                while watcher.queue and not watcher.is_closed:
                    yield watcher.queue.popleft()
                if not watcher.needs_snapshot:
                    await watcher.wakeup.wait()
                    watcher.wakeup.clear()
        finally:
            self._remove(watcher)

    def _remove(self, watcher: LobbyWatcher) -> None:
        self.watchers.discard(watcher)
        if not self.watchers:
            self._keys.clear()  # nobody follows: keys would go stale
            self._staged.clear()

    def close_all(self) -> None:
        for watcher in list(self.watchers):
            watcher.close()
        self.watchers.clear()

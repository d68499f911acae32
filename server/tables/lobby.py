"""The lobby: which tables a client may want to see (ListTables), and the WatchLobby streams.

``LobbySource`` is what the service asks of a lobby, whoever keeps it: ``Lobby`` here, from
this node's tables in memory (paged by creation order), or a cluster's, from the shared
database (paged by creation time and table id). Both use one page-token format and both
mark a truncated snapshot.

Here, a table's lobby key (phase, hand number, seats) is compared at the end of each of its
steps, only while someone watches the lobby; a change is staged with the table's summary and
shown once the step is durable, like a table's own events. The changes of one commit are
coalesced (a table's last summary only) and each message is serialized once for every
watcher: a change costs each watcher a filter check and a write of the same bytes. Each
stream's queue is bounded; a stream that falls behind gets a fresh snapshot instead of its
backlog. The tables are indexed by preset, by number of players and by whether they are
waiting with a free seat, so ListTables and snapshots with a filter read the smallest of
those sets, not every table.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Protocol, TypeVar

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

    def watch(self, wanted: LobbyFilter) -> AsyncIterator[LobbyMessage]:
        """A snapshot, then the tables added, changed and removed (a message, or its
        bytes)."""


LobbyMessage = copas_pb2.WatchLobbyResponse | bytes  # bytes: serialized once for all


class _Index:
    """A set of tables kept in creation order (sorted again, once, when one came late: a
    table recovered or taken over after newer ones)."""

    __slots__ = ("_is_sorted", "_last", "tables")

    def __init__(self) -> None:
        self.tables: dict[str, TableFacts] = {}
        self._last = -1
        self._is_sorted = True

    def add(self, table: TableFacts) -> None:
        if table.id in self.tables:
            return
        self.tables[table.id] = table
        if table.order < self._last:
            self._is_sorted = False
        self._last = max(self._last, table.order)

    def discard(self, table_id: str) -> None:
        self.tables.pop(table_id, None)

    def newest_first(self) -> list[TableFacts]:
        if not self._is_sorted:
            self.tables = dict(sorted(self.tables.items(), key=lambda item: item[1].order))
            self._is_sorted = True
        return list(reversed(self.tables.values()))

    def __len__(self) -> int:
        return len(self.tables)


class LobbyWatcher:
    __slots__ = ("filter", "is_closed", "needs_snapshot", "queue", "shown", "wakeup")

    def __init__(self, lobby_filter: LobbyFilter) -> None:
        self.filter = lobby_filter
        self.queue: deque[LobbyMessage] = deque()
        self.shown: set[str] = set()
        self.wakeup = asyncio.Event()
        self.needs_snapshot = True
        self.is_closed = False

    def push(self, message: LobbyMessage, limit: int) -> None:
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
                 committed: Callable[[], Awaitable[None]]) -> None:
        self.watchers: set[LobbyWatcher] = set()
        self.queue_limit = queue_limit
        self._tables = tables
        self._committed = committed  # the delivery's barrier
        self._keys: dict[str, LobbyKey] = {}
        self._staged: list[tuple[TableFacts, copas_pb2.TableSummary]] = []
        self._joinable = _Index()  # waiting for players, with a free seat
        self._by_preset: dict[str, _Index] = {}
        self._by_players: dict[int, _Index] = {}

    def track(self, table: TableFacts) -> None:
        """At a step's end (or when the table is made, or leaves): keep the indexes, and
        stage the table's summary when what the lobby shows changed (the delivery shows it
        once committed)."""
        self._index(table)
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
        """``staged`` is durable: show it, a table's last summary only, each message
        serialized once for all the watchers it goes to (called by the delivery alone)."""
        latest = {table.id: (table, summary) for table, summary in staged}
        limit = self.queue_limit
        for table, summary in latest.values():
            added = changed = removed = b""
            for watcher in self.watchers:
                is_shown = table.id in watcher.shown
                if watcher.filter.matches(table):
                    if is_shown:
                        changed = changed or copas_pb2.WatchLobbyResponse(
                            table_changed=summary).SerializeToString()
                        watcher.push(changed, limit)
                    else:
                        watcher.shown.add(table.id)
                        added = added or copas_pb2.WatchLobbyResponse(
                            table_added=summary).SerializeToString()
                        watcher.push(added, limit)
                elif is_shown:
                    watcher.shown.discard(table.id)
                    removed = removed or copas_pb2.WatchLobbyResponse(
                        table_removed=table.id).SerializeToString()
                    watcher.push(removed, limit)

    def _snapshot(self, watcher: LobbyWatcher) -> copas_pb2.WatchLobbyResponse:
        """The matching tables, newest first."""
        watcher.queue.clear()
        watcher.needs_snapshot = False
        found = [t for t in self._newest_first(watcher.filter) if watcher.filter.matches(t)]
        shown = found[:SNAPSHOT_MAX]
        watcher.shown = {t.id for t in shown}
        for table in shown:
            self._keys[table.id] = lobby_key(table)
        return copas_pb2.WatchLobbyResponse(snapshot=copas_pb2.LobbySnapshot(
            tables=[views.summary(t) for t in shown], is_truncated=len(found) > SNAPSHOT_MAX))

    async def page(self, size: int, token: str, wanted: LobbyFilter
                   ) -> tuple[list[copas_pb2.TableSummary], str]:
        size = paging.page_size(size)
        position = paging.decode(paging.Listing.TABLES, token)
        before = position[0] if position is not None else None
        page: list[TableFacts] = []
        more = False
        for table in self._newest_first(wanted):
            if before is not None and table.order >= before:
                continue
            if not wanted.matches(table):
                continue
            if len(page) == size:
                more = True
                break
            page.append(table)
        summaries = [views.summary(t) for t in page]
        await self._committed()  # show only what is durable
        return summaries, paging.encode(paging.Listing.TABLES, (page[-1].order, "")) \
            if more else ""

    def _index(self, table: TableFacts) -> None:
        preset, players = table.preset, table.rules.players
        if table.is_released:
            self._joinable.discard(table.id)
            _discard(self._by_preset, preset, table.id)
            _discard(self._by_players, players, table.id)
            return
        if table.is_waiting and table.has_free_seat():
            self._joinable.add(table)
        else:
            self._joinable.discard(table.id)
        self._by_preset.setdefault(preset, _Index()).add(table)
        self._by_players.setdefault(players, _Index()).add(table)

    def _newest_first(self, wanted: LobbyFilter) -> list[TableFacts]:
        """The tables ``wanted`` may match, newest first: the smallest index that holds
        them all (every table when no filter narrows it)."""
        candidates: list[_Index] = []
        if wanted.only_joinable:
            candidates.append(self._joinable)
        if wanted.preset:
            candidates.append(self._by_preset.get(wanted.preset) or _Index())
        if wanted.players:
            candidates.append(self._by_players.get(wanted.players) or _Index())
        if candidates:
            return min(candidates, key=len).newest_first()
        return list(reversed(list(self._tables())))

    async def watch(self, wanted: LobbyFilter
                    ) -> AsyncIterator[LobbyMessage]:
        watcher = LobbyWatcher(wanted)
        self.watchers.add(watcher)
        try:
            while not watcher.is_closed:
                if watcher.needs_snapshot:
                    await self._committed()  # show only what is durable
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


K = TypeVar("K")


def _discard(indexes: dict[K, _Index], key: K, table_id: str) -> None:
    """``table_id`` out of ``indexes[key]``; an index left empty goes too."""
    index = indexes.get(key)
    if index is not None:
        index.discard(table_id)
        if not index:
            del indexes[key]

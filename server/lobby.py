"""The lobby: which tables a client may want to see, and the WatchLobby streams.

A table's lobby key (phase, hand number, seats) is compared at the end of each of its steps,
only while someone watches the lobby; a change is staged with the table's summary and shown
once the step is durable, like a table's own events. Each stream's queue is bounded; a stream
that falls behind gets a fresh snapshot instead of its backlog.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from copas.v1 import copas_pb2

from server import inputs, table_view
from server.errors import ServiceError

if TYPE_CHECKING:
    from server.table import Table

SNAPSHOT_MAX = 100


@dataclass(frozen=True, slots=True)
class LobbyFilter:
    """ListTables' and WatchLobby's filters."""

    only_joinable: bool = False
    preset: str = ""
    players: int = 0
    include_finished: bool = False

    @classmethod
    def of(cls, request: Any) -> LobbyFilter:
        preset = inputs.check_length("preset", request.preset, inputs.PRESET_MAX)
        if request.players < 0:
            raise ServiceError.invalid("players must be 0 (any) or 3..5", "INVALID_RULES")
        return cls(request.only_joinable, preset, request.players, request.include_finished)

    def matches(self, table: Table) -> bool:
        if table.is_released:
            return False
        if table.is_finished and not self.include_finished:
            return False
        if self.only_joinable and not (table.is_waiting and table.has_free_seat()):
            return False
        if self.preset and table.preset != self.preset:
            return False
        return not (self.players and table.rules.players != self.players)


def lobby_key(table: Table) -> tuple[Any, ...]:
    """What the lobby shows of a table changes when this does."""
    game = table.game
    return (table.is_released, table_view.phase_of(table), game.hand_number if game else -1,
            tuple((s.is_taken, s.name, game.has_left[s.number] if game else False)
                  for s in table.seats))


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
    """The WatchLobby streams, and table changes waiting for the disk."""

    def __init__(self, queue_limit: int) -> None:
        self.watchers: set[LobbyWatcher] = set()
        self.queue_limit = queue_limit
        self._keys: dict[str, tuple[Any, ...]] = {}
        self._staged: list[tuple[Table, copas_pb2.TableSummary]] = []

    def table_changed(self, table: Table) -> None:
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
        self._staged.append((table, table.summary()))

    @property
    def has_staged(self) -> bool:
        return bool(self._staged)

    def take_staged(self) -> list[tuple[Table, copas_pb2.TableSummary]]:
        """The changes staged so far (the next commit makes them durable)."""
        staged, self._staged = self._staged, []
        return staged

    def deliver(self, staged: list[tuple[Table, copas_pb2.TableSummary]]) -> None:
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

    def snapshot(self, watcher: LobbyWatcher, tables: list[Table]) -> copas_pb2.WatchLobbyResponse:
        """The matching tables, newest first (``tables`` in creation order)."""
        watcher.queue.clear()
        watcher.needs_snapshot = False
        found = []
        for table in reversed(tables):
            if watcher.filter.matches(table):
                found.append(table)
        shown = found[:SNAPSHOT_MAX]
        watcher.shown = {t.id for t in shown}
        for table in shown:
            self._keys[table.id] = lobby_key(table)
        return copas_pb2.WatchLobbyResponse(snapshot=copas_pb2.LobbySnapshot(
            tables=[t.summary() for t in shown], is_truncated=len(found) > SNAPSHOT_MAX))

    def remove(self, watcher: LobbyWatcher) -> None:
        self.watchers.discard(watcher)
        if not self.watchers:
            self._keys.clear()  # nobody follows: keys would go stale
            self._staged.clear()

    def close_all(self) -> None:
        for watcher in list(self.watchers):
            watcher.close()
        self.watchers.clear()

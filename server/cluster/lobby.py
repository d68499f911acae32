"""A cluster's lobby: every node's tables, read from the shared database (each node writes its
tables' entries, ``server.cluster.shared_ownership``). It is a ``tables.lobby.LobbySource`` like one
node's lobby: the same pages, filters and snapshot.

ListTables reads the page it shows. WatchLobby does not read per watcher or per filter: the
node reads the newest ``WATCHED_MAX`` tables once a second (and the finished ones as well
only while someone watches them), indexes them by lobby state, preset and players, and each
watcher's filter is applied to that in memory. However many watchers and however many
different filters, a node's lobby costs the database at most two reads a second; changes
within that second arrive as one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from copas.v1 import copas_pb2

from server.cluster.queries import ClusterQueries
from server.tables import paging
from server.tables.lobby import SNAPSHOT_MAX, LobbyFilter

POLL_SECONDS = 1.0  # a cluster's lobby watchers see the database this often
WATCHED_MAX = 10_000  # the newest tables a node's watchers are shown from


@dataclass
class _Snapshot:
    """One read of the newest tables, indexed for the watchers' filters."""

    rows: list[tuple[str, bytes, str, str, int]]  # (table_id, summary, lobby, preset, players)
    by_preset: dict[str, list[int]] = field(default_factory=dict)
    by_players: dict[int, list[int]] = field(default_factory=dict)
    joinable: list[int] = field(default_factory=list)
    parsed: dict[int, copas_pb2.TableSummary] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for i, (_, _, lobby, preset, players) in enumerate(self.rows):
            self.by_preset.setdefault(preset, []).append(i)
            self.by_players.setdefault(players, []).append(i)
            if lobby == "joinable":
                self.joinable.append(i)

    def matching(self, wanted: LobbyFilter, limit: int) -> list[copas_pb2.TableSummary]:
        """The newest ``limit`` tables ``wanted`` matches, from the smallest index that
        holds them all (an unknown preset or player count: none, at once)."""
        candidates: list[list[int]] = []
        if wanted.preset:
            candidates.append(self.by_preset.get(wanted.preset, []))
        if wanted.players:
            candidates.append(self.by_players.get(wanted.players, []))
        if wanted.only_joinable:
            candidates.append(self.joinable)
        rows = self.rows
        found: list[copas_pb2.TableSummary] = []
        for i in min(candidates, key=len) if candidates else range(len(rows)):
            _, data, lobby, preset, players = rows[i]
            if (wanted.preset and preset != wanted.preset) or \
                    (wanted.players and players != wanted.players) or \
                    (wanted.only_joinable and lobby != "joinable"):
                continue
            summary = self.parsed.get(i)
            if summary is None:
                summary = self.parsed[i] = copas_pb2.TableSummary.FromString(data)
            found.append(summary)
            if len(found) >= limit:
                break
        return found


class ClusterLobby:
    def __init__(self, queries: ClusterQueries, committed: Callable[[], Awaitable[None]]
                 ) -> None:
        self._queries = queries
        self._committed = committed  # the delivery's barrier
        # include_finished -> (when read, the read): at most two, shared by every watcher
        self._reads: dict[bool, tuple[float, asyncio.Future[_Snapshot]]] = {}

    async def _rows(self, wanted: LobbyFilter, limit: int,
                    after: paging.Position | None = None) -> list[tuple[float, str, bytes]]:
        """Tables of every node matching ``wanted``, newest first, then by id."""
        await self._committed()  # this node's latest entries first
        return await asyncio.to_thread(
            self._queries.summaries, only_joinable=wanted.only_joinable, preset=wanted.preset,
            players=wanted.players, include_finished=wanted.include_finished, limit=limit,
            after=after)

    async def page(self, size: int, token: str, wanted: LobbyFilter
                   ) -> tuple[list[copas_pb2.TableSummary], str]:
        """A page by (creation time, table id) as the database holds them: the next page
        starts exactly after the last table shown, however many tables share a moment."""
        size = paging.page_size(size)
        rows = await self._rows(wanted, size + 1, paging.decode(paging.Listing.TABLES, token))
        page = [copas_pb2.TableSummary.FromString(data) for _, _, data in rows[:size]]
        if len(rows) <= size:
            return page, ""
        created, table_id, _ = rows[size - 1]
        return page, paging.encode(paging.Listing.TABLES, (created, table_id))

    async def _read(self, include_finished: bool) -> _Snapshot:
        await self._committed()  # this node's latest entries first
        rows = await asyncio.to_thread(self._queries.lobby_rows,
                                       include_finished=include_finished, limit=WATCHED_MAX)
        return _Snapshot([(t, data, lobby, preset, players)
                          for _, t, data, lobby, preset, players in rows])

    async def _latest(self, wanted: LobbyFilter) -> list[copas_pb2.TableSummary]:
        """The filter's tables (one more than a snapshot shows, to tell whether it is
        truncated), from the node's read of at most a second ago."""
        now = time.monotonic()
        hit = self._reads.get(wanted.include_finished)
        if hit is None or now - hit[0] >= POLL_SECONDS * 0.9 or \
                (hit[1].done() and hit[1].exception() is not None):
            hit = (now, asyncio.ensure_future(self._read(wanted.include_finished)))
            self._reads[wanted.include_finished] = hit
        snapshot = await asyncio.shield(hit[1])
        return snapshot.matching(wanted, SNAPSHOT_MAX + 1)

    def reads_kept(self) -> int:
        """The lobby's reads kept: at most two, whatever the watchers' filters."""
        return len(self._reads)

    async def watch(self, wanted: LobbyFilter
                    ) -> AsyncIterator[copas_pb2.WatchLobbyResponse]:
        """A snapshot, then the tables added, changed and removed, once a second."""
        shown: dict[str, bytes] = {}
        is_first = True
        while True:
            found = await self._latest(wanted)
            is_truncated = len(found) > SNAPSHOT_MAX
            found = found[:SNAPSHOT_MAX]
            current = {t.table_id: t.SerializeToString() for t in found}
            if is_first:
                yield copas_pb2.WatchLobbyResponse(snapshot=copas_pb2.LobbySnapshot(
                    tables=found, is_truncated=is_truncated))
                is_first = False
            else:
                for table in found:
                    before = shown.get(table.table_id)
                    if before is None:
                        yield copas_pb2.WatchLobbyResponse(table_added=table)
                    elif before != current[table.table_id]:
                        yield copas_pb2.WatchLobbyResponse(table_changed=table)
                for table_id in shown.keys() - current.keys():
                    yield copas_pb2.WatchLobbyResponse(table_removed=table_id)
            shown = current
            await asyncio.sleep(POLL_SECONDS)

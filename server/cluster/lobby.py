"""A cluster's lobby: every node's tables, read from the shared database (each node writes its
tables' entries, ``server.cluster.directory``). It is a ``tables.lobby.LobbySource`` like one
node's lobby: the same pages, filters and snapshot. WatchLobby polls the database once a
second (changes within that second arrive as one), and its watchers share one read per
filter and second however many watch.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable

from copas.v1 import copas_pb2

from server.store.postgres import PgStore
from server.tables import paging
from server.tables.lobby import SNAPSHOT_MAX, LobbyFilter

POLL_SECONDS = 1.0  # a cluster's lobby watchers read the database this often
READS_KEPT = 256  # lobby filters whose latest read is kept


class ClusterLobby:
    def __init__(self, store: PgStore, durable: Callable[[], Awaitable[None]]) -> None:
        self._store = store
        self._durable = durable
        self._reads: OrderedDict[LobbyFilter, tuple[
            float, asyncio.Future[list[copas_pb2.TableSummary]]]] = OrderedDict()

    async def _rows(self, wanted: LobbyFilter, limit: int,
                    after: paging.Position | None = None) -> list[tuple[float, str, bytes]]:
        """Tables of every node matching ``wanted``, newest first, then by id."""
        await self._durable()  # this node's latest entries first
        return await asyncio.to_thread(
            self._store.summaries, only_joinable=wanted.only_joinable, preset=wanted.preset,
            players=wanted.players, include_finished=wanted.include_finished, limit=limit,
            after=after)

    async def _summaries(self, wanted: LobbyFilter, limit: int
                         ) -> list[copas_pb2.TableSummary]:
        return [copas_pb2.TableSummary.FromString(data)
                for _, _, data in await self._rows(wanted, limit)]

    async def page(self, size: int, token: str, wanted: LobbyFilter
                   ) -> tuple[list[copas_pb2.TableSummary], str]:
        """A page by (creation time, table id) as the database holds them: the next page
        starts exactly after the last table shown, however many tables share a moment."""
        size = paging.page_size(size)
        rows = await self._rows(wanted, size + 1, paging.decode(token))
        page = [copas_pb2.TableSummary.FromString(data) for _, _, data in rows[:size]]
        if len(rows) <= size:
            return page, ""
        created, table_id, _ = rows[size - 1]
        return page, paging.encode((created, table_id))

    async def _latest(self, wanted: LobbyFilter) -> list[copas_pb2.TableSummary]:
        """The filter's tables, read at most once a second however many watch (one more
        than a snapshot shows, to tell whether it is truncated)."""
        now = time.monotonic()
        hit = self._reads.get(wanted)
        if hit is None or now - hit[0] >= POLL_SECONDS * 0.9 or \
                (hit[1].done() and hit[1].exception() is not None):
            hit = (now, asyncio.ensure_future(self._summaries(wanted, SNAPSHOT_MAX + 1)))
            self._reads[wanted] = hit
            self._reads.move_to_end(wanted)
            while len(self._reads) > READS_KEPT:
                self._reads.popitem(last=False)
        return await asyncio.shield(hit[1])

    def reads_kept(self) -> int:
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

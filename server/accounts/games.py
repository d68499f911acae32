"""Finished games into their accounts' histories and ratings: exactly once, whatever node
finished the game and whenever the server was killed.

The game's record is written in the same commit as its last move (the store's), so it is never
lost; taking it into the accounts is a second transaction, in the accounts' store, keyed by the
record's id (``AccountStore.record_game`` refuses a record it has taken). ``GameIntake`` reads the
newest records every ``interval`` and takes those it has not seen; at start it reads back over
``window`` seconds before the newest record, for the games that ended just before a crash (or
before a backup's instant: a node restarted long after, or started on a backup restored days
later, still takes them). Several nodes may take the same record at once: one transaction
wins, the others find it taken.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import replace

import structlog

from server import games
from server.accounts.service import Accounts
from server.bounded import Bounded
from server.store.base import RecordSummary, Storage

log = structlog.get_logger("copas.accounts")

PAGE = 100  # records read at a time
SEEN = 10_000  # record ids remembered as taken (or no account's business)
LATE = 60.0  # seconds a record may commit after its finish time (another node's, a slow disk)


class GameIntake:
    def __init__(self, accounts: Accounts, store: Storage, *, on_recorded: Callable[[bool], None]
                 = lambda is_rated: None, window: float = 3600.0,
                 clock: Callable[[], float] = time.time) -> None:
        self._accounts = accounts
        self._store = store
        self._on_recorded = on_recorded
        self._window = window
        self._clock = clock
        self._seen: Bounded[str, None] = Bounded(SEEN)

    async def take(self, summary: RecordSummary) -> bool:
        """Take one record (False: seen, taken already, or no seat had an account)."""
        if summary.record_id in self._seen:
            return False
        game = games.get(summary.game).finished_game(summary)
        updates = await self._accounts.game_finished(game) if game is not None else None
        if game is not None:  # an account deleted while the game ran: its record forgets it
            for account_id in await self._accounts.deleted_among(
                    [p.account_id for p in game.places]):
                await forget_in_records(self._store, account_id, [summary.record_id])
        self._seen[summary.record_id] = None
        if updates is not None:
            self._on_recorded(bool(updates))
        return updates is not None

    async def catch_up(self, since: float | None = None) -> int:
        """Take every record finished after ``since`` (default: the window before the newest
        record, or before now if that is sooner), oldest first (ratings move in the order
        games ended); how many were taken."""
        if since is None:
            newest = await asyncio.to_thread(self._store.list_records, 1, None)
            latest = min(self._clock(), newest[0].finished) if newest else self._clock()
            since = latest - self._window
        oldest = since
        found: list[RecordSummary] = []
        before = None
        while True:
            rows = await asyncio.to_thread(self._store.list_records, PAGE, before)
            fresh = [r for r in rows if r.finished >= oldest]
            found += [r for r in fresh if r.record_id not in self._seen]
            if len(fresh) < PAGE:
                break
            before = (rows[-1].finished, rows[-1].record_id)
        taken = 0
        for summary in reversed(found):
            taken += await self.take(summary)
        return taken

    async def run(self, interval: float = 1.0) -> None:
        """The background task: catch up over the window at start, then every ``interval``
        seconds over the records finished since the newest taken less ``LATE`` (records of
        other nodes may commit a little out of order)."""
        since: float | None = None
        while True:
            try:
                began = self._clock()
                await self.catch_up(since)
                since = began - LATE
            except Exception as exc:
                log.warning("game_intake_failed", error=str(exc)[:200])
            await asyncio.sleep(interval)


DELETED_NAME = "(deleted)"  # what a deleted account's seats are called in kept records


async def forget_in_records(store: Storage, account_id: str, record_ids: list[str]) -> int:
    """A deleted account's name and id taken out of its games' records (the games stay);
    how many records were written again."""
    rewritten = 0
    for record_id in record_ids:
        record = await asyncio.to_thread(store.get_kept_record, record_id)
        if record is None:
            continue  # pruned by retention meanwhile
        seats = tuple(replace(s, name=DELETED_NAME, account_id="")
                      if s.account_id == account_id else s for s in record.summary.seats)
        store.rewrite_record(replace(record, summary=replace(record.summary, seats=seats)))
        rewritten += 1
    await store.sync()
    return rewritten

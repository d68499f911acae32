"""The records of finished games: read from the store (never kept in memory), paged newest
first, and pruned by ``--keep-records`` and ``--keep-records-days``."""

from __future__ import annotations

import asyncio

import structlog

from server.errors import ServiceError, quote
from server.store.base import RecordSummary, Storage
from server.tables import paging
from server.tables.clock import Scheduler

log = structlog.get_logger("copas.records")


class Records:
    def __init__(self, store: Storage, scheduler: Scheduler, keep: int, keep_days: float
                 ) -> None:
        self._store = store
        self._scheduler = scheduler
        self._keep = keep
        self._max_age = keep_days * 86400

    def get(self, record_id: str) -> bytes:
        """The serialized copas.v1.GameRecord of a finished game (blocking: a thread's)."""
        found = self._store.get_record(record_id)
        if found is None:
            raise ServiceError.not_found(f"no game record {quote(record_id)}", "RECORD_NOT_FOUND")
        return found

    def find(self, record_id: str) -> bytes | None:
        """``get``, or None for a record that is not kept (blocking: a thread's)."""
        return self._store.get_record(record_id)

    def page(self, size: int, token: str) -> tuple[list[RecordSummary], str]:
        """Records newest first after the page ``token``; and the next token (blocking)."""
        size = paging.page_size(size)
        rows = self._store.list_records(size + 1, paging.decode(paging.Listing.RECORDS, token))
        if len(rows) <= size:
            return rows, ""
        rows = rows[:size]
        return rows, paging.encode(paging.Listing.RECORDS,
                                   (rows[-1].finished, rows[-1].record_id))

    def prune(self) -> int:
        """Enforce the limits once (blocking); how many records went."""
        if not (self._keep or self._max_age):
            return 0
        removed = self._store.prune_records(self._keep, self._max_age, self._scheduler.now())
        if removed:
            log.info("records_pruned", removed=removed)
        return removed

    async def keep_pruned(self, interval: float) -> None:
        """Enforce the limits every ``interval`` seconds, off the event loop (a background
        task of the server's)."""
        while True:
            try:
                await asyncio.to_thread(self.prune)
            except Exception as exc:  # keep sweeping; the next sweep may succeed
                log.error("retention_failed", error=str(exc))
            await asyncio.sleep(interval)

"""The in-memory store (``--data-dir memory``): nothing survives the process; the records of
finished games are kept, at most ``MEMORY_RECORDS`` of them (the oldest go)."""

from __future__ import annotations

import asyncio

from server.store.base import (
    Append,
    Batch,
    CreateTable,
    DeleteEntry,
    FinishTable,
    GameRecord,
    RecordSummary,
    ReleaseTable,
    RewriteRecord,
    StorageFailed,
    StoredTable,
    TableMeta,
    Write,
)
from server.store.records import record_message

MEMORY_RECORDS = 10_000


class MemoryStore:
    """Writes are kept in order and 'committed' at once; only the records are read back."""

    def __init__(self) -> None:
        self._batch: Batch[Write] = Batch()
        self._counters: dict[str, int] = {}
        self._records: dict[str, tuple[RecordSummary, bytes, GameRecord]] = {}
        self._failure: StorageFailed | None = None
        self._failed = asyncio.Event()
        self.commits = 0

    @property
    def failure(self) -> StorageFailed | None:
        return self._failure

    def check_writable(self) -> None:
        if self._failure is not None:
            raise self._failure

    def fail(self, error: BaseException) -> StorageFailed:
        """Enter the failed state (once); ``failed()`` resolves."""
        if self._failure is None:
            self._failure = StorageFailed(f"the store failed: {type(error).__name__}: {error}")
            self._failed.set()
        return self._failure

    def _queue(self, write: Write) -> None:
        self.check_writable()
        self._batch.writes.append(write)

    def create_table(self, table_id: str, created: float, meta: TableMeta) -> None:
        self._queue(CreateTable(table_id, created, meta))
        self._counters[table_id] = 0

    def append(self, table_id: str, entry: str) -> int:
        n = self._counters.get(table_id, 0) + 1
        self._queue(Append(table_id, n, entry))
        self._counters[table_id] = n
        return n

    def delete_entry(self, table_id: str, n: int) -> None:
        self._queue(DeleteEntry(table_id, n))

    def note_sequence(self, table_id: str, sequence: int) -> None:
        self._batch.sequences[table_id] = sequence

    def finish_table(self, table_id: str, record: GameRecord) -> None:
        self._queue(FinishTable(table_id, record))
        summary = record.summary
        self._records[summary.record_id] = (summary, record_message(record), record)
        while len(self._records) > MEMORY_RECORDS:
            del self._records[min(self._records, key=lambda r: self._records[r][0].finished)]

    def rewrite_record(self, record: GameRecord) -> None:
        self._queue(RewriteRecord(record))
        summary = record.summary
        if summary.record_id in self._records:
            self._records[summary.record_id] = (summary, record_message(record), record)

    def release_table(self, table_id: str) -> None:
        self._queue(ReleaseTable(table_id))
        self._counters.pop(table_id, None)

    @property
    def has_pending(self) -> bool:
        return bool(self._batch.writes or self._batch.sequences)

    async def sync(self) -> None:
        self.check_writable()
        self._batch = Batch()
        self.commits += 1

    async def failed(self) -> StorageFailed:
        await self._failed.wait()
        assert self._failure is not None
        return self._failure

    def load_tables(self) -> list[StoredTable]:
        return []

    def get_record(self, record_id: str) -> bytes | None:
        found = self._records.get(record_id)
        return found[1] if found else None

    def get_kept_record(self, record_id: str) -> GameRecord | None:
        found = self._records.get(record_id)
        return found[2] if found else None

    def list_records(self, limit: int, before: tuple[float, str] | None
                     ) -> list[RecordSummary]:
        rows = sorted((s for s, _, _ in self._records.values()),
                      key=lambda s: (-s.finished, s.record_id))
        if before is not None:
            rows = [s for s in rows if (-s.finished, s.record_id) > (-before[0], before[1])]
        return rows[:limit]

    def prune_records(self, keep: int, max_age: float, now: float) -> int:
        rows = sorted(self._records.values(), key=lambda r: -r[0].finished)
        doomed = [s.record_id for i, (s, _, _) in enumerate(rows)
                  if (keep and i >= keep) or (max_age and s.finished < now - max_age)]
        for record_id in doomed:
            del self._records[record_id]
        return len(doomed)

    def records_held(self) -> int:
        """How many records this process keeps in memory."""
        return len(self._records)

    async def close(self) -> None:
        return None

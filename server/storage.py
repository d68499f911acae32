"""Durable storage: one event log per table, and the records of finished games.

``Storage`` is the small interface the tables use; ``SqliteStorage`` (the default: one
SQLite file in WAL mode, fsync on commit) and ``MemoryStorage`` (tests, benchmarks) implement
it. Writes are queued synchronously by the table (so their order is the table's order) and
committed by one writer in batches (group commit); ``sync`` resolves once everything queued
before it is on disk, and only then does the server answer the RPC or show the change to
watchers.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS tables (
    table_id TEXT PRIMARY KEY,
    created REAL NOT NULL,
    meta TEXT NOT NULL,              -- name, preset, rules, seed, bots (JSON)
    status TEXT NOT NULL DEFAULT 'open'   -- open | finished | failed
);
CREATE TABLE IF NOT EXISTS log (
    table_id TEXT NOT NULL,
    n INTEGER NOT NULL,              -- position in the table's log
    entry TEXT NOT NULL,             -- JSON
    PRIMARY KEY (table_id, n)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS records (
    record_id TEXT PRIMARY KEY,
    finished REAL NOT NULL,
    summary TEXT NOT NULL,           -- JSON: what ListGameRecords shows
    record TEXT NOT NULL             -- JSON: the whole replayable record
);
CREATE INDEX IF NOT EXISTS records_by_time ON records (finished);
"""


@dataclass
class StoredTable:
    table_id: str
    created: float
    meta: dict[str, Any]
    entries: list[dict[str, Any]]
    error: str | None = None  # the log could not be read


class Storage:
    """In memory: nothing survives the process. The base of the durable stores."""

    def __init__(self) -> None:
        self._pending: list[tuple[str, tuple[Any, ...]]] = []
        self._counters: dict[str, int] = {}
        self._records: dict[str, tuple[float, dict[str, Any], dict[str, Any]]] = {}
        self.commits = 0

    # -- writes, queued in order by the (synchronous) table code
    def create_table(self, table_id: str, created: float, meta: dict[str, Any]) -> None:
        self._counters[table_id] = 0
        self._queue("create", (table_id, created, json.dumps(meta)))

    def append(self, table_id: str, entry: dict[str, Any]) -> None:
        n = self._counters.get(table_id, 0) + 1
        self._counters[table_id] = n
        self._queue("append", (table_id, n, json.dumps(entry, separators=(",", ":"))))

    def finish_table(self, table_id: str, record_id: str, finished: float,
                     summary: dict[str, Any], record: dict[str, Any]) -> None:
        self._counters.pop(table_id, None)  # its log is dropped with this write
        self._queue("finish", (table_id, record_id, finished, summary, record))

    def mark_failed(self, table_id: str) -> None:
        self._queue("failed", (table_id,))

    def _queue(self, kind: str, args: tuple[Any, ...]) -> None:
        if kind == "finish":  # in memory only the records are kept
            _, record_id, finished, summary, record = args
            self._records[record_id] = (finished, summary, record)

    async def sync(self) -> None:
        """Return once everything queued so far is durable."""
        self.commits += 1

    # -- reads
    def load_open_tables(self) -> list[StoredTable]:
        return []

    def get_record(self, record_id: str) -> dict[str, Any] | None:
        found = self._records.get(record_id)
        return found[2] if found else None

    def list_records(self, limit: int, before: tuple[float, str] | None
                     ) -> list[tuple[float, str, dict[str, Any]]]:
        rows = sorted(((f, rid, s) for rid, (f, s, _) in self._records.items()),
                      key=lambda r: (-r[0], r[1]))
        if before is not None:
            rows = [r for r in rows if (-r[0], r[1]) > (-before[0], before[1])]
        return rows[:limit]

    def prune_records(self, keep: int, max_age: float, now: float) -> int:
        rows = sorted(self._records.items(), key=lambda kv: -kv[1][0])
        doomed = [rid for i, (rid, (finished, _, _)) in enumerate(rows)
                  if (keep and i >= keep) or (max_age and finished < now - max_age)]
        for rid in doomed:
            del self._records[rid]
        return len(doomed)

    async def close(self) -> None:
        return None


class SqliteStorage(Storage):
    """One SQLite database in WAL mode with synchronous=FULL; a single writer thread commits
    whatever is queued in one transaction (group commit)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(SCHEMA)
        self._lock = threading.Lock()
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="copas-db")
        self._batch_done: asyncio.Future[None] | None = None
        self._flushing: asyncio.Task[None] | None = None
        for (table_id, n) in self._db.execute("SELECT table_id, max(n) FROM log GROUP BY table_id"):
            self._counters[table_id] = n

    def _queue(self, kind: str, args: tuple[Any, ...]) -> None:
        if kind == "finish":
            table_id, record_id, finished, summary, record = args
            args = (table_id, record_id, finished, json.dumps(summary), json.dumps(record))
        self._pending.append((kind, args))

    async def sync(self) -> None:
        if not self._pending and self._flushing is None:
            return
        loop = asyncio.get_running_loop()
        if self._batch_done is None:
            self._batch_done = loop.create_future()
        waiter = self._batch_done
        if self._flushing is None:
            self._flushing = asyncio.create_task(self._flush_loop())
        await asyncio.shield(waiter)

    async def _flush_loop(self) -> None:
        """Commit batch after batch while writes keep coming; each batch resolves the waiters
        that queued before it started."""
        loop = asyncio.get_running_loop()
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                done, self._batch_done = self._batch_done, None
                try:
                    await loop.run_in_executor(self._writer, self._commit, batch)
                except Exception as exc:  # the disk failed: nothing in the batch is durable
                    if done is not None and not done.done():
                        done.set_exception(exc)
                    raise
                self.commits += 1
                if done is not None and not done.done():
                    done.set_result(None)
        finally:
            self._flushing = None
            if self._batch_done is not None and not self._pending:
                pending, self._batch_done = self._batch_done, None
                if not pending.done():
                    pending.set_result(None)

    def _commit(self, batch: list[tuple[str, tuple[Any, ...]]]) -> None:
        with self._lock:
            db = self._db
            db.execute("BEGIN")
            try:
                for kind, args in batch:
                    if kind == "append":
                        db.execute("INSERT INTO log (table_id, n, entry) VALUES (?, ?, ?)", args)
                    elif kind == "create":
                        db.execute("INSERT INTO tables (table_id, created, meta) VALUES (?, ?, ?)",
                                   args)
                    elif kind == "finish":
                        table_id, record_id, finished, summary, record = args
                        db.execute("INSERT OR REPLACE INTO records VALUES (?, ?, ?, ?)",
                                   (record_id, finished, summary, record))
                        db.execute("UPDATE tables SET status='finished' WHERE table_id=?",
                                   (table_id,))
                        db.execute("DELETE FROM log WHERE table_id=?", (table_id,))
                    elif kind == "failed":
                        db.execute("UPDATE tables SET status='failed' WHERE table_id=?", args)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def load_open_tables(self) -> list[StoredTable]:
        out = []
        with self._lock:
            rows = self._db.execute(
                "SELECT table_id, created, meta FROM tables WHERE status='open' "
                "ORDER BY created").fetchall()
            for table_id, created, meta in rows:
                entries: list[dict[str, Any]] = []
                error = None
                try:
                    meta_data = json.loads(meta)
                    for (entry,) in self._db.execute(
                            "SELECT entry FROM log WHERE table_id=? ORDER BY n", (table_id,)):
                        entries.append(json.loads(entry))
                except (ValueError, TypeError) as exc:
                    meta_data, error = {}, f"unreadable log: {exc}"
                out.append(StoredTable(table_id, created, meta_data, entries, error))
        return out

    def get_record(self, record_id: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute("SELECT record FROM records WHERE record_id=?",
                                   (record_id,)).fetchone()
        return json.loads(row[0]) if row else None

    def list_records(self, limit: int, before: tuple[float, str] | None
                     ) -> list[tuple[float, str, dict[str, Any]]]:
        with self._lock:
            if before is None:
                rows = self._db.execute(
                    "SELECT finished, record_id, summary FROM records "
                    "ORDER BY finished DESC, record_id ASC LIMIT ?", (limit,)).fetchall()
            else:
                rows = self._db.execute(
                    "SELECT finished, record_id, summary FROM records "
                    "WHERE finished < ? OR (finished = ? AND record_id > ?) "
                    "ORDER BY finished DESC, record_id ASC LIMIT ?",
                    (before[0], before[0], before[1], limit)).fetchall()
        return [(f, rid, json.loads(s)) for f, rid, s in rows]

    def prune_records(self, keep: int, max_age: float, now: float) -> int:
        with self._lock:
            removed = 0
            self._db.execute("BEGIN")
            if max_age:
                removed += self._db.execute("DELETE FROM records WHERE finished < ?",
                                            (now - max_age,)).rowcount
            if keep:
                removed += self._db.execute(
                    "DELETE FROM records WHERE record_id NOT IN (SELECT record_id FROM records "
                    "ORDER BY finished DESC, record_id ASC LIMIT ?)", (keep,)).rowcount
            self._db.execute("COMMIT")
        return removed

    async def close(self) -> None:
        if self._flushing is not None:
            await self._flushing
        self._writer.shutdown(wait=True)
        with self._lock:
            self._db.close()


def open_storage(data_dir: str) -> Storage:
    """``memory`` for no durability; otherwise a directory holding ``copas.db``."""
    if data_dir == "memory":
        return Storage()
    return SqliteStorage(Path(data_dir) / "copas.db")


def now() -> float:
    return time.time()


Clock = Callable[[], float]

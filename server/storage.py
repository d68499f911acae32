"""Durable storage: one event log per table, and the records of finished games.

``Storage`` is the small interface the tables use; ``SqliteStorage`` (the default: one SQLite
file in WAL mode, fsync on commit) and the in-memory base class implement it. Writes are
queued synchronously by the table code (so their order is the table's order) as typed
operations and committed by one writer in batches (group commit); ``sync`` resolves once
everything queued before it is on disk, and only then does the server answer the RPC or show
the change to watchers.

Fail-stop: when a commit fails, the store stops believing memory. ``sync`` raises
``StorageFailed`` for that batch and for everything after it, ``failure`` is set and the
``on_failure`` callback runs once; the server then stops serving and exits non-zero so a
supervisor restarts it from what the log holds (see docs/DESIGN.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import fcntl
import json
import os
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 3
MEMORY_RECORDS = 10_000  # records the in-memory store keeps (the oldest go)
APPLICATION = "copas"

# Each migration takes the schema from version i to i + 1 (index 0: from nothing to 1).
MIGRATIONS: tuple[str, ...] = (
    # 1: the first layout (written before the schema had a version).
    """
    CREATE TABLE IF NOT EXISTS tables (
        table_id TEXT PRIMARY KEY,
        created REAL NOT NULL,
        meta TEXT NOT NULL,
        status TEXT NOT NULL DEFAULT 'open'
    );
    CREATE TABLE IF NOT EXISTS log (
        table_id TEXT NOT NULL,
        n INTEGER NOT NULL,
        entry TEXT NOT NULL,
        PRIMARY KEY (table_id, n)
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS records (
        record_id TEXT PRIMARY KEY,
        finished REAL NOT NULL,
        summary TEXT NOT NULL,
        record TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS records_by_time ON records (finished);
    """,
    # 2: typed log entries with sequences, the table's sequence high-water mark, finished
    # tables kept until released, an identity row. Tables written by version 1 used another
    # log format: they are kept, marked 'legacy', and not served.
    """
    ALTER TABLE tables ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE tables ADD COLUMN finished REAL;
    UPDATE tables SET status = 'legacy' WHERE status IN ('open', 'failed');
    DELETE FROM tables WHERE status = 'finished';
    CREATE TABLE copas (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    INSERT INTO copas VALUES ('application', 'copas'), ('state', 'stopped');
    """,
    # 3: each record also kept as a serialized copas.v1.GameRecord, served as it is.
    """
    ALTER TABLE records ADD COLUMN record_pb BLOB;
    """,
)
_V1_TABLES = {"tables", "log", "records"}


class StorageError(Exception):
    """The store cannot be used (at start) or failed (a commit)."""


class StoreUnusable(StorageError):
    """The data directory cannot be used; the message is one line saying why."""


class StorageFailed(StorageError):
    """A commit failed: nothing in it (or after it) is durable; the server must stop."""


# ---------------------------------------------------------------- what is written


@dataclass(frozen=True, slots=True)
class CreateTable:
    table_id: str
    created: float
    meta: str  # JSON


@dataclass(frozen=True, slots=True)
class Append:
    table_id: str
    n: int
    entry: str  # JSON, see server.log_entries


@dataclass(frozen=True, slots=True)
class DeleteEntry:
    table_id: str
    n: int


@dataclass(frozen=True, slots=True)
class FinishTable:
    """A game's record; serialized by the writer (JSON, and the GameRecord message)."""

    table_id: str
    finished: float
    summary: dict[str, Any]  # what ListGameRecords shows
    record: dict[str, Any]  # the whole replayable record


@dataclass(frozen=True, slots=True)
class ReleaseTable:
    table_id: str


@dataclass(frozen=True, slots=True)
class RegisterToken:
    """A seat's token (its hash), so that any node of a cluster finds the table."""

    token_hash: str
    table_id: str
    seat: int


@dataclass(frozen=True, slots=True)
class ForgetToken:
    token_hash: str
    table_id: str  # a cluster writes it only while it owns the table (fencing)


Write = (CreateTable | Append | DeleteEntry | FinishTable | ReleaseTable | RegisterToken
         | ForgetToken)


@dataclass
class StoredTable:
    """A table as the store holds it; ``entries`` are its log's (position, JSON) rows."""

    table_id: str
    created: float
    meta: dict[str, Any]
    entries: list[tuple[int, str]]
    status: str  # open | finished
    sequence: int  # the highest event sequence ever shown for it
    finished: float | None = None
    error: str | None = None  # the meta could not be read


@dataclass
class _Batch:
    writes: list[Write] = field(default_factory=list)
    sequences: dict[str, int] = field(default_factory=dict)


class Storage:
    """In memory: nothing survives the process. The base of the durable stores."""

    def __init__(self) -> None:
        self._batch = _Batch()
        self._counters: dict[str, int] = {}
        self._records: dict[str, tuple[float, dict[str, Any], bytes]] = {}
        self.commits = 0
        self.failure: StorageFailed | None = None
        self.on_failure: Callable[[StorageFailed], None] | None = None
        self.on_fenced: Callable[[set[str]], None] | None = None  # tables lost to another node

    # -- writes, queued in order by the (synchronous) table code
    def create_table(self, table_id: str, created: float, meta: dict[str, Any]) -> None:
        self._counters[table_id] = 0
        self._queue(CreateTable(table_id, created, json.dumps(meta)))

    def append(self, table_id: str, entry: str) -> int:
        """Queue one log entry; returns its position in the table's log."""
        n = self._counters.get(table_id, 0) + 1
        self._counters[table_id] = n
        self._queue(Append(table_id, n, entry))
        return n

    def delete_entry(self, table_id: str, n: int) -> None:
        self._queue(DeleteEntry(table_id, n))

    def note_sequence(self, table_id: str, sequence: int) -> None:
        """The table has shown events up to ``sequence`` (kept with the next commit)."""
        self._batch.sequences[table_id] = sequence

    def finish_table(self, table_id: str, finished: float, summary: dict[str, Any],
                     record: dict[str, Any]) -> None:
        self._queue(FinishTable(table_id, finished, summary, record))

    def register_token(self, token_hash: str, table_id: str, seat: int) -> None:
        """Where a token belongs, for the other nodes of a cluster (one process: no-op)."""

    def forget_token(self, token_hash: str, table_id: str) -> None:
        """The token is no longer valid (one process: no-op)."""

    def release_table(self, table_id: str) -> None:
        """The table is gone: its log and its row go (a finished game's record stays)."""
        self._counters.pop(table_id, None)
        self._queue(ReleaseTable(table_id))

    def _queue(self, write: Write) -> None:
        if isinstance(write, FinishTable):  # in memory, only the records are kept
            self._records[write.table_id] = (write.finished, write.summary,
                                             record_message(write.record))
            while len(self._records) > MEMORY_RECORDS:
                del self._records[min(self._records, key=lambda r: self._records[r][0])]
        self._batch.writes.append(write)

    @property
    def has_pending(self) -> bool:
        return bool(self._batch.writes or self._batch.sequences)

    async def sync(self) -> None:
        """Return once everything queued so far is durable; StorageFailed if it never will."""
        if self.failure is not None:
            raise self.failure
        self._batch = _Batch()
        self.commits += 1

    def fail(self, error: BaseException) -> StorageFailed:
        """Enter the failed state (once) and tell the owner."""
        if self.failure is None:
            self.failure = StorageFailed(f"the store failed: {type(error).__name__}: {error}")
            if self.on_failure is not None:
                self.on_failure(self.failure)
        return self.failure

    # -- reads
    def load_tables(self) -> list[StoredTable]:
        return []

    def get_record(self, record_id: str) -> bytes | None:
        """A finished game as a serialized copas.v1.GameRecord (with its JSON)."""
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


class GroupCommitStorage(Storage):
    """A durable store: one writer thread commits whatever is queued in one transaction
    (group commit); ``_commit`` is the store's own."""

    def __init__(self) -> None:
        super().__init__()
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="copas-db")
        self._batch_done: asyncio.Future[None] | None = None
        self._flushing: asyncio.Task[None] | None = None

    def _queue(self, write: Write) -> None:
        self._batch.writes.append(write)  # records live in the store, not in memory

    # -- group commit
    async def sync(self) -> None:
        if self.failure is not None:
            raise self.failure
        if not self.has_pending and self._flushing is None:
            return
        loop = asyncio.get_running_loop()
        if self._batch_done is None:
            self._batch_done = loop.create_future()
        waiter = self._batch_done
        if self._flushing is None:
            self._flushing = asyncio.create_task(self._flush_loop(),
                                                 context=contextvars.Context())
        await asyncio.shield(waiter)

    async def _flush_loop(self) -> None:
        """Commit batch after batch while writes keep coming; each batch resolves the waiters
        that queued before it started."""
        loop = asyncio.get_running_loop()
        try:
            while self.has_pending and self.failure is None:
                batch, self._batch = self._batch, _Batch()
                done, self._batch_done = self._batch_done, None
                try:
                    lost = await loop.run_in_executor(self._writer, self._commit, batch)
                except Exception as exc:  # the disk said no: nothing in the batch is durable
                    failure = self.fail(exc)
                    for waiter in (done, self._batch_done):
                        if waiter is not None and not waiter.done():
                            waiter.set_exception(failure)
                            waiter.exception()  # retrieved: every caller re-raises its own
                    return
                self.commits += 1
                if lost and self.on_fenced is not None:  # before anyone hears "committed"
                    self.on_fenced(lost)
                if done is not None and not done.done():
                    done.set_result(None)
        finally:
            self._flushing = None
            if self._batch_done is not None and not self.has_pending:
                pending, self._batch_done = self._batch_done, None
                if not pending.done():
                    if self.failure is not None:
                        pending.set_exception(self.failure)
                        pending.exception()
                    else:
                        pending.set_result(None)

    def _commit(self, batch: _Batch) -> set[str] | None:
        """Commit the batch; returns the tables whose writes were dropped because this node
        no longer owns them (a cluster's store), else None."""
        raise NotImplementedError

    # -- records, read the same way from either database (``?`` placeholders)
    def _fetch(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        """The rows of one read query."""
        raise NotImplementedError

    def get_record(self, record_id: str) -> bytes | None:
        rows = self._fetch("SELECT record_pb, record FROM records WHERE record_id = ?",
                           (record_id,))
        if not rows:
            return None
        row = rows[0]
        return bytes(row[0]) if row[0] is not None else record_message(json.loads(row[1]))

    def list_records(self, limit: int, before: tuple[float, str] | None
                     ) -> list[tuple[float, str, dict[str, Any]]]:
        if before is None:
            rows = self._fetch("SELECT finished, record_id, summary FROM records "
                               "ORDER BY finished DESC, record_id ASC LIMIT ?", (limit,))
        else:
            rows = self._fetch("SELECT finished, record_id, summary FROM records "
                               "WHERE finished < ? OR (finished = ? AND record_id > ?) "
                               "ORDER BY finished DESC, record_id ASC LIMIT ?",
                               (before[0], before[0], before[1], limit))
        return [(f, rid, json.loads(summary)) for f, rid, summary in rows]

    async def _stop_writer(self) -> None:
        """Commit what is queued (unless the store failed), then stop the writer."""
        if self._flushing is not None:
            await asyncio.shield(self._flushing)
        if self.failure is None and self.has_pending:
            with contextlib.suppress(StorageFailed):
                await self.sync()
        self._writer.shutdown(wait=True)


class SqliteStorage(GroupCommitStorage):
    """One SQLite database in WAL mode with synchronous=FULL; a single writer thread commits
    whatever is queued in one transaction (group commit). Open it with :meth:`open`."""

    def __init__(self, db: sqlite3.Connection, path: Path, lock_fd: int) -> None:
        super().__init__()
        self.path = path
        self._db = db
        self._lock_fd = lock_fd
        self._lock = threading.Lock()
        for (table_id, n) in db.execute("SELECT table_id, max(n) FROM log GROUP BY table_id"):
            self._counters[table_id] = n

    @classmethod
    def open(cls, path: Path) -> SqliteStorage:
        """Open (or create) the database at ``path``, migrating it to this schema version.

        :raises StoreUnusable: the directory cannot be written; the file is not a SQLite
            database, is damaged, belongs to another program or to a newer Copas; or the
            last run's write-ahead log is missing or sits beside an empty database.
        """
        wal = path.with_name(path.name + "-wal")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            lock_fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise StoreUnusable(f"cannot use data directory {path.parent}: {exc.strerror}"
                                ) from None
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(lock_fd)
            raise StoreUnusable(f"another server is using {path.parent}") from None
        try:
            return cls._open_locked(path, wal, lock_fd)
        except BaseException:
            os.close(lock_fd)
            raise

    @classmethod
    def _open_locked(cls, path: Path, wal: Path, lock_fd: int) -> SqliteStorage:
        try:
            db_size = path.stat().st_size if path.exists() else 0
            wal_size = wal.stat().st_size if wal.exists() else -1
        except OSError as exc:
            raise StoreUnusable(f"cannot use data directory {path.parent}: {exc.strerror}"
                                ) from None
        if db_size == 0 and wal_size > 0:
            raise StoreUnusable(
                f"{path} is empty or missing but its write-ahead log {wal.name} holds "
                f"{wal_size} bytes: the database was damaged; restore it from a backup (the "
                "server will not start on it, to lose nothing silently)")
        try:
            db = sqlite3.connect(path, check_same_thread=False, isolation_level=None,
                                 timeout=5.0)
        except sqlite3.Error as exc:
            raise StoreUnusable(f"cannot open {path}: {exc}") from None
        try:
            cls._prepare(db, path, had_wal=wal_size >= 0)
        except StoreUnusable:
            db.close()
            raise
        except sqlite3.Error as exc:
            db.close()
            raise StoreUnusable(f"cannot use {path}: {exc}") from None
        return cls(db, path, lock_fd)

    @staticmethod
    def _prepare(db: sqlite3.Connection, path: Path, had_wal: bool) -> None:
        names = {name for (name,) in db.execute(
            "SELECT name FROM sqlite_master WHERE type='table'")}
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreUnusable(f"{path} has schema version {version}; this server knows up "
                                f"to {SCHEMA_VERSION}: run a newer Copas")
        if version == 0 and names and not names <= _V1_TABLES:
            raise StoreUnusable(f"{path} is not a Copas database (it holds tables "
                                f"{', '.join(sorted(names))})")
        if version >= 2:
            marker = dict(db.execute("SELECT key, value FROM copas").fetchall()) \
                if "copas" in names else {}
            if marker.get("application") != APPLICATION:
                raise StoreUnusable(f"{path} is not a Copas database")
            if marker.get("state") == "running" and not had_wal:
                raise StoreUnusable(
                    f"the last run on {path} did not stop cleanly and its write-ahead log "
                    f"{path.name}-wal is missing: recent commits may be lost; restore the "
                    "file from a backup")
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        if version == 0 and not names:
            version = 1  # a new database: version 1's tables, then the migrations
            db.executescript(MIGRATIONS[0])
        elif version == 0:
            version = 1  # written before the schema had a version: it is version 1
        for step in range(version, SCHEMA_VERSION):
            db.execute("BEGIN")
            for statement in MIGRATIONS[step].split(";"):
                if statement.strip():
                    db.execute(statement)
            db.execute(f"PRAGMA user_version = {step + 1}")
            db.execute("COMMIT")
        # A write at start: a store we cannot write to stops the start, not the first move.
        # The marker goes to the main file at once, so a lost WAL is noticed next time.
        db.execute("UPDATE copas SET value = 'running' WHERE key = 'state'")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def legacy_tables(self) -> int:
        with self._lock:
            return int(self._db.execute(
                "SELECT count(*) FROM tables WHERE status = 'legacy'").fetchone()[0])

    def _commit(self, batch: _Batch) -> set[str] | None:
        with self._lock:
            db = self._db
            db.execute("BEGIN")
            try:
                for write in batch.writes:
                    match write:
                        case Append():
                            db.execute("INSERT INTO log (table_id, n, entry) VALUES (?, ?, ?)",
                                       (write.table_id, write.n, write.entry))
                        case CreateTable():
                            db.execute("INSERT INTO tables (table_id, created, meta) "
                                       "VALUES (?, ?, ?)",
                                       (write.table_id, write.created, write.meta))
                        case DeleteEntry():
                            db.execute("DELETE FROM log WHERE table_id = ? AND n = ?",
                                       (write.table_id, write.n))
                        case FinishTable():
                            db.execute(
                                "INSERT OR REPLACE INTO records (record_id, finished, summary, "
                                "record, record_pb) VALUES (?, ?, ?, ?, ?)",
                                (write.table_id, write.finished, json.dumps(write.summary),
                                 json.dumps(write.record), record_message(write.record)))
                            db.execute("UPDATE tables SET status = 'finished', finished = ? "
                                       "WHERE table_id = ?", (write.finished, write.table_id))
                        case ReleaseTable():
                            db.execute("DELETE FROM log WHERE table_id = ?", (write.table_id,))
                            db.execute("DELETE FROM tables WHERE table_id = ?",
                                       (write.table_id,))
                        case RegisterToken() | ForgetToken():
                            pass  # one process: its memory knows its tokens
                db.executemany("UPDATE tables SET seq = ? WHERE table_id = ? AND seq < ?",
                               [(seq, tid, seq) for tid, seq in batch.sequences.items()])
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:  # a failed COMMIT may already have rolled back
                    with contextlib.suppress(sqlite3.Error):  # the first error is the one
                        db.execute("ROLLBACK")
                raise

    # -- reads
    def load_tables(self) -> list[StoredTable]:
        out = []
        with self._lock:
            rows = self._db.execute(
                "SELECT table_id, created, meta, status, seq, finished FROM tables "
                "WHERE status IN ('open', 'finished') ORDER BY created").fetchall()
            for table_id, created, meta, status, seq, finished in rows:
                entries = [(n, entry) for (n, entry) in self._db.execute(
                    "SELECT n, entry FROM log WHERE table_id = ? ORDER BY n", (table_id,))]
                error = None
                try:
                    meta_data = json.loads(meta)
                except ValueError as exc:
                    meta_data, error = {}, f"unreadable table meta: {exc}"
                out.append(StoredTable(table_id, created, meta_data, entries, status, seq,
                                       finished, error))
        return out

    def _fetch(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    def prune_records(self, keep: int, max_age: float, now: float) -> int:
        with self._lock:
            removed = 0
            self._db.execute("BEGIN")
            try:
                if max_age:
                    removed += self._db.execute("DELETE FROM records WHERE finished < ?",
                                                (now - max_age,)).rowcount
                if keep:
                    removed += self._db.execute(
                        "DELETE FROM records WHERE record_id NOT IN (SELECT record_id FROM "
                        "records ORDER BY finished DESC, record_id ASC LIMIT ?)",
                        (keep,)).rowcount
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
        return removed

    async def close(self) -> None:
        """Commit what is queued, mark a clean stop and close (the WAL is folded in)."""
        await self._stop_writer()
        with self._lock:
            # A clean stop folds the WAL into the file (closing deletes it), so say so first;
            # when even that fails the WAL stays and the next start recovers as after a crash.
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("UPDATE copas SET value = 'stopped' WHERE key = 'state'")
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._db.close()
        os.close(self._lock_fd)


def record_message(record: dict[str, Any]) -> bytes:
    """A record as the serialized copas.v1.GameRecord GetGameRecord answers with."""
    from server.codec import record_to_pb

    return record_to_pb(record, with_json=True).SerializeToString()


def open_storage(data_dir: str, database: str = "", node: Any = None) -> Storage:
    """``database`` (a postgresql:// URL) for the PostgreSQL store; else ``memory`` for no
    durability, or a directory holding ``copas.db``.

    :raises StoreUnusable: see :meth:`SqliteStorage.open` and ``PgStorage.open``.
    """
    if database:
        from server.pg_storage import PgStorage

        return PgStorage.open(database, node)
    if data_dir == "memory":
        return Storage()
    return SqliteStorage.open(Path(data_dir) / "copas.db")

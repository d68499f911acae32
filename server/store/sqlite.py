"""The default store: one SQLite database in WAL mode with ``synchronous=FULL`` (fsync on
commit), in ``--data-dir``; one writer thread commits whatever is queued in one transaction
(group commit, ``server.store.group_commit``). Open it with :meth:`SqliteStore.open`.

The schema is versioned (``PRAGMA user_version``, the migrations below); a start writes a
"running" mark (checkpointed into the main file) and a clean stop writes "stopped", so a WAL
deleted after a crash is noticed: a file marked "running" with no WAL beside it is refused (a
raw copy of a running server's directory that left the WAL out looks just the same). Two
files without a WAL are whole on their own and accepted: one a backup marked "backup"
(``server.store.backup``, ``copas admin backup``), and one in rollback-journal mode, which
the server's own file never is (it is in WAL mode from its first start): SQLite wrote it
whole, as ``VACUUM INTO`` does.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import structlog

from server.store.base import (
    APPLICATION,
    Append,
    Batch,
    CreateTable,
    DeleteEntry,
    FinishTable,
    GameRecord,
    RecordSummary,
    ReleaseTable,
    RewriteRecord,
    StoredTable,
    StoreUnusable,
    Write,
    stored_table,
)
from server.store.group_commit import CommitObserver, GroupCommitStore
from server.store.records import record_message, record_message_of_json, with_pseudonyms

log = structlog.get_logger("copas.store")

SCHEMA_VERSION = 4


def _records_made_public(db: sqlite3.Connection) -> None:
    """4: a record as everyone may read it names no account (a per-game pseudonym instead):
    each kept record's signed-in seats are given their pseudonyms, and its listed summary and
    served copy are made again from it."""
    for record_id, text in db.execute("SELECT record_id, record FROM records").fetchall():
        record = with_pseudonyms(GameRecord.from_json(text))
        db.execute("UPDATE records SET summary = ?, record = ?, record_pb = ? "
                   "WHERE record_id = ?", (record.summary.to_json(), record.to_json(),
                                           record_message(record), record_id))


# Each migration takes the schema from version i to i + 1 (index 0: from nothing to 1): SQL
# statements, or a function run in the migration's transaction.
MIGRATIONS: tuple[str | Callable[[sqlite3.Connection], None], ...] = (
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
    _records_made_public,
)
_V1_TABLES = {"tables", "log", "records"}
BACKUP_STATE = "backup"  # the state of a backup's copy (server.store.backup)


def is_rollback_file(path: Path) -> bool:
    """``path`` is a SQLite database in rollback-journal mode (its header's write and read
    versions are 1; WAL mode makes them 2): written whole by SQLite (``VACUUM INTO``, or a
    backup), never the server's own file, which is in WAL mode from its first start."""
    try:
        with path.open("rb") as file:
            header = file.read(20)
    except OSError:
        return False
    return header.startswith(b"SQLite format 3\x00") and header[18:20] == b"\x01\x01"


def lost_wal(path: Path) -> str:
    """Why a database marked "running" with no write-ahead log is not used."""
    return (f"the last run on {path} did not stop cleanly and its write-ahead log "
            f"{path.name}-wal is missing: recent commits may be lost (a raw copy of a running "
            "server's files without their -wal looks the same); restore a backup made by "
            "`copas admin backup` (docs/OPERATING.md, \"Backups and restores\")")


class SqliteStore(GroupCommitStore[Write]):
    """One SQLite database in WAL mode with synchronous=FULL; a single writer thread commits
    whatever is queued in one transaction (group commit). Open it with :meth:`open`."""

    def __init__(self, db: sqlite3.Connection, path: Path, lock_fd: int,
                 on_commit: CommitObserver | None = None) -> None:
        super().__init__(on_commit)
        self._closed = False
        self.path = path
        self._db = db
        self._lock_fd = lock_fd
        self._lock = threading.Lock()
        for (table_id, n) in db.execute("SELECT table_id, max(n) FROM log GROUP BY table_id"):
            self._counters[table_id] = n
        self._warn_of_legacy_tables()

    @classmethod
    def open(cls, path: Path, on_commit: CommitObserver | None = None) -> SqliteStore:
        """Open (or create) the database at ``path``, migrating it to this schema version.

        :raises StoreUnusable: the directory cannot be written; the file is not a SQLite
            database, is damaged, belongs to another program or to a newer Copas; or the
            last run's write-ahead log is missing (and the file is no backup, see above) or
            sits beside an empty database.
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
            return cls._open_locked(path, wal, lock_fd, on_commit)
        except BaseException:
            os.close(lock_fd)
            raise

    @classmethod
    def _open_locked(cls, path: Path, wal: Path, lock_fd: int,
                     on_commit: CommitObserver | None) -> SqliteStore:
        try:
            db_size = path.stat().st_size if path.exists() else 0
            wal_size = wal.stat().st_size if wal.exists() else -1
        except OSError as exc:
            raise StoreUnusable(f"cannot use data directory {path.parent}: {exc.strerror}"
                                ) from None
        standalone = is_rollback_file(path)
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
            # A file in rollback-journal mode needs no WAL: it is whole on its own.
            cls._prepare(db, path, had_wal=wal_size >= 0 or standalone)
        except StoreUnusable:
            db.close()
            raise
        except sqlite3.Error as exc:
            db.close()
            raise StoreUnusable(f"cannot use {path}: {exc}") from None
        return cls(db, path, lock_fd, on_commit)

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
                raise StoreUnusable(lost_wal(path))
            if marker.get("state") == "backup":
                log.info("started_from_backup", path=str(path))
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        if version == 0 and not names:
            version = 1  # a new database: version 1's tables, then the migrations
            db.executescript(str(MIGRATIONS[0]))
        elif version == 0:
            version = 1  # written before the schema had a version: it is version 1
        for step in range(version, SCHEMA_VERSION):
            db.execute("BEGIN")
            migration = MIGRATIONS[step]
            if callable(migration):
                migration(db)
            else:
                for statement in migration.split(";"):
                    if statement.strip():
                        db.execute(statement)
            db.execute(f"PRAGMA user_version = {step + 1}")
            db.execute("COMMIT")
        # A write at start: a store we cannot write to stops the start, not the first move.
        # The marker goes to the main file at once, so a lost WAL is noticed next time.
        db.execute("UPDATE copas SET value = 'running' WHERE key = 'state'")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def _warn_of_legacy_tables(self) -> None:
        count = int(self._db.execute(
            "SELECT count(*) FROM tables WHERE status = 'legacy'").fetchone()[0])
        if count:
            log.warning("legacy_tables_kept", count=count,
                        detail="tables written by an older Copas are kept but not served")

    def _commit(self, batch: Batch[Write]) -> None:
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
                                       (write.table_id, write.created, write.meta.to_json()))
                        case DeleteEntry():
                            db.execute("DELETE FROM log WHERE table_id = ? AND n = ?",
                                       (write.table_id, write.n))
                        case FinishTable():
                            summary = write.record.summary
                            record_json = write.record.to_json()
                            db.execute(  # a record written again replaces the first
                                "INSERT INTO records (record_id, finished, summary, record, "
                                "record_pb) VALUES (?, ?, ?, ?, ?) ON CONFLICT (record_id) DO "
                                "UPDATE SET finished = excluded.finished, summary = "
                                "excluded.summary, record = excluded.record, record_pb = "
                                "excluded.record_pb",
                                (summary.record_id, summary.finished, summary.to_json(),
                                 record_json,
                                 record_message(write.record)))
                            db.execute("UPDATE tables SET status = 'finished', finished = ? "
                                       "WHERE table_id = ?", (summary.finished, write.table_id))
                        case RewriteRecord():
                            summary = write.record.summary
                            db.execute("UPDATE records SET summary = ?, record = ?, record_pb = "
                                       "? WHERE record_id = ?",
                                       (summary.to_json(), write.record.to_json(),
                                        record_message(write.record), summary.record_id))
                        case ReleaseTable():
                            db.execute("DELETE FROM log WHERE table_id = ?", (write.table_id,))
                            db.execute("DELETE FROM tables WHERE table_id = ?",
                                       (write.table_id,))
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
                entries = self._db.execute(
                    "SELECT n, entry FROM log WHERE table_id = ? ORDER BY n", (table_id,)
                ).fetchall()
                out.append(stored_table(table_id, created, meta, entries, status, seq,
                                        finished))
        return out

    def get_record(self, record_id: str) -> bytes | None:
        with self._lock:
            row = self._db.execute("SELECT record_pb, record FROM records WHERE record_id = ?",
                                   (record_id,)).fetchone()
        if row is None:
            return None
        return bytes(row[0]) if row[0] is not None else record_message_of_json(row[1])

    def get_kept_record(self, record_id: str) -> GameRecord | None:
        with self._lock:
            row = self._db.execute("SELECT record FROM records WHERE record_id = ?",
                                   (record_id,)).fetchone()
        return None if row is None else GameRecord.from_json(row[0])

    def list_records(self, limit: int, before: tuple[float, str] | None
                     ) -> list[RecordSummary]:
        with self._lock:
            if before is None:
                rows = self._db.execute(
                    "SELECT summary FROM records ORDER BY finished DESC, record_id ASC "
                    "LIMIT ?", (limit,)).fetchall()
            else:
                rows = self._db.execute(
                    "SELECT summary FROM records WHERE finished < ? OR (finished = ? AND "
                    "record_id > ?) ORDER BY finished DESC, record_id ASC LIMIT ?",
                    (before[0], before[0], before[1], limit)).fetchall()
        return [RecordSummary.from_json(summary) for (summary,) in rows]

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
        if self._closed:
            return
        self._closed = True
        await self._stop_writer()
        with self._lock:
            # A clean stop folds the WAL into the file (closing deletes it), so say so first;
            # when even that fails the WAL stays and the next start recovers as after a crash.
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("UPDATE copas SET value = 'stopped' WHERE key = 'state'")
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._db.close()
        os.close(self._lock_fd)



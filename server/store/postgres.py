"""The PostgreSQL store: the same interface and promise as the SQLite one (nothing is
acknowledged or shown before it is committed; group commit in a writer thread), for servers
whose nodes share one database, with table ownership on top.

Driver: psycopg 3 (``psycopg[binary]``), used synchronously in the writer thread, like the
SQLite store: one group-commit design for both stores, a maintained driver with binary
wheels, and plain SQL.

Ownership: each table row names its owner node and an epoch. A node writes for a table only
inside a transaction that has locked the row and found itself the owner at the epoch it
holds (fencing): a node that lost a table, however late it wakes up, can never write for it
again; its writes for that table are dropped and it is told (``on_fenced``). A table whose
owner's lease (kept on the database's clock, ``nodes.lease_until``) has run out may be
claimed by another node: epoch + 1, in one UPDATE, so exactly one claimant wins.

Log formats: each node says in its ``nodes`` row the format of the log entries it writes
(``Node.log_format``: ``server.tables.log_entries.LOG_FORMAT``), and each table's row keeps
the newest format of the entries in its log (``tables.log_format``, raised in the commit that
writes them). A trigger refuses to make a node the owner of a table whose log is newer than
the node's format (a node of a release before formats has none in its row: 1), so a node
never takes over a table it cannot read, whichever release it runs, this one or an older one
whose code cannot be changed: its claim's UPDATE simply gets nothing for that table. The
table waits for a node that can read it (docs/OPERATING.md, "Upgrades").
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

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
    StoreUnreachable,
    StoreUnusable,
    TableMeta,
    Write,
    stored_table,
)
from server.store.group_commit import CommitObserver, GroupCommitStore
from server.store.pg_connection import connect, conninfo
from server.store.records import record_message, record_message_of_json, with_pseudonyms

log = structlog.get_logger("copas.store")


def _records_made_public(db: Any) -> None:
    """8: a record as everyone may read it names no account (a per-game pseudonym instead):
    each kept record's signed-in seats are given their pseudonyms, and its listed summary and
    served copy are made again from it."""
    for record_id, text in db.execute("SELECT record_id, record FROM records").fetchall():
        record = with_pseudonyms(GameRecord.from_json(text))
        db.execute("UPDATE records SET summary = %s, record = %s, record_pb = %s "
                   "WHERE record_id = %s", (record.summary.to_json(), record.to_json(),
                                            record_message(record), record_id))


# A table's row names a new owner only if that node reads the table's log (see the module's
# docstring): else the row is left as it was (RETURN NULL), and the claim that tried gets
# nothing for it. Giving a table up (owner NULL, a drain) and a node's own table are let through.
_OWNER_READS_LOG = """
CREATE OR REPLACE FUNCTION copas_owner_reads_log() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    IF NEW.owner IS NOT NULL AND NEW.owner IS DISTINCT FROM OLD.owner
            AND greatest(NEW.log_format, OLD.log_format) > coalesce(
                (SELECT n.log_format FROM nodes n WHERE n.node_id = NEW.owner), 1) THEN
        RETURN NULL;
    END IF;
    RETURN NEW;
END
$body$
"""


MIGRATION_LOCK_SECONDS = 5.0  # a migration under running nodes waits this long for its locks


def _log_formats(db: Any) -> None:
    """9: the log formats of the nodes and of the tables, and the trigger that keeps a node
    off a table it cannot read. Run while the nodes of the release before go on (a rolling
    upgrade): the two tables are locked in the order a claim locks them (no deadlock with
    one), for a moment (new columns with a constant default rewrite no row). Every other
    session's use of ``tables`` queues behind the lock asked for, so it is asked for
    ``MIGRATION_LOCK_SECONDS`` at most: a session holding the table longer (a ``pg_dump``, a
    transaction left open) makes this start fail, changing nothing, instead of stalling
    every node's commits until it ends."""
    import psycopg

    db.execute(f"SET LOCAL lock_timeout = '{int(MIGRATION_LOCK_SECONDS * 1000)}ms'")
    try:
        db.execute("LOCK TABLE tables, nodes IN ACCESS EXCLUSIVE MODE")
    except psycopg.errors.LockNotAvailable:
        raise StoreUnusable(
            f"the database's tables are in use by another session for more than "
            f"{MIGRATION_LOCK_SECONDS:g} s (a pg_dump, a transaction left open?): the schema "
            "was not changed; start this node again once it ends") from None
    db.execute("SET LOCAL lock_timeout = 0")
    db.execute("ALTER TABLE nodes ADD COLUMN log_format integer")  # NULL: an older release
    db.execute("ALTER TABLE tables ADD COLUMN log_format integer NOT NULL DEFAULT 1")
    db.execute(_OWNER_READS_LOG)
    db.execute("CREATE TRIGGER tables_owner_reads_log BEFORE UPDATE OF owner ON tables "
               "FOR EACH ROW EXECUTE FUNCTION copas_owner_reads_log()")


# Versions 1 to 3 are the SQLite store's first three (server/store/sqlite.py): the same tables
# and columns; from 4 on, each store has its own steps (4 to 7 here: what a cluster needs; 8:
# records made public; 9: log formats).
MIGRATIONS: tuple[str | Callable[[Any], None], ...] = (
    """
    CREATE TABLE tables (table_id text PRIMARY KEY, created double precision NOT NULL,
                         meta text NOT NULL, status text NOT NULL DEFAULT 'open');
    CREATE TABLE log (table_id text NOT NULL, n integer NOT NULL, entry text NOT NULL,
                      PRIMARY KEY (table_id, n));
    CREATE TABLE records (record_id text PRIMARY KEY, finished double precision NOT NULL,
                          summary text NOT NULL, record text NOT NULL);
    CREATE INDEX records_by_time ON records (finished);
    """,
    """
    ALTER TABLE tables ADD COLUMN seq bigint NOT NULL DEFAULT 0;
    ALTER TABLE tables ADD COLUMN finished double precision;
    CREATE TABLE copas (key text PRIMARY KEY, value text NOT NULL);
    INSERT INTO copas VALUES ('application', 'copas'), ('state', 'stopped');
    """,
    """
    ALTER TABLE records ADD COLUMN record_pb bytea;
    """,
    """
    ALTER TABLE tables ADD COLUMN owner text;
    ALTER TABLE tables ADD COLUMN epoch bigint NOT NULL DEFAULT 0;
    ALTER TABLE tables ADD COLUMN summary bytea;
    ALTER TABLE tables ADD COLUMN lobby text NOT NULL DEFAULT '';
    CREATE TABLE nodes (node_id text PRIMARY KEY, address text NOT NULL,
                        lease_until timestamptz NOT NULL);
    CREATE TABLE tokens (token_hash text PRIMARY KEY, table_id text NOT NULL,
                         seat integer NOT NULL);
    CREATE INDEX tokens_by_table ON tokens (table_id);
    CREATE INDEX tables_by_created ON tables (created);
    """,
    # 5: the lobby's filters as columns of their own (``lobby`` keeps the state word).
    """
    ALTER TABLE tables ADD COLUMN preset text NOT NULL DEFAULT '';
    ALTER TABLE tables ADD COLUMN players integer NOT NULL DEFAULT 0;
    UPDATE tables SET preset = split_part(lobby, ':', 2),
                      players = coalesce(nullif(split_part(lobby, ':', 3), '')::integer, 0),
                      lobby = split_part(lobby, ':', 1)
        WHERE lobby LIKE '%:%';
    """,
    # 6: request ids answered on every node: a CreateTable's with its table row, a
    # JoinTable's with the seat's token (each goes with its row: bounded like tables, seats).
    """
    ALTER TABLE tables ADD COLUMN request_key text;
    CREATE INDEX tables_by_request_key ON tables (request_key) WHERE request_key IS NOT NULL;
    ALTER TABLE tokens ADD COLUMN join_key text;
    CREATE INDEX tokens_by_join_key ON tokens (join_key) WHERE join_key IS NOT NULL;
    INSERT INTO copas VALUES ('cluster_key_previous', ''), ('cluster_key_rotated', '0')
        ON CONFLICT (key) DO NOTHING;
    """,
    # 7: the address clients reach each node at (told them as x-copas-owner).
    """
    ALTER TABLE nodes ADD COLUMN public_address text NOT NULL DEFAULT '';
    """,
    _records_made_public,
    _log_formats,
)
PG_SCHEMA_VERSION = len(MIGRATIONS)


@dataclass(frozen=True)
class Node:
    """This process as a node of a cluster: its id, the address other nodes reach it at,
    how long its lease lasts, and the address clients reach it at."""

    node_id: str
    address: str
    lease_seconds: float = 10.0
    public_address: str = ""
    """host:port clients are told to call for this node's tables (x-copas-owner)."""
    log_format: int = field(kw_only=True)
    """The format of the log entries this node writes and reads
    (``server.tables.log_entries.LOG_FORMAT``; 0 for a tool that writes none)."""


LobbyState = Literal["joinable", "playing", "finished"]


@dataclass(frozen=True, slots=True)
class LobbyEntry:
    """What every node's lobby shows of a table, and what its filters look at."""

    table_id: str
    summary: bytes
    """The table's serialized copas.v1.TableSummary."""
    state: LobbyState
    """``joinable`` while it takes players; then ``playing``, then ``finished``."""
    preset: str
    players: int


@dataclass(frozen=True, slots=True)
class RegisterToken:
    """A seat's token (its hash), so that any node of a cluster finds the table."""

    token_hash: str
    table_id: str
    seat: int
    join_key: str = ""
    """The JoinTable request that took the seat (its key, not the id), so a retry of it on
    any node finds the table; "" without one."""


@dataclass(frozen=True, slots=True)
class ForgetToken:
    token_hash: str
    table_id: str  # written only while this node owns the table (fencing)


ClusterWrite = LobbyEntry | RegisterToken | ForgetToken


class PgStore(GroupCommitStore[Write | ClusterWrite]):
    """PostgreSQL, shared by the nodes of a cluster. Open it with :meth:`open`."""

    def __init__(self, dsn: str, node: Node, writer: Any, reader: Any,
                 on_commit: CommitObserver | None = None) -> None:
        super().__init__(on_commit)
        self._closed = False
        self.dsn = dsn
        self.node = node
        self.writer = writer  # the writer thread's connection
        self._reader_conn = reader  # lookups, records, claims (its own lock)
        self._read_lock = threading.Lock()
        self._at_close: list[Callable[[bool], None]] = []  # cluster.queries: the lease
        self.epochs: dict[str, int] = {}  # the tables this node owns, at which epoch
        self._fenced: set[str] = set()  # tables whose writes a commit refused, not yet taken
        self._fenced_lock = threading.Lock()

    @property
    def _reader(self) -> Any:
        """The lookups' connection (made again after the database went away)."""
        if self._reader_conn.closed or self._reader_conn.broken:
            self._reader_conn.close()
            self._reader_conn = connect(self.dsn)
        return self._reader_conn

    @contextlib.contextmanager
    def reading(self) -> Iterator[Any]:
        """The lookups' connection to oneself (records here; the cluster's lookups, claims
        and hand-overs in ``server.cluster.queries``); a database that cannot be reached
        (restarting, say) is ``StoreUnreachable``: that call is refused, and the next one
        connects again."""
        import psycopg

        with self._read_lock:
            try:
                yield self._reader
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                raise StoreUnreachable(f"the database cannot be read: {_first_line(exc)}"
                                       ) from None

    def on_clean_close(self, closing: Callable[[bool], None]) -> None:
        """Call ``closing`` when the store closes, after its last commit (with whether the
        store stopped cleanly), before its connections close: the lease's release."""
        self._at_close.append(closing)

    @classmethod
    def open(cls, dsn: str, node: Node | None, on_commit: CommitObserver | None = None
             ) -> PgStore:
        """Connect, migrate the schema (one node at a time), check it is Copas's.

        :raises StoreUnusable: the database cannot be reached or used.
        """
        import psycopg

        node = node or Node("local", "", log_format=0)  # a tool: it writes no log
        try:
            conninfo(dsn, 10)
        except ValueError as exc:
            raise StoreUnusable(str(exc)) from None
        try:
            writer = connect(dsn, connect_timeout=10)
            reader = connect(dsn, connect_timeout=10)
        except psycopg.Error as exc:
            raise StoreUnusable(f"cannot connect to the database: {_first_line(exc)}") from None
        try:
            cls._prepare(writer)
        except StoreUnusable:
            writer.close()
            reader.close()
            raise
        except psycopg.Error as exc:
            writer.close()
            reader.close()
            raise StoreUnusable(f"cannot use the database: {_first_line(exc)}") from None
        return cls(dsn, node, writer, reader, on_commit)

    @staticmethod
    def _prepare(db: Any) -> None:
        with db.transaction():
            db.execute("SELECT pg_advisory_xact_lock(7031979)")  # one migration at a time
            names = {name for (name,) in db.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = current_schema()")}
            version = 0
            if "copas" in names:
                marker = dict(db.execute("SELECT key, value FROM copas").fetchall())
                if marker.get("application") != APPLICATION:
                    raise StoreUnusable("the database is not a Copas database")
                version = int(marker.get("schema_version", "2"))
            elif names & {"tables", "log", "records"}:
                raise StoreUnusable("the database holds tables of another program")
            if version > PG_SCHEMA_VERSION:
                raise StoreUnusable(f"the database has schema version {version}; this "
                                    f"server knows up to {PG_SCHEMA_VERSION}: run a newer Copas")
            for step in range(version, PG_SCHEMA_VERSION):
                migration = MIGRATIONS[step]
                if callable(migration):
                    migration(db)
                    continue
                for statement in migration.split(";"):
                    if statement.strip():
                        db.execute(statement)
            db.execute("INSERT INTO copas VALUES ('schema_version', %s) ON CONFLICT (key) "
                       "DO UPDATE SET value = excluded.value", (str(PG_SCHEMA_VERSION),))

    # -- writes
    def create_table(self, table_id: str, created: float, meta: TableMeta) -> None:
        super().create_table(table_id, created, meta)
        self.epochs[table_id] = 1

    def register_token(self, token_hash: str, table_id: str, seat: int,
                       join_key: str = "") -> None:
        """Where a token belongs, for the other nodes (in the same commit as the join)."""
        self._queue(RegisterToken(token_hash, table_id, seat, join_key))

    def forget_token(self, token_hash: str, table_id: str) -> None:
        self._queue(ForgetToken(token_hash, table_id))

    def update_lobby(self, entry: LobbyEntry) -> None:
        """What every node's lobby shows of the table (with the next commit)."""
        self._queue(entry)

    def take_fenced(self) -> set[str]:
        """The tables whose writes were refused since the last call: another node owns them
        now (taken before anyone is told their commit happened)."""
        with self._fenced_lock:
            fenced, self._fenced = self._fenced, set()
        for table_id in fenced:
            self.forget(table_id)
        return fenced

    def _commit(self, batch: Batch[Write | ClusterWrite]) -> None:
        """Commit the batch; the writes of tables this node no longer owns are dropped (and
        kept for ``take_fenced``). A transaction PostgreSQL aborts to break a deadlock (with a
        takeover locking the same rows) is tried again."""
        import psycopg

        for attempt in range(5):
            try:
                fenced = self._commit_once(batch)
                break
            except (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure):
                if attempt == 4:
                    raise
        if fenced:
            with self._fenced_lock:
                self._fenced |= fenced

    def _idle_writer(self) -> Any:
        """The writer's connection, made again when the database closed it while it was idle
        (a restart, a failover, an operator): no batch is in flight on it between two
        commits, so a new connection changes nothing, where committing on the old one would
        fail and stop a node that had nothing to commit while the database was away, at its
        first commit after the database came back. An idle connection has nothing to read;
        one that has (the server's goodbye, a reset, or at worst a notice) is replaced.

        :raises psycopg.Error: a new connection cannot be made (the commit fails).
        """
        import select

        db = self.writer
        if not db.closed and not db.broken:
            try:
                readable, _, _ = select.select([db.pgconn.socket], [], [], 0)
            except (OSError, ValueError):
                readable = [True]
            if not readable:
                return db
        with contextlib.suppress(Exception):
            db.close()
        self.writer = connect(self.dsn, connect_timeout=10)
        return self.writer

    def _commit_once(self, batch: Batch[Write | ClusterWrite]) -> set[str]:
        db = self._idle_writer()
        created = {w.table_id for w in batch.writes if isinstance(w, CreateTable)}
        touched = {w.table_id for w in batch.writes if not isinstance(w, RewriteRecord)} | \
            set(batch.sequences)  # (a record rewritten is no table's: nothing to fence)
        touched -= created
        me = self.node.node_id
        with db.transaction():
            fenced: set[str] = set()
            if touched:
                rows = {table_id: (owner, epoch) for table_id, owner, epoch in db.execute(
                    "SELECT table_id, owner, epoch FROM tables WHERE table_id = ANY(%s) "
                    "FOR UPDATE", (sorted(touched),))}
                for table_id in touched:
                    row = rows.get(table_id)
                    if row is None or row[0] != me or row[1] != self.epochs.get(table_id):
                        fenced.add(table_id)
            live = [w for w in batch.writes
                    if isinstance(w, RewriteRecord) or w.table_id not in fenced]
            _write_batch(db, live, me, {table_id: seq for table_id, seq
                                        in batch.sequences.items() if table_id not in fenced},
                         self.node.log_format)
        for write in batch.writes:
            if isinstance(write, ReleaseTable):
                self.epochs.pop(write.table_id, None)
        return fenced

    def load_logs(self, db: Any, table_ids: list[str]) -> list[StoredTable]:
        """The tables' logs and rows, read on ``db`` (the lookups' connection, inside the
        transaction of the claim that took them), ready to replay."""
        if not table_ids:
            return []
        out = []
        entries: dict[str, list[tuple[int, str]]] = {t: [] for t in table_ids}
        for table_id, n, entry in db.execute(
                "SELECT table_id, n, entry FROM log WHERE table_id = ANY(%s) ORDER BY table_id, n",
                (table_ids,)):
            entries[table_id].append((n, entry))
        for table_id, created, meta, status, seq, finished in db.execute(
                "SELECT table_id, created, meta, status, seq, finished FROM tables "
                "WHERE table_id = ANY(%s) ORDER BY created", (table_ids,)):
            rows = entries[table_id]
            self._counters[table_id] = rows[-1][0] if rows else 0
            out.append(stored_table(table_id, created, meta, rows, status, seq, finished))
        return out

    def hold(self, epochs: dict[str, int]) -> None:
        """This node owns these tables now, at these epochs (a claim took them): its
        commits write for them."""
        self.epochs.update(epochs)

    def load_tables(self) -> list[StoredTable]:
        """At start: this node's own tables from an earlier run, at epoch + 1 (that run's
        late writes are fenced); orphans of other nodes are the takeover sweep's
        (``server.cluster.queries``), in batches, once this node serves. Its own tables
        whose log is newer than this node reads (that run was of a newer release) are given
        up, for a node that reads them."""
        with self.reading() as db, db.transaction():
            given_up = db.execute(
                "UPDATE tables SET owner = NULL WHERE owner = %s AND log_format > %s "
                "AND status IN ('open', 'finished') RETURNING table_id, log_format",
                (self.node.node_id, self.node.log_format)).fetchall()
            claimed = db.execute(
                "UPDATE tables SET epoch = epoch + 1 WHERE owner = %s "
                "AND status IN ('open', 'finished') RETURNING table_id, epoch",
                (self.node.node_id,)).fetchall()
            stored = self.load_logs(db, [t for t, _ in claimed])
        self.hold({str(t): int(epoch) for t, epoch in claimed})
        for table_id, log_format in given_up:
            log.warning("table_given_up_to_a_newer_node", table_id=table_id,
                        log_format=log_format, this_log_format=self.node.log_format,
                        detail="its log was written by a newer Copas (an earlier run of this "
                        "node): a node of that release takes it over; finish the upgrade")
        return stored

    def forget(self, table_id: str) -> None:
        """This node no longer holds the table (released, or lost to another node)."""
        self.epochs.pop(table_id, None)
        self._counters.pop(table_id, None)

    # -- records
    def get_record(self, record_id: str) -> bytes | None:
        with self.reading() as db:
            row = db.execute(
                "SELECT record_pb, record FROM records WHERE record_id = %s",
                (record_id,)).fetchone()
        if row is None:
            return None
        return bytes(row[0]) if row[0] is not None else record_message_of_json(row[1])

    def get_kept_record(self, record_id: str) -> GameRecord | None:
        with self.reading() as db:
            row = db.execute("SELECT record FROM records WHERE record_id = %s",
                                   (record_id,)).fetchone()
        return None if row is None else GameRecord.from_json(row[0])

    def list_records(self, limit: int, before: tuple[float, str] | None
                     ) -> list[RecordSummary]:
        with self.reading() as db:
            if before is None:
                rows = db.execute(
                    "SELECT summary FROM records ORDER BY finished DESC, record_id ASC "
                    "LIMIT %s", (limit,)).fetchall()
            else:
                rows = db.execute(
                    "SELECT summary FROM records WHERE finished < %s OR (finished = %s AND "
                    "record_id > %s) ORDER BY finished DESC, record_id ASC LIMIT %s",
                    (before[0], before[0], before[1], limit)).fetchall()
        return [RecordSummary.from_json(summary) for (summary,) in rows]

    def prune_records(self, keep: int, max_age: float, now: float) -> int:
        with self.reading() as db, db.transaction():
            removed = 0
            if max_age:
                removed += db.execute("DELETE FROM records WHERE finished < %s",
                                                (now - max_age,)).rowcount
            if keep:
                removed += db.execute(
                    "DELETE FROM records WHERE record_id NOT IN (SELECT record_id FROM "
                    "records ORDER BY finished DESC, record_id ASC LIMIT %s)", (keep,)).rowcount
        return removed

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._stop_writer()
        is_clean = self.failure is None
        for closing in self._at_close:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(closing, is_clean)
        with self._read_lock:
            self._reader_conn.close()
        self.writer.close()


def _write_batch(db: Any, writes: list[Write | ClusterWrite], me: str,
                 sequences: dict[str, int], log_format: int) -> None:
    """A commit's writes in a number of statements that does not grow with the batch: one
    per kind for the kinds every step writes (tables made, log entries, tokens, lobby
    entries, sequences), each a single statement over arrays, and one per write for the rare
    kinds (entries deleted, games finished, records rewritten, tables released, tokens
    forgotten), in their order. A statement is a round trip, and a round trip of the writer
    thread waits for the GIL when the event loop is busy: per-row statements made a commit of
    a thousand tables' moves take a second on a loaded machine.

    The order kept is the one that matters: a table's row before its entries, tokens and
    lobby entry; entries appended before any deleted (the same batch may do both); the rare
    kinds in their order after those; a table's last lobby entry wins; a release last of a
    table's writes (nothing is written for a table after its release). A table's log format
    is raised to ``log_format`` by the statement that appends its entries (in the same
    commit, on the row this commit holds locked), so no node that cannot read an entry ever
    takes the table over."""
    created = [w for w in writes if isinstance(w, CreateTable)]
    if created:
        db.execute(
            "INSERT INTO tables (table_id, created, meta, owner, epoch, request_key) "
            "SELECT t, c, m, %s, 1, r FROM unnest(%s::text[], %s::double precision[], "
            "%s::text[], %s::text[]) AS v(t, c, m, r)",
            (me, [w.table_id for w in created], [w.created for w in created],
             [w.meta.to_json() for w in created],
             [w.meta.request_key or None for w in created]))
    appended = [w for w in writes if isinstance(w, Append)]
    if appended:
        db.execute(
            "WITH formats AS (UPDATE tables SET log_format = %s WHERE table_id = ANY(%s) "
            "AND log_format < %s) "
            "INSERT INTO log (table_id, n, entry) SELECT * FROM unnest(%s::text[], "
            "%s::integer[], %s::text[])",
            (log_format, sorted({w.table_id for w in appended}), log_format,
             [w.table_id for w in appended], [w.n for w in appended],
             [w.entry for w in appended]))
    tokens = [w for w in writes if isinstance(w, RegisterToken)]
    if tokens:
        db.execute(
            "INSERT INTO tokens (token_hash, table_id, seat, join_key) SELECT * FROM "
            "unnest(%s::text[], %s::text[], %s::integer[], %s::text[]) "
            "ON CONFLICT (token_hash) DO NOTHING",
            ([w.token_hash for w in tokens], [w.table_id for w in tokens],
             [w.seat for w in tokens], [w.join_key or None for w in tokens]))
    lobby: dict[str, LobbyEntry] = {}
    for write in writes:
        match write:
            case LobbyEntry():
                lobby[write.table_id] = write  # the last one wins
            case DeleteEntry():
                db.execute("DELETE FROM log WHERE table_id = %s AND n = %s",
                           (write.table_id, write.n))
            case FinishTable():
                summary = write.record.summary
                db.execute(  # a record written again replaces the first
                    "INSERT INTO records (record_id, finished, summary, record, "
                    "record_pb) VALUES (%s, %s, %s, %s, %s) ON CONFLICT (record_id) "
                    "DO UPDATE SET finished = excluded.finished, summary = "
                    "excluded.summary, record = excluded.record, record_pb = "
                    "excluded.record_pb",
                    (summary.record_id, summary.finished, summary.to_json(),
                     write.record.to_json(), record_message(write.record)))
                db.execute("UPDATE tables SET status = 'finished', finished = %s "
                           "WHERE table_id = %s", (summary.finished, write.table_id))
            case RewriteRecord():
                summary = write.record.summary
                db.execute("UPDATE records SET summary = %s, record = %s, "
                           "record_pb = %s WHERE record_id = %s",
                           (summary.to_json(), write.record.to_json(),
                            record_message(write.record), summary.record_id))
            case ReleaseTable():
                lobby.pop(write.table_id, None)  # (its row goes)
                sequences.pop(write.table_id, None)
                db.execute("DELETE FROM log WHERE table_id = %s", (write.table_id,))
                db.execute("DELETE FROM tokens WHERE table_id = %s", (write.table_id,))
                db.execute("DELETE FROM tables WHERE table_id = %s", (write.table_id,))
            case ForgetToken():
                db.execute("DELETE FROM tokens WHERE token_hash = %s AND table_id = %s",
                           (write.token_hash, write.table_id))
    if lobby:
        entries = list(lobby.values())
        db.execute(
            "UPDATE tables SET summary = v.s, lobby = v.l, preset = v.p, players = v.n "
            "FROM unnest(%s::text[], %s::bytea[], %s::text[], %s::text[], %s::integer[]) "
            "AS v(t, s, l, p, n) WHERE tables.table_id = v.t",
            ([e.table_id for e in entries], [e.summary for e in entries],
             [e.state for e in entries], [e.preset for e in entries],
             [e.players for e in entries]))
    if sequences:
        db.execute(
            "UPDATE tables SET seq = v.q FROM unnest(%s::text[], %s::bigint[]) AS v(t, q) "
            "WHERE tables.table_id = v.t AND tables.seq < v.q",
            (list(sequences), list(sequences.values())))


def _first_line(error: BaseException) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__

"""The cluster's questions to the shared database: the lease, claims and hand-overs, the
cluster keys, where tables and tokens are, the lobby's reads and the operators' reads.

``ClusterQueries`` is what every cluster class (ownership, routing, matching, lobby, admin,
keys) asks of the database; ``PgClusterQueries`` answers it from PostgreSQL on the store's
connections (``PgStore.reading``: the lookups' connection, as the store's own reads of
records) and the lease's own connection, so no lookup delays a renewal. Tests answer it
from memory (``tests/helpers/fake_cluster.py``). The log, the records and the writes that
ride in a commit (tokens, lobby entries) stay the store's (``server.store.postgres``).

A read that finds the database away raises ``StoreUnreachable`` (the call is refused with
STORAGE_FAILED, retry shortly; nothing was written): every lookup goes through
``PgStore.reading``, which says so.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
from dataclasses import dataclass
from typing import Any, Protocol

from server.store.base import StoredTable
from server.store.pg_connection import connect
from server.store.postgres import Node, PgStore


@dataclass(frozen=True)
class Owner:
    """A table's owner, as the database has it."""

    node_id: str
    """'' for a table nobody owns (handed over, not yet claimed)."""
    address: str
    """Where the other nodes relay its calls to."""
    is_alive: bool
    """Whether its lease holds (by the database's clock)."""
    public_address: str = ""
    """Where clients reach the owner ('' when it did not say)."""


class ClusterQueries(Protocol):
    """What the cluster asks of the database shared by its nodes."""

    @property
    def node(self) -> Node:
        """This node: its id, addresses and lease length."""

    # -- the lease
    def heartbeat(self) -> float:
        """Renew this node's lease; returns the seconds it lasts (the database's clock)."""

    def release_lease(self) -> None:
        """A clean stop: the others may take this node's tables over at once."""

    # -- ownership
    def claim(self, *, table_id: str | None = None, include_mine: bool = False,
              only_mine: bool = False, limit: int = 200) -> list[StoredTable]:
        """Take over tables whose owner's lease ran out (or that have none; with
        ``include_mine``, this node's own from an earlier run; with ``only_mine``, nothing
        else): epoch + 1, one claimant wins. Returns them, ready to replay."""

    def hand_over(self, table_ids: list[str]) -> list[str]:
        """Give up this node's ownership of ``table_ids`` (a drain); returns those given."""

    def unreadable_orphans(self, table_id: str | None, limit: int
                           ) -> list[tuple[str, str, int]]:
        """Tables ``claim`` leaves because their log is newer than this node reads (written
        by a node of a newer release), whose owner's lease ran out or that have none (only
        ``table_id``, when given): (table_id, owner or '', the table's log format)."""

    def held(self) -> dict[str, int]:
        """The tables this node owns, at the epoch it holds (a copy)."""

    def forget(self, table_id: str) -> None:
        """This node no longer holds the table (released, or lost to another node)."""

    def epochs_of(self, table_ids: list[str]) -> dict[str, tuple[str, int]]:
        """Each table's owner and epoch, as the database has them."""

    # -- the cluster keys
    def cluster_keys(self, grace: float) -> tuple[str, str]:
        """The current key (made by the first node) and, for ``grace`` seconds after a
        rotation, the one before it ("" after)."""

    def rotate_cluster_key(self) -> None: ...

    # -- lookups for routing
    def owner_of(self, table_id: str) -> Owner | None:
        """The table's owner (None: no such table)."""

    def public_owners_of(self, table_ids: list[str]) -> dict[str, str]:
        """Each table's owner's public address, where its lease holds and it gave one."""

    def table_of_request(self, create_key: str, join_key: str) -> str | None:
        """The table a CreateTable request made, or where a JoinTable request took a seat."""

    def table_of_token(self, token_hash: str) -> tuple[str, int] | None:
        """The table and seat of a token (its hash)."""

    def joinable(self, preset: str, players: int, limit: int) -> list[tuple[str, bytes]]:
        """Quick match: the oldest waiting tables of a kind on a live node, (id, summary)."""

    # -- the lobby
    def summaries(self, *, only_joinable: bool, preset: str, players: int,
                  include_finished: bool, limit: int, after: tuple[float, str] | None
                  ) -> list[tuple[float, str, bytes]]:
        """A lobby page: (created, table_id, summary), newest first, then by id."""

    def lobby_rows(self, *, include_finished: bool, limit: int
                   ) -> list[tuple[float, str, bytes, str, str, int]]:
        """The newest tables: (created, table_id, summary, lobby state, preset, players)."""

    # -- operators
    def nodes(self) -> list[tuple[str, str, bool]]:
        """Every node that ever held a lease: (node_id, address, whether its lease holds)."""

    def node_formats(self) -> list[tuple[str, int, bool]]:
        """Every node that ever held a lease: (node_id, the log format it writes (1: a
        release before formats), whether its lease holds)."""

    def orphan_rows(self, limit: int, after_created: float | None = None
                    ) -> list[tuple[float, str, bytes, str]]:
        """Open tables no live node owns, newest first: (created, table_id, summary, owner)."""


class PgClusterQueries:
    """``ClusterQueries`` from PostgreSQL, on the store's lookups' connection (claims,
    hand-overs, keys, lookups) and a lease connection of its own."""

    def __init__(self, store: PgStore) -> None:
        self._store = store
        self._lease_db: Any = None  # the lease's own connection: no lookup delays it
        self._lease_lock = threading.Lock()
        store.on_clean_close(self._close)  # after the last commit, before the connections

    @property
    def node(self) -> Node:
        return self._store.node

    # -- the lease
    def heartbeat(self) -> float:
        """Renew this node's lease; returns the seconds it lasts (by the database's clock).
        The lease has a connection of its own, made again when it was lost."""
        import psycopg

        with self._lease_lock:
            if self._lease_db is None or self._lease_db.closed:
                self._lease_db = connect(self._store.dsn)
            try:
                return self._renew_lease()
            except psycopg.OperationalError:
                self._lease_db.close()
                self._lease_db = None
                raise

    def release_lease(self) -> None:
        with self._lease_lock:
            self._release()

    def _release(self) -> None:
        if self._lease_db is not None and not self._lease_db.closed:
            self._lease_db.execute("UPDATE nodes SET lease_until = now() WHERE node_id = %s",
                                   (self.node.node_id,))

    def _renew_lease(self) -> float:
        node = self.node
        row = self._lease_db.execute(
            "INSERT INTO nodes (node_id, address, lease_until, public_address, log_format) "
            "VALUES (%s, %s, now() + make_interval(secs => %s), %s, %s) "
            "ON CONFLICT (node_id) DO UPDATE SET address = excluded.address, "
            "lease_until = excluded.lease_until, public_address = excluded.public_address, "
            "log_format = excluded.log_format "
            "RETURNING extract(epoch FROM lease_until - now())",
            (node.node_id, node.address, node.lease_seconds, node.public_address,
             node.log_format)).fetchone()
        return float(row[0])

    def _close(self, is_clean: bool) -> None:
        """The store closes: release the lease (a clean stop), then its connection."""
        with self._lease_lock:
            if is_clean:
                with contextlib.suppress(Exception):  # away: the lease runs out by itself
                    self._release()
            if self._lease_db is not None:
                self._lease_db.close()
                self._lease_db = None

    # -- ownership
    def claim(self, *, table_id: str | None = None, include_mine: bool = False,
              only_mine: bool = False, limit: int = 200) -> list[StoredTable]:
        import psycopg

        try:
            return self._claim(table_id, include_mine or only_mine, only_mine, limit)
        except (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure):
            return []  # a commit of the old owner's held the rows: the next sweep tries again

    def _claim(self, table_id: str | None, include_mine: bool, only_mine: bool,
               limit: int) -> list[StoredTable]:
        me = self.node.node_id
        with self._store.reading() as db, db.transaction():
            claimed = db.execute(
                "WITH claimable AS (SELECT t.table_id, t.epoch FROM tables t "
                "LEFT JOIN nodes n ON n.node_id = t.owner "
                "WHERE t.status IN ('open', 'finished') "
                "AND (%(one)s::text IS NULL OR t.table_id = %(one)s) "
                "AND (t.owner IS NULL OR n.lease_until IS NULL OR n.lease_until < now() "
                "     OR (%(mine)s AND t.owner = %(me)s)) "
                "AND NOT (coalesce(t.owner, '') = %(me)s AND NOT %(mine)s) "
                "AND (NOT %(only_mine)s OR t.owner = %(me)s) "
                "AND t.log_format <= %(format)s "  # (else the trigger refuses it: not asked)
                "ORDER BY t.created LIMIT %(limit)s) "
                # Compare and swap on the epoch seen: a claimant that waited for another's
                # update re-checks this against the row it wrote (epoch + 1) and gets nothing.
                # A table whose log became newer meanwhile is refused by the trigger
                # (server.store.postgres): not returned either.
                "UPDATE tables SET owner = %(me)s, epoch = tables.epoch + 1 FROM claimable "
                "WHERE tables.table_id = claimable.table_id "
                "AND tables.epoch = claimable.epoch "
                "RETURNING tables.table_id, tables.epoch",
                {"one": table_id, "mine": include_mine, "only_mine": only_mine, "me": me,
                 "limit": limit, "format": self.node.log_format}).fetchall()
            stored = self._store.load_logs(db, [t for t, _ in claimed])
        self._store.hold({str(t): int(epoch) for t, epoch in claimed})
        return stored

    def hand_over(self, table_ids: list[str]) -> list[str]:
        """Give up this node's ownership of ``table_ids`` (a drain): they have no owner, so
        any other node claims them (at once for a call, else at its next sweep). This node's
        writes for them are refused from now on (fenced)."""
        with self._store.reading() as db:
            rows = db.execute(
                "UPDATE tables SET owner = NULL WHERE owner = %s AND table_id = ANY(%s) "
                "RETURNING table_id", (self.node.node_id, table_ids)).fetchall()
        for (table_id,) in rows:
            self._store.forget(table_id)
        return [str(table_id) for (table_id,) in rows]

    def unreadable_orphans(self, table_id: str | None, limit: int
                           ) -> list[tuple[str, str, int]]:
        with self._store.reading() as db:
            rows = db.execute(
                "SELECT t.table_id, coalesce(t.owner, ''), t.log_format FROM tables t "
                "LEFT JOIN nodes n ON n.node_id = t.owner "
                "WHERE t.status IN ('open', 'finished') AND t.log_format > %(format)s "
                "AND (%(one)s::text IS NULL OR t.table_id = %(one)s) "
                "AND (t.owner IS NULL OR n.lease_until IS NULL OR n.lease_until < now()) "
                "ORDER BY t.created LIMIT %(limit)s",
                {"format": self.node.log_format, "one": table_id, "limit": limit}).fetchall()
        return [(str(t), str(o), int(f)) for t, o, f in rows]

    def held(self) -> dict[str, int]:
        return dict(self._store.epochs)

    def forget(self, table_id: str) -> None:
        self._store.forget(table_id)

    def epochs_of(self, table_ids: list[str]) -> dict[str, tuple[str, int]]:
        with self._store.reading() as db:
            rows = db.execute(
                "SELECT table_id, coalesce(owner, ''), epoch FROM tables "
                "WHERE table_id = ANY(%s)", (table_ids,)).fetchall()
        return {t: (o, int(e)) for t, o, e in rows}

    # -- the cluster keys
    def cluster_keys(self, grace: float) -> tuple[str, str]:
        with self._store.reading() as db:
            db.execute(
                "INSERT INTO copas VALUES ('cluster_key', %s) ON CONFLICT (key) DO NOTHING",
                (secrets.token_urlsafe(32),))
            rows = dict(db.execute(
                "SELECT key, value FROM copas WHERE key IN ('cluster_key', "
                "'cluster_key_previous') OR (key = 'cluster_key_rotated' AND "
                "value::double precision > extract(epoch FROM now()) - %s)",
                (grace,)).fetchall())
        is_in_grace = "cluster_key_rotated" in rows
        return str(rows["cluster_key"]), str(rows.get("cluster_key_previous", "")) \
            if is_in_grace else ""

    def rotate_cluster_key(self) -> None:
        """A new cluster key; the current one becomes the previous (see cluster.keys)."""
        with self._store.reading() as db, db.transaction():
            db.execute("SELECT value FROM copas WHERE key = 'cluster_key' FOR UPDATE")
            db.execute(
                "INSERT INTO copas SELECT 'cluster_key_previous', value FROM copas "
                "WHERE key = 'cluster_key' ON CONFLICT (key) DO UPDATE SET value = "
                "excluded.value")
            db.execute(
                "INSERT INTO copas VALUES ('cluster_key', %s) ON CONFLICT (key) DO UPDATE "
                "SET value = excluded.value", (secrets.token_urlsafe(32),))
            db.execute(
                "INSERT INTO copas VALUES ('cluster_key_rotated', "
                "extract(epoch FROM now())::text) ON CONFLICT (key) DO UPDATE SET "
                "value = excluded.value")

    # -- lookups for routing
    def owner_of(self, table_id: str) -> Owner | None:
        with self._store.reading() as db:
            row = db.execute(
                "SELECT t.owner, coalesce(n.address, ''), coalesce(n.lease_until > now(), false), "
                "coalesce(n.public_address, '') "
                "FROM tables t LEFT JOIN nodes n ON n.node_id = t.owner WHERE t.table_id = %s",
                (table_id,)).fetchone()
        return None if row is None else Owner(row[0] or "", row[1], bool(row[2]), row[3])

    def public_owners_of(self, table_ids: list[str]) -> dict[str, str]:
        """Each table's owner's public address, where its owner's lease holds and it gave
        one (what a node that lost the tables tells their clients)."""
        with self._store.reading() as db:
            rows = db.execute(
                "SELECT t.table_id, n.public_address FROM tables t "
                "JOIN nodes n ON n.node_id = t.owner "
                "WHERE t.table_id = ANY(%s) AND n.lease_until > now() "
                "AND n.public_address <> ''", (table_ids,)).fetchall()
        return {t: a for t, a in rows}

    def table_of_request(self, create_key: str, join_key: str) -> str | None:
        """The table a CreateTable request (``create_key``) made, or where a JoinTable
        request (``join_key``) took a seat, on any node ("": no such key)."""
        with self._store.reading() as db:
            row = db.execute(
                "(SELECT table_id FROM tables WHERE request_key = %s AND %s <> '' LIMIT 1) "
                "UNION ALL (SELECT table_id FROM tokens WHERE join_key = %s AND %s <> '' "
                "LIMIT 1) LIMIT 1", (create_key, create_key, join_key, join_key)).fetchone()
        return None if row is None else str(row[0])

    def joinable(self, preset: str, players: int, limit: int) -> list[tuple[str, bytes]]:
        """Quick match: the oldest waiting tables of a kind with a free seat whose owner's
        lease holds, on any node: (table_id, summary) rows, oldest first."""
        with self._store.reading() as db:
            rows = db.execute(
                "SELECT t.table_id, t.summary FROM tables t JOIN nodes n ON n.node_id = t.owner "
                "WHERE t.lobby = 'joinable' AND t.preset = %s AND t.players = %s "
                "AND t.status = 'open' AND t.summary IS NOT NULL AND n.lease_until > now() "
                "ORDER BY t.created, t.table_id LIMIT %s", (preset, players, limit)).fetchall()
        return [(str(t), bytes(s)) for t, s in rows]

    def table_of_token(self, token_hash: str) -> tuple[str, int] | None:
        with self._store.reading() as db:
            row = db.execute("SELECT table_id, seat FROM tokens WHERE token_hash = %s",
                             (token_hash,)).fetchone()
        return None if row is None else (row[0], int(row[1]))

    # -- the lobby
    def summaries(self, *, only_joinable: bool, preset: str, players: int,
                  include_finished: bool, limit: int, after: tuple[float, str] | None
                  ) -> list[tuple[float, str, bytes]]:
        """Tables' summaries for the lobby, newest first, then by id (from every node),
        after the position ``after`` (created, table_id) of a previous page; an empty preset
        or 0 players match any. Returns (created, table_id, summary) rows."""
        created, table_id = after if after is not None else (None, "")
        with self._store.reading() as db:
            rows = db.execute(
                "SELECT created, table_id, summary FROM tables WHERE summary IS NOT NULL "
                "AND (NOT %(joinable)s OR lobby = 'joinable') "
                "AND (%(preset)s = '' OR preset = %(preset)s) "
                "AND (%(players)s = 0 OR players = %(players)s) "
                "AND (%(finished)s OR status = 'open') "
                "AND (%(created)s::double precision IS NULL OR created < %(created)s "
                "     OR (created = %(created)s AND table_id > %(table_id)s)) "
                "ORDER BY created DESC, table_id ASC LIMIT %(limit)s",
                {"joinable": only_joinable, "preset": preset, "players": players,
                 "finished": include_finished, "created": created, "table_id": table_id,
                 "limit": limit}).fetchall()
        return [(float(c), str(t), bytes(s)) for c, t, s in rows]

    def lobby_rows(self, *, include_finished: bool, limit: int
                   ) -> list[tuple[float, str, bytes, str, str, int]]:
        """Every node's newest tables for the lobby (at most ``limit``), newest first, then
        by id: (created, table_id, summary, lobby state, preset, players) rows, for filters
        applied in memory (``server.cluster.lobby``)."""
        with self._store.reading() as db:
            rows = db.execute(
                "SELECT created, table_id, summary, lobby, preset, players FROM tables "
                "WHERE summary IS NOT NULL AND (%(finished)s OR status = 'open') "
                "ORDER BY created DESC, table_id ASC LIMIT %(limit)s",
                {"finished": include_finished, "limit": limit}).fetchall()
        return [(float(c), str(t), bytes(s), str(lo), str(p), int(n))
                for c, t, s, lo, p, n in rows]

    # -- operators (the admin service)
    def nodes(self) -> list[tuple[str, str, bool]]:
        with self._store.reading() as db:
            rows = db.execute(
                "SELECT node_id, address, lease_until > now() FROM nodes ORDER BY node_id"
            ).fetchall()
        return [(str(n), str(a), bool(alive)) for n, a, alive in rows]

    def node_formats(self) -> list[tuple[str, int, bool]]:
        with self._store.reading() as db:
            rows = db.execute(
                "SELECT node_id, coalesce(log_format, 1), lease_until > now() FROM nodes "
                "ORDER BY node_id").fetchall()
        return [(str(n), int(f), bool(alive)) for n, f, alive in rows]

    def orphan_rows(self, limit: int, after_created: float | None = None
                    ) -> list[tuple[float, str, bytes, str]]:
        """Tables not finished whose owner's lease ran out (or that have no owner), newest
        first, made at or before ``after_created`` (about: the caller compares exactly):
        (created, table_id, summary, owner)."""
        with self._store.reading() as db:
            rows = db.execute(
                "SELECT t.created, t.table_id, t.summary, coalesce(t.owner, '') FROM tables t "
                "LEFT JOIN nodes n ON n.node_id = t.owner WHERE t.summary IS NOT NULL "
                "AND t.status = 'open' AND (t.owner IS NULL OR n.lease_until IS NULL "
                "OR n.lease_until < now()) AND (%s::double precision IS NULL "
                "OR t.created <= %s + 0.001) ORDER BY t.created DESC, t.table_id LIMIT %s",
                (after_created, after_created, limit)).fetchall()
        return [(float(c), str(t), bytes(b), str(o)) for c, t, b, o in rows]

"""A cluster's shared database in memory, for routing, takeovers and the admin's cluster paths
without PostgreSQL: ``FakeDatabase`` holds the nodes and their leases (on a clock the test
moves), the tables' owners and epochs, the tokens and the request keys; each node asks it
through a ``FakeClusterQueries`` (a ``server.cluster.queries.ClusterQueries``). It answers as
the SQL of ``PgClusterQueries`` does (and the trigger that keeps a node off a table whose log is
newer than it reads: ``log_format``); ``is_down`` makes every question ``StoreUnreachable``."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from server.cluster.queries import ClusterQueries, Owner
from server.store.base import StoredTable, StoreUnreachable, TableMeta
from server.store.postgres import Node


@dataclass
class NodeRow:
    address: str
    public_address: str
    lease_until: float
    log_format: int = 1


@dataclass
class TableRow:
    stored: StoredTable
    owner: str | None
    epoch: int = 1
    status: str = "open"
    summary: bytes | None = None
    lobby: str = ""
    preset: str = ""
    players: int = 0
    request_key: str = ""
    log_format: int = 1


@dataclass
class FakeDatabase:
    now: float = 1_000.0
    nodes: dict[str, NodeRow] = field(default_factory=dict)
    tables: dict[str, TableRow] = field(default_factory=dict)
    tokens: dict[str, tuple[str, int, str]] = field(default_factory=dict)  # hash: table, seat, join
    keys: tuple[str, str] = ("key-1", "")
    is_down: bool = False

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def is_alive(self, node_id: str | None) -> bool:
        row = self.nodes.get(node_id or "")
        return row is not None and row.lease_until > self.now

    def add_table(self, table_id: str, owner: str | None, meta: TableMeta,
                  created: float = 1.0) -> TableRow:
        """A table (no log yet: a waiting table) owned by ``owner``."""
        row = self.tables[table_id] = TableRow(
            StoredTable(table_id, created, meta, (), False, 0), owner,
            preset=meta.preset, players=meta.rules.players)
        return row


class FakeClusterQueries:
    """One node's questions to a ``FakeDatabase``."""

    def __init__(self, db: FakeDatabase, node: Node) -> None:
        self.db = db
        self.node = node
        self._held: dict[str, int] = {}
        self.reads = 0

    def _ask(self) -> FakeDatabase:
        if self.db.is_down:
            raise StoreUnreachable("the database cannot be read: (fake) it is down")
        self.reads += 1
        return self.db

    def heartbeat(self) -> float:
        db = self._ask()
        db.nodes[self.node.node_id] = NodeRow(self.node.address, self.node.public_address,
                                              db.now + self.node.lease_seconds,
                                              self.node.log_format)
        return self.node.lease_seconds

    def release_lease(self) -> None:
        db = self._ask()
        if self.node.node_id in db.nodes:
            db.nodes[self.node.node_id].lease_until = db.now

    def claim(self, *, table_id: str | None = None, include_mine: bool = False,
              only_mine: bool = False, limit: int = 200) -> list[StoredTable]:
        db = self._ask()
        me, mine = self.node.node_id, include_mine or only_mine
        found = []
        for t, row in sorted(db.tables.items(), key=lambda item: item[1].stored.created):
            if row.status not in ("open", "finished") or (table_id is not None and t != table_id):
                continue
            if not (row.owner is None or not db.is_alive(row.owner) or (mine and row.owner == me)):
                continue
            if ((row.owner or "") == me and not mine) or (only_mine and row.owner != me):
                continue
            if row.log_format > self.node.log_format:
                continue
            row.owner, row.epoch = me, row.epoch + 1
            self._held[t] = row.epoch
            found.append(row.stored)
            if len(found) >= limit:
                break
        return found

    def hand_over(self, table_ids: list[str]) -> list[str]:
        db = self._ask()
        me = self.node.node_id
        handed = [t for t in table_ids if t in db.tables and db.tables[t].owner == me]
        for t in handed:
            db.tables[t].owner = None
            self.forget(t)
        return handed

    def unreadable_orphans(self, table_id: str | None, limit: int
                           ) -> list[tuple[str, str, int]]:
        db = self._ask()
        rows = sorted((row.stored.created, t, row.owner or "", row.log_format)
                      for t, row in db.tables.items()
                      if row.status in ("open", "finished") and not db.is_alive(row.owner)
                      and row.log_format > self.node.log_format
                      and (table_id is None or t == table_id))
        return [(t, o, f) for _, t, o, f in rows[:limit]]

    def held(self) -> dict[str, int]:
        return dict(self._held)

    def forget(self, table_id: str) -> None:
        self._held.pop(table_id, None)

    def epochs_of(self, table_ids: list[str]) -> dict[str, tuple[str, int]]:
        db = self._ask()
        return {t: (db.tables[t].owner or "", db.tables[t].epoch) for t in table_ids
                if t in db.tables}

    def cluster_keys(self, grace: float) -> tuple[str, str]:
        return self._ask().keys

    def rotate_cluster_key(self) -> None:
        db = self._ask()
        db.keys = (secrets.token_urlsafe(8), db.keys[0])

    def owner_of(self, table_id: str) -> Owner | None:
        db = self._ask()
        row = db.tables.get(table_id)
        if row is None:
            return None
        node = db.nodes.get(row.owner or "")
        return Owner(row.owner or "", node.address if node else "", db.is_alive(row.owner),
                     node.public_address if node else "")

    def public_owners_of(self, table_ids: list[str]) -> dict[str, str]:
        db = self._ask()
        return {t: db.nodes[row.owner].public_address for t in table_ids
                if (row := db.tables.get(t)) is not None and row.owner is not None
                and db.is_alive(row.owner) and db.nodes[row.owner].public_address}

    def table_of_request(self, create_key: str, join_key: str) -> str | None:
        db = self._ask()
        for t, row in db.tables.items():
            if create_key and row.request_key == create_key:
                return t
        for token_table, _, key in db.tokens.values():
            if join_key and key == join_key:
                return token_table
        return None

    def table_of_token(self, token_hash: str) -> tuple[str, int] | None:
        found = self._ask().tokens.get(token_hash)
        return None if found is None else (found[0], found[1])

    def joinable(self, preset: str, players: int, limit: int) -> list[tuple[str, bytes]]:
        db = self._ask()
        rows = sorted((row.stored.created, t, row.summary) for t, row in db.tables.items()
                      if row.lobby == "joinable" and row.preset == preset
                      and row.players == players and row.status == "open"
                      and row.summary is not None and db.is_alive(row.owner))
        return [(t, s) for _, t, s in rows[:limit]]

    def summaries(self, *, only_joinable: bool, preset: str, players: int,
                  include_finished: bool, limit: int, after: tuple[float, str] | None
                  ) -> list[tuple[float, str, bytes]]:
        rows = [(c, t, s, lo, p, n) for c, t, s, lo, p, n in self.lobby_rows(
            include_finished=include_finished, limit=1_000_000)
            if (not only_joinable or lo == "joinable") and (not preset or p == preset)
            and (not players or n == players)
            and (after is None or c < after[0] or (c == after[0] and t > after[1]))]
        return [(c, t, s) for c, t, s, _, _, _ in rows[:limit]]

    def lobby_rows(self, *, include_finished: bool, limit: int
                   ) -> list[tuple[float, str, bytes, str, str, int]]:
        db = self._ask()
        rows = [(row.stored.created, t, row.summary, row.lobby, row.preset, row.players)
                for t, row in db.tables.items() if row.summary is not None
                and (include_finished or row.status == "open")]
        rows.sort(key=lambda r: (-r[0], r[1]))
        return [(c, t, s, lo, p, n) for c, t, s, lo, p, n in rows[:limit] if s is not None]

    def nodes(self) -> list[tuple[str, str, bool]]:
        db = self._ask()
        return [(n, row.address, db.is_alive(n)) for n, row in sorted(db.nodes.items())]

    def node_formats(self) -> list[tuple[str, int, bool]]:
        db = self._ask()
        return [(n, row.log_format, db.is_alive(n)) for n, row in sorted(db.nodes.items())]

    def orphan_rows(self, limit: int, after_created: float | None = None
                    ) -> list[tuple[float, str, bytes, str]]:
        db = self._ask()
        rows = sorted(((row.stored.created, t, row.summary, row.owner or "")
                       for t, row in db.tables.items()
                       if row.summary is not None and row.status == "open"
                       and not db.is_alive(row.owner)
                       and (after_created is None or row.stored.created <= after_created + 0.001)),
                      key=lambda r: (-r[0], r[1]))
        return [(c, t, s, o) for c, t, s, o in rows[:limit] if s is not None]


def _is_queries(queries: FakeClusterQueries) -> ClusterQueries:
    return queries  # mypy checks that the fake answers the whole protocol

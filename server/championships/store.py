"""Championships in the store: SQLite (their own file, ``championships.sqlite3``, beside the
tables' in ``--data-dir``; ``:memory:`` for ``--data-dir memory``) or the cluster's PostgreSQL.

Each call is one transaction, so a kill -9 at any moment leaves a championship as it was
before the call or after it: a round's seating is written with all its tables' ids at once
(its row keyed by championship and round: a round is never seated twice, even by two nodes),
and a game is counted keyed by its table id (a second count of it does nothing). Checks that
decide a refusal (registered twice, after the start, full...) run inside the same
transaction as the write, and a refusal (``Refused``) writes nothing.

Both backends share the statements below (SQLite's ``?`` placeholders, ``ON CONFLICT DO
NOTHING`` and the types both know); each opens and runs its transactions its own way.

Every write to a championship adds one to its ``version`` (a watcher never shows an older
one than it showed) and, on PostgreSQL, notifies every node (``NOTIFY copas_championships``)
so their watchers follow at once. The schema has a version (SQLite's ``user_version``,
PostgreSQL's ``championships_meta``): 2 since issue 38; a newer one is refused at start.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from engine import Rules
from engine.championship import GameResult
from server.championships.model import (
    Championship,
    Counted,
    Phase,
    Registration,
    SeatedTable,
    Spec,
)
from server.store.base import StoreUnusable
from server.store.pg_connection import PgConnection

T = TypeVar("T")
FILE = "championships.sqlite3"
SCHEMA_VERSION = 2
CHANNEL = "copas_championships"  # PostgreSQL's NOTIFY channel: a championship changed

SCHEMA = """
CREATE TABLE IF NOT EXISTS championships (
    championship_id TEXT PRIMARY KEY, spec TEXT NOT NULL, phase TEXT NOT NULL,
    began DOUBLE PRECISION, ended DOUBLE PRECISION, created DOUBLE PRECISION NOT NULL,
    creator TEXT NOT NULL, request_key TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS championships_by_phase ON championships (phase, created);
CREATE INDEX IF NOT EXISTS championships_by_request ON championships (request_key);
CREATE TABLE IF NOT EXISTS championship_players (
    championship_id TEXT NOT NULL, account_id TEXT NOT NULL, display_name TEXT NOT NULL,
    registered DOUBLE PRECISION NOT NULL, withdrawn DOUBLE PRECISION,
    PRIMARY KEY (championship_id, account_id));
CREATE TABLE IF NOT EXISTS championship_rounds (
    championship_id TEXT NOT NULL, round_no INTEGER NOT NULL,
    seated DOUBLE PRECISION NOT NULL, PRIMARY KEY (championship_id, round_no));
CREATE TABLE IF NOT EXISTS championship_tables (
    championship_id TEXT NOT NULL, round_no INTEGER NOT NULL, table_no INTEGER NOT NULL,
    table_id TEXT NOT NULL UNIQUE, players TEXT NOT NULL, tokens TEXT NOT NULL,
    PRIMARY KEY (championship_id, round_no, table_no));
CREATE TABLE IF NOT EXISTS championship_results (
    table_id TEXT PRIMARY KEY, championship_id TEXT NOT NULL, result TEXT NOT NULL,
    counted DOUBLE PRECISION NOT NULL);
CREATE INDEX IF NOT EXISTS championship_results_by_championship
    ON championship_results (championship_id);
CREATE TABLE IF NOT EXISTS championship_leases (
    championship_id TEXT PRIMARY KEY, node TEXT NOT NULL, expires DOUBLE PRECISION NOT NULL)
"""
# Version 2: a version per championship (bumped by every write), the creator's address (new
# championships are bounded per address), the start time as a column (the driver reads only
# the championships due a step).
SCHEMA_V2 = """
ALTER TABLE championships ADD COLUMN version INTEGER NOT NULL DEFAULT 0;
ALTER TABLE championships ADD COLUMN creator_address TEXT NOT NULL DEFAULT '';
ALTER TABLE championships ADD COLUMN start_at DOUBLE PRECISION;
CREATE INDEX championships_due ON championships (phase, start_at)
"""


def _start_times(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """(start_at, championship_id) for rows (championship_id, spec JSON) of version 1."""
    return [(json.loads(spec).get("start_at"), cid) for cid, spec in rows]


class Refused(Exception):
    """A call the championship's state refuses (nothing was written); ``reason`` is a
    ``copas.v1.ErrorReason`` name."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class Tx(Protocol):
    """One transaction: statements with ``?`` placeholders."""

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...
    def write(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Runs one statement; the rows it changed."""
    @property
    def for_update(self) -> str:
        """What locks the rows a SELECT read until the transaction ends ("" where the
        transaction locks the whole database)."""
    def clock(self) -> float:
        """The database's time now (seconds since the epoch): every node's leases read one
        clock."""
    def notify(self, championship_id: str) -> None:
        """Every node hears of the change once the transaction commits (where they can)."""


# ---------------------------------------------------------------- encodings


def spec_to_json(spec: Spec) -> str:
    return json.dumps({
        "name": spec.name, "preset": spec.preset, "game": spec.game.to_dict(),
        "rounds": spec.rounds, "duplicate_deals": spec.duplicate_deals,
        "max_players": spec.max_players, "min_players": spec.min_players,
        "start_at": spec.start_at, "start_when_full": spec.start_when_full,
        "round_pause": spec.round_pause, "seed": spec.seed, "creator": spec.creator,
        "created": spec.created, "request_key": spec.request_key,
        "fingerprint": spec.fingerprint}, separators=(",", ":"))


def spec_from_json(championship_id: str, text: str) -> Spec:
    d = json.loads(text)
    return Spec(championship_id, d["name"], d["preset"], Rules.from_dict(d["game"]),
                d["rounds"], d["duplicate_deals"], d["max_players"], d["min_players"],
                d["start_at"], d["start_when_full"], d["round_pause"], d["seed"],
                d["creator"], d["created"], d["request_key"], d["fingerprint"])


def result_to_json(result: GameResult) -> str:
    return json.dumps({"round": result.round_no, "table": result.table,
                       "players": list(result.players), "totals": list(result.totals),
                       "leavers": list(result.leavers), "no_shows": list(result.no_shows)},
                      separators=(",", ":"))


def result_from_json(text: str) -> GameResult:
    d = json.loads(text)
    return GameResult(d["round"], d["table"], tuple(d["players"]), tuple(d["totals"]),
                      tuple(d["leavers"]), tuple(d["no_shows"]))


# ---------------------------------------------------------------- the calls


def _load(tx: Tx, championship_id: str) -> Championship | None:
    found = tx.rows("SELECT spec, phase, began, ended, version FROM championships "
                    "WHERE championship_id = ?", (championship_id,))
    if not found:
        return None
    spec, phase, began, ended, version = found[0]
    championship = Championship(spec_from_json(championship_id, spec), Phase(phase),
                                began, ended, version=int(version))
    championship.registrations = [
        Registration(a, n, r, w) for a, n, r, w in tx.rows(
            "SELECT account_id, display_name, registered, withdrawn FROM championship_players "
            "WHERE championship_id = ? ORDER BY registered, account_id", (championship_id,))]
    championship.rounds = {r: s for r, s in tx.rows(
        "SELECT round_no, seated FROM championship_rounds WHERE championship_id = ?",
        (championship_id,))}
    championship.tables = [
        SeatedTable(r, t, i, tuple(json.loads(p)), tuple(json.loads(k)))
        for r, t, i, p, k in tx.rows(
            "SELECT round_no, table_no, table_id, players, tokens FROM championship_tables "
            "WHERE championship_id = ? ORDER BY round_no, table_no", (championship_id,))]
    championship.counted = [
        Counted(i, result_from_json(r), c) for i, r, c in tx.rows(
            "SELECT table_id, result, counted FROM championship_results "
            "WHERE championship_id = ? ORDER BY counted, table_id", (championship_id,))]
    return championship


def _phase(tx: Tx, championship_id: str) -> Phase:
    found = tx.rows("SELECT phase FROM championships WHERE championship_id = ?"
                    + tx.for_update, (championship_id,))
    if not found:
        raise Refused("CHAMPIONSHIP_NOT_FOUND", f"no championship {championship_id}")
    return Phase(found[0][0])


def _changed(tx: Tx, championship_id: str) -> None:
    """A write to the championship: its version moves on, and every node hears of it."""
    tx.write("UPDATE championships SET version = version + 1 WHERE championship_id = ?",
             (championship_id,))
    tx.notify(championship_id)


def _players(tx: Tx, championship_id: str) -> int:
    return int(tx.rows("SELECT count(*) FROM championship_players WHERE championship_id = ?",
                       (championship_id,))[0][0])


class ChampionshipStore:
    """The championships' calls, each one transaction (``_run``: the backend's)."""

    def _run(self, body: Callable[[Tx], T]) -> T:
        raise NotImplementedError

    async def _do(self, body: Callable[[Tx], T]) -> T:
        return await asyncio.to_thread(self._run, body)

    def close(self) -> None:
        return None

    async def create(self, spec: Spec, quota: int | None = None, address: str = "") -> str:
        """The new championship's id (or, for a request_key already used with the same
        fingerprint, the id it made).

        :raises Refused: REQUEST_ID_REUSED; TOO_MANY_CHAMPIONSHIPS (``spec.creator`` has
            ``quota`` championships not over).
        """
        def body(tx: Tx) -> str:
            if spec.request_key:
                for cid, text in tx.rows("SELECT championship_id, spec FROM championships "
                                         "WHERE request_key = ?", (spec.request_key,)):
                    if spec_from_json(cid, text).fingerprint != spec.fingerprint:
                        raise Refused("REQUEST_ID_REUSED", "this request_id made another "
                                      "championship: use a new request_id")
                    return str(cid)
            if quota is not None:
                open_now = tx.rows(
                    "SELECT count(*) FROM championships WHERE creator = ? AND phase IN "
                    "(?, ?)", (spec.creator, Phase.REGISTERING.value, Phase.RUNNING.value))
                if int(open_now[0][0]) >= quota:
                    raise Refused("TOO_MANY_CHAMPIONSHIPS", (
                        f"an account may have {quota} championships not yet over on this "
                        "server" if quota else "only operators create championships here"))
            tx.write("INSERT INTO championships (championship_id, spec, phase, began, ended, "
                     "created, creator, request_key, version, creator_address, start_at) "
                     "VALUES (?, ?, ?, NULL, NULL, ?, ?, ?, 1, ?, ?)",
                     (spec.championship_id, spec_to_json(spec), Phase.REGISTERING.value,
                      spec.created, spec.creator, spec.request_key, address, spec.start_at))
            tx.notify(spec.championship_id)
            return spec.championship_id
        return await self._do(body)

    async def load(self, championship_id: str) -> Championship | None:
        return await self._do(lambda tx: _load(tx, championship_id))

    async def page(self, limit: int, offset: int, include_finished: bool) -> list[Championship]:
        """Newest first."""
        def body(tx: Tx) -> list[Championship]:
            phases = [p.value for p in Phase if include_finished or not p.is_over]
            marks = ", ".join("?" * len(phases))
            ids = tx.rows(f"SELECT championship_id FROM championships WHERE phase IN ({marks}) "
                          "ORDER BY created DESC, championship_id LIMIT ? OFFSET ?",
                          (*phases, limit, offset))
            return [c for (cid,) in ids if (c := _load(tx, cid)) is not None]
        return await self._do(body)

    async def active(self) -> list[str]:
        """The ids of the championships not over, oldest first."""
        return await self._do(lambda tx: [str(cid) for (cid,) in tx.rows(
            "SELECT championship_id FROM championships WHERE phase IN (?, ?) "
            "ORDER BY created, championship_id",
            (Phase.REGISTERING.value, Phase.RUNNING.value))])

    async def due(self, now: float, made_before: float) -> list[str]:
        """The championships a driver's pass steps, oldest first: those running, and those
        registering whose start time has come or that were made before ``made_before`` (to
        expire). A registering one that fills up is stepped by its registration's change."""
        return await self._do(lambda tx: [str(cid) for (cid,) in tx.rows(
            "SELECT championship_id FROM championships WHERE phase = ? OR (phase = ? AND "
            "(start_at <= ? OR created < ?)) ORDER BY created, championship_id",
            (Phase.RUNNING.value, Phase.REGISTERING.value, now, made_before))])

    async def version(self, championship_id: str) -> int:
        """Its version now (-1: none such)."""
        found = await self._do(lambda tx: tx.rows(
            "SELECT version FROM championships WHERE championship_id = ?", (championship_id,)))
        return int(found[0][0]) if found else -1

    async def register(self, championship_id: str, registration: Registration,
                       max_players: int) -> None:
        """:raises Refused: CHAMPIONSHIP_NOT_FOUND, REGISTRATION_CLOSED, ALREADY_REGISTERED,
        CHAMPIONSHIP_FULL."""
        def body(tx: Tx) -> None:
            if _phase(tx, championship_id) is not Phase.REGISTERING:
                raise Refused("REGISTRATION_CLOSED", "registration is over for this "
                              "championship")
            if tx.rows("SELECT 1 FROM championship_players WHERE championship_id = ? AND "
                       "account_id = ?", (championship_id, registration.account_id)):
                raise Refused("ALREADY_REGISTERED", "you are registered already")
            if _players(tx, championship_id) >= max_players:
                raise Refused("CHAMPIONSHIP_FULL", f"the championship has its {max_players} "
                              "players")
            tx.write("INSERT INTO championship_players VALUES (?, ?, ?, ?, NULL)",
                     (championship_id, registration.account_id, registration.display_name,
                      registration.registered))
            _changed(tx, championship_id)
        await self._do(body)

    async def unregister(self, championship_id: str, account_id: str) -> None:
        """:raises Refused: CHAMPIONSHIP_NOT_FOUND, REGISTRATION_CLOSED, NOT_REGISTERED."""
        def body(tx: Tx) -> None:
            if _phase(tx, championship_id) is not Phase.REGISTERING:
                raise Refused("REGISTRATION_CLOSED", "the championship has started: "
                              "withdraw instead")
            if not tx.write("DELETE FROM championship_players WHERE championship_id = ? AND "
                            "account_id = ?", (championship_id, account_id)):
                raise Refused("NOT_REGISTERED", "you are not registered")
            _changed(tx, championship_id)
        await self._do(body)

    async def withdraw(self, championship_id: str, account_id: str, at: float) -> None:
        """:raises Refused: CHAMPIONSHIP_NOT_FOUND, CHAMPIONSHIP_NOT_RUNNING, NOT_REGISTERED,
        ALREADY_WITHDRAWN."""
        def body(tx: Tx) -> None:
            if _phase(tx, championship_id) is not Phase.RUNNING:
                raise Refused("CHAMPIONSHIP_NOT_RUNNING", "only a running championship is "
                              "withdrawn from (before the start: unregister)")
            found = tx.rows("SELECT withdrawn FROM championship_players WHERE "
                            "championship_id = ? AND account_id = ?",
                            (championship_id, account_id))
            if not found:
                raise Refused("NOT_REGISTERED", "you are not registered")
            if found[0][0] is not None:
                raise Refused("ALREADY_WITHDRAWN", "you withdrew already")
            tx.write("UPDATE championship_players SET withdrawn = ? WHERE championship_id = ? "
                     "AND account_id = ?", (at, championship_id, account_id))
            _changed(tx, championship_id)
        await self._do(body)

    async def start(self, championship_id: str, at: float, min_players: int) -> None:
        """:raises Refused: CHAMPIONSHIP_NOT_FOUND, CHAMPIONSHIP_NOT_RUNNING (not
        registering), NOT_ENOUGH_PLAYERS."""
        def body(tx: Tx) -> None:
            if _phase(tx, championship_id) is not Phase.REGISTERING:
                raise Refused("CHAMPIONSHIP_NOT_RUNNING", "the championship has started "
                              "already, or is over")
            count = _players(tx, championship_id)
            if count < max(3, min_players):
                raise Refused("NOT_ENOUGH_PLAYERS", f"{count} registered: it needs at least "
                              f"{max(3, min_players)}")
            tx.write("UPDATE championships SET phase = ?, began = ? WHERE championship_id = ?",
                     (Phase.RUNNING.value, at, championship_id))
            _changed(tx, championship_id)
        await self._do(body)

    async def seat_round(self, championship_id: str, round_no: int, at: float,
                         tables: list[SeatedTable]) -> bool:
        """Writes a round's seating and its tables' ids at once; False when the round was
        seated already (by an earlier try or another node) or the championship is not
        running: nothing is written then."""
        def body(tx: Tx) -> bool:
            if _phase(tx, championship_id) is not Phase.RUNNING:
                return False
            if not tx.write("INSERT INTO championship_rounds VALUES (?, ?, ?) "
                            "ON CONFLICT DO NOTHING", (championship_id, round_no, at)):
                return False
            for table in tables:
                tx.write("INSERT INTO championship_tables VALUES (?, ?, ?, ?, ?, ?)",
                         (championship_id, table.round_no, table.table_no, table.table_id,
                          json.dumps(list(table.players)),
                          json.dumps(list(table.sealed_tokens))))
            _changed(tx, championship_id)
            return True
        return await self._do(body)

    async def count(self, championship_id: str, counted: Counted) -> bool:
        """Counts one game (keyed by its table id); False when it was counted already, or
        the championship is not running (a cancelled one counts no more games)."""
        def body(tx: Tx) -> bool:
            if _phase(tx, championship_id) is not Phase.RUNNING:
                return False
            if not tx.write(
                    "INSERT INTO championship_results VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    (counted.table_id, championship_id, result_to_json(counted.result),
                     counted.counted)):
                return False
            _changed(tx, championship_id)
            return True
        return await self._do(body)

    async def end(self, championship_id: str, phase: Phase, at: float) -> bool:
        """Finishes or cancels; False when it is over already.

        :raises Refused: CHAMPIONSHIP_NOT_FOUND.
        """
        def body(tx: Tx) -> bool:
            if _phase(tx, championship_id).is_over:
                return False
            tx.write("UPDATE championships SET phase = ?, ended = ? WHERE championship_id = ?",
                     (phase.value, at, championship_id))
            _changed(tx, championship_id)
            return True
        return await self._do(body)


    async def claim(self, championship_id: str, node: str, ttl: float,
                    now: float | None = None) -> bool:
        """Whether ``node`` drives the championship for ``ttl`` seconds more, by the
        database's clock (or ``now``, a test's): it held the lease (renewed), or the lease
        ran out (taken). One node holds it at a time."""
        def body(tx: Tx) -> bool:
            at = tx.clock() if now is None else now
            tx.write("INSERT INTO championship_leases VALUES (?, ?, ?) "
                     "ON CONFLICT (championship_id) DO UPDATE SET node = excluded.node, "
                     "expires = excluded.expires WHERE championship_leases.node = "
                     "excluded.node OR championship_leases.expires < ?",
                     (championship_id, node, at + ttl, at))
            held = tx.rows("SELECT node FROM championship_leases WHERE championship_id = ?",
                           (championship_id,))
            return bool(held) and held[0][0] == node
        return await self._do(body)

    async def forget_player(self, account_id: str, name: str) -> list[str]:
        """A deleted account's registrations are named ``name`` from now on; the
        championships changed."""
        def body(tx: Tx) -> list[str]:
            found = [str(c) for (c,) in tx.rows(
                "SELECT championship_id FROM championship_players WHERE account_id = ?",
                (account_id,))]
            tx.write("UPDATE championship_players SET display_name = ? WHERE account_id = ?",
                     (name, account_id))
            for championship_id in found:
                _changed(tx, championship_id)
            return found
        return await self._do(body)

    async def release(self, node: str) -> int:
        """``node`` gives up every championship lease it holds (it drains: another node
        drives them from its next step); how many."""
        return await self._do(lambda tx: tx.write(
            "DELETE FROM championship_leases WHERE node = ?", (node,)))


# ---------------------------------------------------------------- the backends


class _SqliteTx:
    for_update = ""  # BEGIN IMMEDIATE holds the database's write lock

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def clock(self) -> float:
        return time.time()  # one node's database: its clock

    def notify(self, championship_id: str) -> None:
        return None  # one node: its driver was told by the caller

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return list(self._db.execute(sql, tuple(params)).fetchall())

    def write(self, sql: str, params: Sequence[Any] = ()) -> int:
        return self._db.execute(sql, tuple(params)).rowcount


class SqliteChampionshipStore(ChampionshipStore):
    """A single node's: WAL with ``synchronous=FULL`` (a committed call survives a kill -9
    and a power cut); ``:memory:`` keeps nothing past the process."""

    def __init__(self, path: Path | str) -> None:
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA busy_timeout=5000")
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            self._db.close()
            raise StoreUnusable(f"{path} has championships schema version {version}; this "
                                f"server knows up to {SCHEMA_VERSION}: run a newer Copas")
        self._db.executescript(SCHEMA)
        if version < 2:
            self._db.execute("BEGIN IMMEDIATE")
            for statement in SCHEMA_V2.split(";"):
                if statement.strip():
                    self._db.execute(statement)
            self._db.executemany("UPDATE championships SET start_at = ? WHERE championship_id = ?",
                                 _start_times(self._db.execute(
                                     "SELECT championship_id, spec FROM championships").fetchall()))
            self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            self._db.execute("COMMIT")
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _run(self, body: Callable[[Tx], T]) -> T:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                result = body(_SqliteTx(self._db))
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
            return result


class _PgTx:
    for_update = " FOR UPDATE"

    def __init__(self, db: Any) -> None:
        self._db = db

    def clock(self) -> float:
        return float(self._db.execute("SELECT extract(epoch from clock_timestamp())")
                     .fetchone()[0])

    def notify(self, championship_id: str) -> None:
        self._db.execute("SELECT pg_notify(%s, %s)", (CHANNEL, championship_id))

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return list(self._db.execute(sql.replace("?", "%s"), tuple(params)).fetchall())

    def write(self, sql: str, params: Sequence[Any] = ()) -> int:
        return int(self._db.execute(sql.replace("?", "%s"), tuple(params)).rowcount)


class PgChampionshipStore(ChampionshipStore):
    """The cluster's: the tables sit beside the others in its PostgreSQL database; each
    call one transaction (SERIALIZABLE is not needed: every check reads rows the write then
    changes under the championship's row lock, taken first)."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self._connection = PgConnection(dsn, SCHEMA, 7031981, "the championships'",
                                        _pg_migrate)

    def close(self) -> None:
        self._connection.close()

    def _run(self, body: Callable[[Tx], T]) -> T:
        return self._connection.run(lambda db: body(_PgTx(db)))


def _pg_migrate(db: Any) -> None:
    """The championships' schema to SCHEMA_VERSION (under the connection's advisory lock)."""
    db.execute("CREATE TABLE IF NOT EXISTS championships_meta (key text PRIMARY KEY, "
               "value text NOT NULL)")
    row = db.execute("SELECT value FROM championships_meta WHERE key = 'schema_version'"
                     ).fetchone()
    version = int(row[0]) if row is not None else 1
    if version > SCHEMA_VERSION:
        raise StoreUnusable(f"the database has championships schema version {version}; this "
                            f"server knows up to {SCHEMA_VERSION}: run a newer Copas")
    if version < 2:
        for statement in SCHEMA_V2.split(";"):
            if statement.strip():
                db.execute(statement)
        for start_at, championship_id in _start_times(db.execute(
                "SELECT championship_id, spec FROM championships").fetchall()):
            db.execute("UPDATE championships SET start_at = %s WHERE championship_id = %s",
                       (start_at, championship_id))
    db.execute("INSERT INTO championships_meta VALUES ('schema_version', %s) ON CONFLICT (key) "
               "DO UPDATE SET value = excluded.value", (str(SCHEMA_VERSION),))

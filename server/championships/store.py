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
PostgreSQL's ``championships_meta``): 3 since the tournament director's tools (issue 38); a
newer one is refused at start.
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

from server import games
from server.championships.format import GameResult, Scoring
from server.championships.model import (
    Announced,
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
SCHEMA_VERSION = 3
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
    championship_id TEXT PRIMARY KEY, node TEXT NOT NULL, expires DOUBLE PRECISION NOT NULL);
CREATE TABLE IF NOT EXISTS championship_pairings (
    championship_id TEXT NOT NULL, round_no INTEGER NOT NULL,
    announced DOUBLE PRECISION NOT NULL, starts DOUBLE PRECISION NOT NULL,
    tables TEXT NOT NULL, PRIMARY KEY (championship_id, round_no))
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


# Version 3: the tournament director's tools: a pause, each registration's first round (late
# entry), check-in, drop and disqualification, each round's time limit (and
# championship_pairings, in SCHEMA: the rounds announced before their tables are made).
SCHEMA_V3 = """
ALTER TABLE championships ADD COLUMN paused DOUBLE PRECISION;
ALTER TABLE championship_players ADD COLUMN first_round INTEGER NOT NULL DEFAULT 1;
ALTER TABLE championship_players ADD COLUMN checked_in DOUBLE PRECISION;
ALTER TABLE championship_players ADD COLUMN dropped INTEGER NOT NULL DEFAULT 0;
ALTER TABLE championship_players ADD COLUMN disqualified DOUBLE PRECISION;
ALTER TABLE championship_rounds ADD COLUMN time_limit DOUBLE PRECISION
"""


def _statements(script: str) -> list[str]:
    return [statement for statement in script.split(";") if statement.strip()]


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
        "fingerprint": spec.fingerprint, "scoring": spec.scoring.value,
        "buchholz": spec.buchholz, "final_table": spec.final_table,
        "registration_opens": spec.registration_opens,
        "registration_closes": spec.registration_closes,
        "late_entry_rounds": spec.late_entry_rounds, "check_in": spec.check_in,
        "drop_absent": spec.drop_absent, "round_time_limit": spec.round_time_limit,
        "pairing_notice": spec.pairing_notice, "game_name": spec.game_name},
        separators=(",", ":"))


def spec_from_json(championship_id: str, text: str) -> Spec:
    """A stored spec; the fields a row written before them lacks take Spec's defaults (what
    the championship was made with)."""
    d = json.loads(text)
    game_name = d.get("game_name", "")
    return Spec(championship_id, d["name"], d["preset"],
                games.get(game_name).rules_from_dict(d["game"]),
                d["rounds"], d["duplicate_deals"], d["max_players"], d["min_players"],
                d["start_at"], d["start_when_full"], d["round_pause"], d["seed"],
                d["creator"], d["created"], d["request_key"], d["fingerprint"],
                Scoring(d.get("scoring", Scoring.PLACES.value)), d.get("buchholz", False),
                d.get("final_table", 0), d.get("registration_opens"),
                d.get("registration_closes"), d.get("late_entry_rounds", 0),
                d.get("check_in", 0.0), d.get("drop_absent", False),
                d.get("round_time_limit", 0.0), d.get("pairing_notice", 0.0), game_name)


def result_to_json(result: GameResult, end_reason: str | None = None,
                   corrected: float | None = None, correction: str = "") -> str:
    """A counted game: the result, why its game ended, and an operator's correction."""
    data: dict[str, Any] = {
        "round": result.round_no, "table": result.table, "players": list(result.players),
        "totals": list(result.totals), "leavers": list(result.leavers),
        "no_shows": list(result.no_shows)}
    if result.game_name:  # absent: the default game (every result written before the option)
        data["game"] = result.game_name
    if end_reason is not None:
        data["end"] = str(end_reason)
    if corrected is not None:
        data |= {"corrected": corrected, "correction": correction}
    return json.dumps(data, separators=(",", ":"))


def result_from_json(text: str) -> GameResult:
    d = json.loads(text)
    return GameResult(d["round"], d["table"], tuple(d["players"]), tuple(d["totals"]),
                      tuple(d["leavers"]), tuple(d["no_shows"]), d.get("game", ""))


def counted_from_json(table_id: str, text: str, at: float) -> Counted:
    d = json.loads(text)
    return Counted(table_id, GameResult(d["round"], d["table"], tuple(d["players"]),
                                        tuple(d["totals"]), tuple(d["leavers"]),
                                        tuple(d["no_shows"]), d.get("game", "")), at,
                   d.get("end") or None, d.get("corrected"),
                   d.get("correction", ""))


# ---------------------------------------------------------------- the calls


ROWS_KEPT = 1 << 16  # rows read before and what they made: then forgotten all at once
_MADE: dict[tuple[Any, ...], Any] = {}


def _made(kind: str, row: tuple[Any, ...], make: Callable[..., T]) -> T:
    """``make(*row)``, or what it made for the same row before: a championship is read whole
    at every change, and its rows (players, tables, results: immutable values) mostly did
    not change."""
    key = (kind, *row)
    found = _MADE.get(key)
    if found is None:
        found = make(*row)
        if len(_MADE) >= ROWS_KEPT:
            _MADE.clear()
        _MADE[key] = found
    return found


def _registration(a: str, n: str, r: float, w: float | None, f: int, c: float | None, d: int,
                  q: float | None) -> Registration:
    return Registration(a, n, r, w, int(f), c, int(d), q)


def _seated(r: int, t: int, i: str, p: str, k: str) -> SeatedTable:
    return SeatedTable(r, t, i, tuple(json.loads(p)), tuple(json.loads(k)))


def _load(tx: Tx, championship_id: str) -> Championship | None:
    found = tx.rows("SELECT spec, phase, began, ended, version, paused FROM championships "
                    "WHERE championship_id = ?", (championship_id,))
    if not found:
        return None
    spec, phase, began, ended, version, paused = found[0]
    championship = Championship(spec_from_json(championship_id, spec), Phase(phase),
                                began, ended, version=int(version), paused=paused)
    championship.registrations = [
        _made("registration", tuple(row), _registration) for row in tx.rows(
            "SELECT account_id, display_name, registered, withdrawn, first_round, checked_in, "
            "dropped, disqualified FROM championship_players "
            "WHERE championship_id = ? ORDER BY registered, account_id", (championship_id,))]
    rounds = tx.rows("SELECT round_no, seated, time_limit FROM championship_rounds "
                     "WHERE championship_id = ?", (championship_id,))
    championship.rounds = {r: s for r, s, _ in rounds}
    championship.time_limits = {r: t for r, _, t in rounds if t is not None}
    championship.announced = {
        r: Announced(r, a, s, tuple(tuple(t) for t in json.loads(p)))
        for r, a, s, p in tx.rows(
            "SELECT round_no, announced, starts, tables FROM championship_pairings "
            "WHERE championship_id = ?", (championship_id,)) if r not in championship.rounds}
    championship.tables = [
        _made("table", tuple(row), _seated) for row in tx.rows(
            "SELECT round_no, table_no, table_id, players, tokens FROM championship_tables "
            "WHERE championship_id = ? ORDER BY round_no, table_no", (championship_id,))]
    championship.counted = [
        _made("counted", tuple(row), counted_from_json) for row in tx.rows(
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


def _paired(tx: Tx, championship_id: str) -> int:
    """The last round paired: announced or seated (0: none yet)."""
    found = tx.rows("SELECT max(round_no) FROM championship_rounds WHERE championship_id = ? "
                    "UNION ALL SELECT max(round_no) FROM championship_pairings WHERE "
                    "championship_id = ?", (championship_id, championship_id))
    return max((int(r) for (r,) in found if r is not None), default=0)


def _is_paused(tx: Tx, championship_id: str) -> bool:
    return tx.rows("SELECT paused FROM championships WHERE championship_id = ?",
                   (championship_id,))[0][0] is not None


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
        """The operators' not over first, then the others, newest first in each: however
        many championships accounts make (each address a few), an operator's stays on the
        first page."""
        def body(tx: Tx) -> list[Championship]:
            phases = [p.value for p in Phase if include_finished or not p.is_over]
            marks = ", ".join("?" * len(phases))
            ids = tx.rows(f"SELECT championship_id FROM championships WHERE phase IN ({marks}) "
                          "ORDER BY CASE WHEN creator = '' AND phase IN (?, ?) THEN 0 ELSE 1 "
                          "END, created DESC, championship_id LIMIT ? OFFSET ?",
                          (*phases, Phase.REGISTERING.value, Phase.RUNNING.value, limit,
                           offset))
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
                       max_players: int, late_entry_rounds: int = 0) -> int:
        """Registers, before the start or (late entry) after it while fewer than
        ``late_entry_rounds`` rounds are paired; the first round the player plays.

        :raises Refused: CHAMPIONSHIP_NOT_FOUND, REGISTRATION_CLOSED, ALREADY_REGISTERED,
            CHAMPIONSHIP_FULL.
        """
        def body(tx: Tx) -> int:
            phase = _phase(tx, championship_id)
            first = 1
            if phase is Phase.RUNNING and late_entry_rounds:
                paired = _paired(tx, championship_id)
                if paired >= late_entry_rounds:
                    raise Refused("REGISTRATION_CLOSED", f"late entry ended with round "
                                  f"{late_entry_rounds}'s pairing")
                first = paired + 1
            elif phase is not Phase.REGISTERING:
                raise Refused("REGISTRATION_CLOSED", "registration is over for this "
                              "championship")
            if tx.rows("SELECT 1 FROM championship_players WHERE championship_id = ? AND "
                       "account_id = ?", (championship_id, registration.account_id)):
                raise Refused("ALREADY_REGISTERED", "you are registered already")
            if _players(tx, championship_id) >= max_players:
                raise Refused("CHAMPIONSHIP_FULL", f"the championship has its {max_players} "
                              "players")
            tx.write("INSERT INTO championship_players (championship_id, account_id, "
                     "display_name, registered, withdrawn, first_round, checked_in) "
                     "VALUES (?, ?, ?, ?, NULL, ?, ?)",
                     (championship_id, registration.account_id, registration.display_name,
                      registration.registered, first, registration.checked_in))
            _changed(tx, championship_id)
            return first
        return await self._do(body)

    async def check_in(self, championship_id: str, account_id: str, at: float) -> bool:
        """The player says they are here; False when they had already (nothing changes).

        :raises Refused: CHAMPIONSHIP_NOT_FOUND, CHECK_IN_CLOSED (started or over),
            NOT_REGISTERED.
        """
        def body(tx: Tx) -> bool:
            if _phase(tx, championship_id) is not Phase.REGISTERING:
                raise Refused("CHECK_IN_CLOSED", "the championship has started: check-in is "
                              "over")
            found = tx.rows("SELECT checked_in FROM championship_players WHERE "
                            "championship_id = ? AND account_id = ?",
                            (championship_id, account_id))
            if not found:
                raise Refused("NOT_REGISTERED", "you are not registered")
            if found[0][0] is not None:
                return False
            tx.write("UPDATE championship_players SET checked_in = ? WHERE championship_id = ? "
                     "AND account_id = ?", (at, championship_id, account_id))
            _changed(tx, championship_id)
            return True
        return await self._do(body)

    async def close_check_in(self, championship_id: str) -> int:
        """At the start of a championship with check-in: the registrations not checked in
        go (as if unregistered); how many. Nothing while it is not registering."""
        def body(tx: Tx) -> int:
            if _phase(tx, championship_id) is not Phase.REGISTERING:
                return 0
            gone = tx.write("DELETE FROM championship_players WHERE championship_id = ? AND "
                            "checked_in IS NULL", (championship_id,))
            if gone:
                _changed(tx, championship_id)
            return gone
        return await self._do(body)

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

    async def announce(self, championship_id: str, round_no: int, at: float, starts: float,
                       tables: list[tuple[str, ...]]) -> bool:
        """Writes a round's pairings, its tables to be made at ``starts``; False when the
        round was announced or seated already, or the championship is not running or is
        paused: nothing is written then."""
        def body(tx: Tx) -> bool:
            if _phase(tx, championship_id) is not Phase.RUNNING or _is_paused(
                    tx, championship_id) or _paired(tx, championship_id) >= round_no:
                return False
            if not tx.write("INSERT INTO championship_pairings VALUES (?, ?, ?, ?, ?) "
                            "ON CONFLICT DO NOTHING",
                            (championship_id, round_no, at, starts,
                             json.dumps([list(t) for t in tables]))):
                return False
            _changed(tx, championship_id)
            return True
        return await self._do(body)

    async def swap(self, championship_id: str, round_no: int, a: str, b: str) -> None:
        """Swaps two accounts of an announced round's pairings (each takes the other's seat).

        :raises Refused: CHAMPIONSHIP_NOT_FOUND, CHAMPIONSHIP_NOT_RUNNING,
            ROUND_ALREADY_STARTED, ROUND_NOT_ANNOUNCED, PLAYER_NOT_IN_ROUND, INVALID_SWAP.
        """
        def body(tx: Tx) -> None:
            if _phase(tx, championship_id) is not Phase.RUNNING:
                raise Refused("CHAMPIONSHIP_NOT_RUNNING", "the championship is not running")
            if tx.rows("SELECT 1 FROM championship_rounds WHERE championship_id = ? AND "
                       "round_no = ?", (championship_id, round_no)):
                raise Refused("ROUND_ALREADY_STARTED", f"round {round_no}'s tables are made: "
                              "its pairing is final")
            found = tx.rows("SELECT tables FROM championship_pairings WHERE "
                            "championship_id = ? AND round_no = ?", (championship_id, round_no))
            if not found:
                raise Refused("ROUND_NOT_ANNOUNCED", f"no pairing of round {round_no} is "
                              "waiting for its tables")
            tables: list[list[str]] = json.loads(found[0][0])
            where = {p: (t, s) for t, table in enumerate(tables) for s, p in enumerate(table)}
            for player in (a, b):
                if player not in where:
                    raise Refused("PLAYER_NOT_IN_ROUND", f"{player} does not play round "
                                  f"{round_no}")
            (ta, sa), (tb, sb) = where[a], where[b]
            if ta == tb:
                raise Refused("INVALID_SWAP", "a swap is of two players at two different "
                              "tables")
            tables[ta][sa], tables[tb][sb] = b, a
            tx.write("UPDATE championship_pairings SET tables = ? WHERE championship_id = ? "
                     "AND round_no = ?", (json.dumps(tables), championship_id, round_no))
            _changed(tx, championship_id)
        await self._do(body)

    async def seat_round(self, championship_id: str, round_no: int, at: float,
                         tables: list[SeatedTable], time_limit: float | None = None) -> bool:
        """Writes a round's seating and its tables' ids at once (with ``time_limit``, when
        its games still running are ended); False when the round was seated already (by an
        earlier try or another node) or the championship is not running: nothing is written
        then."""
        def body(tx: Tx) -> bool:
            if _phase(tx, championship_id) is not Phase.RUNNING:
                return False
            if not tx.write("INSERT INTO championship_rounds (championship_id, round_no, "
                            "seated, time_limit) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                            (championship_id, round_no, at, time_limit)):
                return False
            for table in tables:
                tx.write("INSERT INTO championship_tables VALUES (?, ?, ?, ?, ?, ?)",
                         (championship_id, table.round_no, table.table_no, table.table_id,
                          json.dumps(list(table.players)),
                          json.dumps(list(table.sealed_tokens))))
            _changed(tx, championship_id)
            return True
        return await self._do(body)

    async def count(self, championship_id: str, counted: Counted, drop_from: int = 0) -> bool:
        """Counts one game (keyed by its table id) and, with ``drop_from``, drops its
        no-shows from that round on, at once; False when it was counted already, or the
        championship is not running (a cancelled one counts no more games)."""
        def body(tx: Tx) -> bool:
            if _phase(tx, championship_id) is not Phase.RUNNING:
                return False
            if not tx.write(
                    "INSERT INTO championship_results VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    (counted.table_id, championship_id,
                     result_to_json(counted.result, counted.end_reason), counted.counted)):
                return False
            if drop_from:
                for account_id in counted.result.no_shows:
                    tx.write("UPDATE championship_players SET dropped = ? WHERE "
                             "championship_id = ? AND account_id = ? AND dropped = 0",
                             (drop_from, championship_id, account_id))
            _changed(tx, championship_id)
            return True
        return await self._do(body)

    async def pause(self, championship_id: str, at: float, is_paused: bool) -> bool:
        """Pauses, or resumes: the current round's time limit and the announced rounds'
        start move on by the pause's length. False when it was so already.

        :raises Refused: CHAMPIONSHIP_NOT_FOUND, CHAMPIONSHIP_NOT_RUNNING.
        """
        def body(tx: Tx) -> bool:
            if _phase(tx, championship_id) is not Phase.RUNNING:
                raise Refused("CHAMPIONSHIP_NOT_RUNNING", "only a running championship is "
                              "paused or resumed")
            since = tx.rows("SELECT paused FROM championships WHERE championship_id = ?",
                            (championship_id,))[0][0]
            if (since is not None) == is_paused:
                return False
            if is_paused:
                tx.write("UPDATE championships SET paused = ? WHERE championship_id = ?",
                         (at, championship_id))
            else:
                length = max(0.0, at - float(since))
                tx.write("UPDATE championships SET paused = NULL WHERE championship_id = ?",
                         (championship_id,))
                tx.write("UPDATE championship_rounds SET time_limit = time_limit + ? WHERE "
                         "championship_id = ? AND time_limit IS NOT NULL", (length,
                                                                            championship_id))
                tx.write("UPDATE championship_pairings SET starts = starts + ? WHERE "
                         "championship_id = ?", (length, championship_id))
            _changed(tx, championship_id)
            return True
        return await self._do(body)

    async def correct(self, championship_id: str, counted: Counted, locked_from: int) -> None:
        """Sets a counted table's result (``counted``: its table id, the new result, when and
        why), while the championship runs or once it finished (the last round's results are
        corrected after it); a table of a round before ``locked_from`` (0: none) is locked
        once that round is announced or seated (the final: the results that chose its
        players).

        :raises Refused: CHAMPIONSHIP_NOT_FOUND, RESULT_LOCKED (cancelled, or locked),
            TABLE_NOT_COUNTED.
        """
        def body(tx: Tx) -> None:
            if _phase(tx, championship_id) is Phase.CANCELLED:
                raise Refused("RESULT_LOCKED", "the championship was cancelled: its "
                              "standings stay as they were")
            if locked_from and counted.result.round_no < locked_from \
                    and _paired(tx, championship_id) >= locked_from:
                raise Refused("RESULT_LOCKED", "the final is seated: the results that chose "
                              "its players are fixed")
            found = tx.rows("SELECT result FROM championship_results WHERE table_id = ? AND "
                            "championship_id = ?", (counted.table_id, championship_id))
            if not found:
                raise Refused("TABLE_NOT_COUNTED", "the table's game is not over and counted "
                              "yet: wait for it, or end it (CloseTable) first")
            was = counted_from_json(counted.table_id, found[0][0], counted.counted)
            tx.write("UPDATE championship_results SET result = ? WHERE table_id = ?",
                     (result_to_json(counted.result, was.end_reason, counted.corrected,
                                     counted.correction), counted.table_id))
            _changed(tx, championship_id)
        await self._do(body)

    async def disqualify(self, championship_id: str, account_id: str, at: float,
                         final_round: int = 0) -> None:
        """:raises Refused: CHAMPIONSHIP_NOT_FOUND, CHAMPIONSHIP_NOT_RUNNING, NOT_REGISTERED,
        ALREADY_DISQUALIFIED, RESULT_LOCKED (a finalist once the final, ``final_round``, is
        paired)."""
        def body(tx: Tx) -> None:
            if _phase(tx, championship_id) is not Phase.RUNNING:
                raise Refused("CHAMPIONSHIP_NOT_RUNNING", "only a running championship's "
                              "players are disqualified (before the start: remove them)")
            found = tx.rows("SELECT disqualified FROM championship_players WHERE "
                            "championship_id = ? AND account_id = ?",
                            (championship_id, account_id))
            if not found:
                raise Refused("NOT_REGISTERED", "that account is not registered")
            if found[0][0] is not None:
                raise Refused("ALREADY_DISQUALIFIED", "the player is disqualified already")
            if final_round and _paired(tx, championship_id) >= final_round:
                finalists = [p for (tables,) in tx.rows(
                    "SELECT tables FROM championship_pairings WHERE championship_id = ? AND "
                    "round_no = ?", (championship_id, final_round))
                    for t in json.loads(tables) for p in t] + [p for (players,) in tx.rows(
                    "SELECT players FROM championship_tables WHERE championship_id = ? AND "
                    "round_no = ?", (championship_id, final_round)) for p in json.loads(players)]
                if account_id in finalists:
                    raise Refused("RESULT_LOCKED", "the final is seated: remove the finalist "
                                  "instead (a leaver in the final)")
            tx.write("UPDATE championship_players SET disqualified = ? WHERE "
                     "championship_id = ? AND account_id = ?", (at, championship_id, account_id))
            _changed(tx, championship_id)
        await self._do(body)

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
        if version < SCHEMA_VERSION:
            self._db.execute("BEGIN IMMEDIATE")
            if version < 2:
                for statement in _statements(SCHEMA_V2):
                    self._db.execute(statement)
                self._db.executemany(
                    "UPDATE championships SET start_at = ? WHERE championship_id = ?",
                    _start_times(self._db.execute(
                        "SELECT championship_id, spec FROM championships").fetchall()))
            for statement in _statements(SCHEMA_V3):
                self._db.execute(statement)
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
        for statement in _statements(SCHEMA_V2):
            db.execute(statement)
        for start_at, championship_id in _start_times(db.execute(
                "SELECT championship_id, spec FROM championships").fetchall()):
            db.execute("UPDATE championships SET start_at = %s WHERE championship_id = %s",
                       (start_at, championship_id))
    if version < 3:
        for statement in _statements(SCHEMA_V3):
            db.execute(statement)
    db.execute("INSERT INTO championships_meta VALUES ('schema_version', %s) ON CONFLICT (key) "
               "DO UPDATE SET value = excluded.value", (str(SCHEMA_VERSION),))

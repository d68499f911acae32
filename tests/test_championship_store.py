"""The championships' store, one contract for SQLite and PostgreSQL: each refusal writes
nothing; a round is seated once (with its tables), a game counted once; what a call wrote
survives reopening."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from engine import GameEndReason, Rules
from server.championships.format import GameResult
from server.championships.model import Counted, Phase, Registration, SeatedTable, Spec
from server.championships.store import (
    PgChampionshipStore,
    Refused,
    SqliteChampionshipStore,
)
from tests.helpers.servers import fresh_database


def spec(cid: str = "c_1", *, creator: str = "a_owner", request_key: str = "",
         fingerprint: str = "", max_players: int = 5) -> Spec:
    return Spec(cid, "Cup", "online", Rules.preset("online"), 2, False, max_players, 3, None,
                False, 0.0, "seed", creator, 1.0, request_key, fingerprint)


class Opened:
    def __init__(self, kind: str, tmp: Path, request: pytest.FixtureRequest) -> None:
        self.kind = kind
        self.request = request
        self.path = tmp / "championships.sqlite3"
        self.dsn = (fresh_database(request.getfixturevalue("postgres").dsn)
                    if kind == "postgresql" else "")
        self.store: Any = self.open()

    def open(self) -> Any:
        return SqliteChampionshipStore(self.path) if self.kind == "sqlite" \
            else PgChampionshipStore(self.dsn)

    def reopen(self) -> Any:
        self.store.close()
        self.store = self.open()
        return self.store


@pytest.fixture(params=["sqlite", "postgresql"])
async def opened(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opened]:
    made = Opened(request.param, tmp_path, request)
    yield made
    made.store.close()


async def refused(reason: str, call: Any) -> None:
    with pytest.raises(Refused) as caught:
        await call
    assert caught.value.reason == reason


async def test_registrations_and_their_refusals(opened: Opened) -> None:
    store = opened.store
    assert await store.create(spec()) == "c_1"
    for n in range(5):
        await store.register("c_1", Registration(f"a_{n}", f"P{n}", 10.0 + n), 5)
    await refused("ALREADY_REGISTERED", store.register("c_1", Registration("a_0", "P0", 20.0), 5))
    await refused("CHAMPIONSHIP_FULL", store.register("c_1", Registration("a_9", "P9", 20.0), 5))
    await refused("CHAMPIONSHIP_NOT_FOUND",
                  store.register("c_x", Registration("a_9", "P9", 20.0), 5))
    await refused("NOT_REGISTERED", store.unregister("c_1", "a_9"))
    await refused("CHAMPIONSHIP_NOT_RUNNING", store.withdraw("c_1", "a_0", 30.0))
    await store.unregister("c_1", "a_4")
    await store.start("c_1", 40.0, 3)
    await refused("REGISTRATION_CLOSED", store.register("c_1", Registration("a_8", "P8", 41.0), 5))
    await refused("REGISTRATION_CLOSED", store.unregister("c_1", "a_0"))
    await refused("CHAMPIONSHIP_NOT_RUNNING", store.start("c_1", 41.0, 3))
    await store.withdraw("c_1", "a_3", 42.0)
    await refused("ALREADY_WITHDRAWN", store.withdraw("c_1", "a_3", 43.0))
    loaded = await opened.reopen().load("c_1")
    assert loaded.phase is Phase.RUNNING and loaded.began == 40.0
    assert [(r.account_id, r.withdrawn) for r in loaded.registrations] == [
        ("a_0", None), ("a_1", None), ("a_2", None), ("a_3", 42.0)]
    assert loaded.spec == spec()


async def test_a_start_needs_three_players_and_quotas_and_request_ids(opened: Opened) -> None:
    store = opened.store
    await store.create(spec(request_key="k", fingerprint="f"), quota=1)
    assert await store.create(spec("c_2", request_key="k", fingerprint="f"), quota=1) == "c_1"
    await refused("REQUEST_ID_REUSED", store.create(spec("c_3", request_key="k",
                                                         fingerprint="g")))
    await refused("TOO_MANY_CHAMPIONSHIPS", store.create(spec("c_4"), quota=1))
    assert await store.create(spec("c_5", creator=""), quota=None) == "c_5"
    for n in range(2):
        await store.register("c_1", Registration(f"a_{n}", f"P{n}", 10.0 + n), 5)
    await refused("NOT_ENOUGH_PLAYERS", store.start("c_1", 40.0, 3))
    assert (await store.load("c_1")).phase is Phase.REGISTERING
    assert await store.active() == ["c_1", "c_5"]
    assert await store.end("c_1", Phase.CANCELLED, 50.0)
    assert not await store.end("c_1", Phase.FINISHED, 51.0)
    assert await store.create(spec("c_6"), quota=1) == "c_6"  # c_1 is over: room again
    assert {c.id for c in await store.page(10, 0, include_finished=False)} == {"c_5", "c_6"}
    assert len(await store.page(10, 0, include_finished=True)) == 3


async def test_a_page_lists_the_operators_championships_not_over_first(opened: Opened
                                                                      ) -> None:
    """Then the others, newest first: accounts' championships, however many, never push an
    operator's off the first page (16 addresses' 48 did, newest first: bench/hostile.py)."""
    store = opened.store

    def made(cid: str, creator: str, created: float) -> Spec:
        return dataclasses.replace(spec(cid, creator=creator), created=created)

    await store.create(made("c_old", "", 0.5))
    await store.create(made("c_op", "", 1.0))
    for n in range(5):
        await store.create(made(f"c_{n}", f"a_{n}", 2.0 + n), quota=1)
    assert await store.end("c_old", Phase.CANCELLED, 3.0)
    assert [c.id for c in await store.page(3, 0, include_finished=False)] == [
        "c_op", "c_4", "c_3"]
    assert [c.id for c in await store.page(10, 3, include_finished=False)] == [
        "c_2", "c_1", "c_0"]
    assert [c.id for c in await store.page(10, 0, include_finished=True)] == [
        "c_op", "c_4", "c_3", "c_2", "c_1", "c_0", "c_old"]  # over: by its age


async def test_a_round_is_seated_once_and_a_game_counted_once(opened: Opened) -> None:
    store = opened.store
    await store.create(spec())
    for n in range(4):
        await store.register("c_1", Registration(f"a_{n}", f"P{n}", 10.0 + n), 5)
    tables = [SeatedTable(1, 1, "t_1", ("a_0", "a_1", "a_2", "a_3"))]
    assert not await store.seat_round("c_1", 1, 20.0, tables)  # not running yet
    await store.start("c_1", 30.0, 3)
    assert await store.seat_round("c_1", 1, 31.0, tables)
    assert not await store.seat_round("c_1", 1, 32.0, [SeatedTable(1, 1, "t_2", ("a_0",))])
    result = GameResult(1, 1, ("a_0", "a_1", "a_2", "a_3"), (10, 20, 30, 44), ("a_3",))
    assert await store.count("c_1", Counted("t_1", result, 40.0))
    assert not await store.count("c_1", Counted("t_1", result, 41.0))
    loaded = await opened.reopen().load("c_1")
    assert loaded.tables == tables and loaded.rounds == {1: 31.0}
    assert [c.result for c in loaded.counted] == [result]
    assert loaded.is_round_over(1)
    store = opened.store
    assert await store.end("c_1", Phase.CANCELLED, 50.0)
    later = GameResult(2, 1, ("a_0", "a_1", "a_2", "a_3"), (1, 2, 3, 4))
    assert not await store.count("c_1", Counted("t_9", later, 51.0))  # cancelled: no more


async def test_one_node_holds_a_championships_lease_until_it_runs_out(opened: Opened) -> None:
    store = opened.store
    assert await store.claim("c_1", "node-a", 10.0, 100.0)
    assert not await store.claim("c_1", "node-b", 10.0, 105.0)
    assert await store.claim("c_1", "node-a", 10.0, 108.0)  # renewed: until 118
    assert not await store.claim("c_1", "node-b", 10.0, 117.0)
    assert await store.claim("c_1", "node-b", 10.0, 118.5)  # ran out: taken over
    assert not await store.claim("c_1", "node-a", 10.0, 119.0)
    assert await store.claim("c_2", "node-a", 10.0, 119.0)  # one lease per championship


# ---------------------------------------------------------------- the director's tools


def registration(n: int, at: float = 10.0, checked_in: float | None = None) -> Registration:
    return Registration(f"a_{n}", f"P{n}", at + n, checked_in=checked_in)


async def test_a_spec_keeps_the_directors_options_and_an_older_row_reads_as_made(
        opened: Opened) -> None:
    from server.championships.format import Scoring
    from server.championships.store import spec_from_json, spec_to_json

    full = dataclasses.replace(
        spec(), duplicate_deals=True, scoring=Scoring.MATCHPOINTS, buchholz=True,
        final_table=4, registration_opens=5.0, registration_closes=9.0, late_entry_rounds=2,
        check_in=60.0, drop_absent=True, round_time_limit=600.0, pairing_notice=30.0)
    await opened.store.create(full)
    assert (await opened.reopen().load("c_1")).spec == full
    assert full.rules.scoring is Scoring.MATCHPOINTS and full.rules.final_table == 4
    older = json.loads(spec_to_json(spec()))
    for name in ("scoring", "buchholz", "final_table", "registration_opens",
                 "registration_closes", "late_entry_rounds", "check_in", "drop_absent",
                 "round_time_limit", "pairing_notice"):
        del older[name]
    # A championship made before the options goes on as it was made: no drop of no-shows.
    assert spec_from_json("c_1", json.dumps(older)) == spec()
    assert spec().drop_absent is False


async def test_late_entry_until_round_n_is_paired(opened: Opened) -> None:
    store = opened.store
    await store.create(dataclasses.replace(spec(max_players=9), late_entry_rounds=2))
    for n in range(3):
        assert await store.register("c_1", registration(n), 9, 2) == 1
    await store.start("c_1", 20.0, 3)
    assert await store.register("c_1", registration(3), 9, 2) == 1  # round 1 not paired yet
    await store.seat_round("c_1", 1, 21.0, [SeatedTable(1, 1, "t_1", ("a_0", "a_1", "a_2",
                                                                       "a_3"))])
    assert await store.register("c_1", registration(4), 9, 2) == 2  # joins from round 2
    assert await store.announce("c_1", 2, 30.0, 40.0, [("a_0", "a_1", "a_2", "a_3", "a_4")])
    await refused("REGISTRATION_CLOSED", store.register("c_1", registration(5), 9, 2))
    await refused("REGISTRATION_CLOSED", store.register("c_1", registration(5), 9, 0))
    loaded = await opened.reopen().load("c_1")
    assert [(r.account_id, r.first_round) for r in loaded.registrations] == [
        ("a_0", 1), ("a_1", 1), ("a_2", 1), ("a_3", 1), ("a_4", 2)]
    assert loaded.plays(1) == ["a_0", "a_1", "a_2", "a_3"]
    assert loaded.plays(2) == ["a_0", "a_1", "a_2", "a_3", "a_4"]


async def test_check_in_and_its_close_at_the_start(opened: Opened) -> None:
    store = opened.store
    await store.create(spec(max_players=9))
    for n in range(4):
        await store.register("c_1", registration(n), 9)
    await store.register("c_1", registration(4, checked_in=15.0), 9)  # in the window
    assert await store.check_in("c_1", "a_0", 30.0)
    assert not await store.check_in("c_1", "a_0", 31.0)  # once: nothing changes
    assert await store.check_in("c_1", "a_2", 32.0)
    await refused("NOT_REGISTERED", store.check_in("c_1", "a_9", 33.0))
    assert await store.close_check_in("c_1") == 2  # a_1 and a_3 never checked in
    assert await store.close_check_in("c_1") == 0
    await store.start("c_1", 40.0, 3)
    await refused("CHECK_IN_CLOSED", store.check_in("c_1", "a_0", 41.0))
    assert await store.close_check_in("c_1") == 0  # started: nothing goes
    loaded = await opened.reopen().load("c_1")
    assert [(r.account_id, r.checked_in) for r in loaded.registrations] == [
        ("a_0", 30.0), ("a_2", 32.0), ("a_4", 15.0)]


async def test_pairings_announced_swapped_then_seated_with_a_time_limit(opened: Opened) -> None:
    store = opened.store
    await store.create(spec(max_players=9))
    for n in range(8):
        await store.register("c_1", registration(n), 9)
    pairing = [("a_0", "a_1", "a_2", "a_3"), ("a_4", "a_5", "a_6", "a_7")]
    assert not await store.announce("c_1", 1, 20.0, 30.0, pairing)  # not running
    await store.start("c_1", 20.0, 3)
    await refused("ROUND_NOT_ANNOUNCED", store.swap("c_1", 1, "a_0", "a_4"))
    assert await store.announce("c_1", 1, 21.0, 31.0, pairing)
    assert not await store.announce("c_1", 1, 22.0, 32.0, pairing)  # once
    await refused("PLAYER_NOT_IN_ROUND", store.swap("c_1", 1, "a_0", "a_9"))
    await refused("INVALID_SWAP", store.swap("c_1", 1, "a_0", "a_3"))
    await refused("INVALID_SWAP", store.swap("c_1", 1, "a_0", "a_0"))
    await store.swap("c_1", 1, "a_1", "a_6")
    loaded = await opened.reopen().load("c_1")
    assert loaded.announced[1].tables == (("a_0", "a_6", "a_2", "a_3"),
                                          ("a_4", "a_5", "a_1", "a_7"))
    assert (loaded.announced[1].announced, loaded.announced[1].starts) == (21.0, 31.0)
    assert loaded.current_round == 1 and loaded.seated_round == 0
    store = opened.store
    tables = [SeatedTable(1, t + 1, f"t_{t}", players)
              for t, players in enumerate(loaded.announced[1].tables)]
    assert await store.seat_round("c_1", 1, 31.0, tables, time_limit=91.0)
    await refused("ROUND_ALREADY_STARTED", store.swap("c_1", 1, "a_1", "a_6"))
    loaded = await opened.reopen().load("c_1")
    assert not loaded.announced and loaded.rounds == {1: 31.0}
    assert loaded.time_limits == {1: 91.0}


async def test_a_pause_moves_the_time_limit_and_the_announced_start_on(opened: Opened) -> None:
    store = opened.store
    await store.create(spec(max_players=9))
    for n in range(4):
        await store.register("c_1", registration(n), 9)
    await refused("CHAMPIONSHIP_NOT_RUNNING", store.pause("c_1", 15.0, True))
    await store.start("c_1", 20.0, 3)
    tables = [SeatedTable(1, 1, "t_1", ("a_0", "a_1", "a_2", "a_3"))]
    assert await store.seat_round("c_1", 1, 21.0, tables, time_limit=81.0)
    assert await store.announce("c_1", 2, 22.0, 100.0, [("a_0", "a_1", "a_2", "a_3")])
    assert await store.pause("c_1", 30.0, True)
    assert not await store.pause("c_1", 31.0, True)  # paused already: nothing changes
    assert not await store.announce("c_1", 3, 32.0, 40.0, [("a_0", "a_1", "a_2", "a_3")])
    assert (await store.load("c_1")).paused == 30.0
    assert await store.pause("c_1", 40.0, False)
    assert not await store.pause("c_1", 41.0, False)
    loaded = await opened.reopen().load("c_1")
    assert loaded.paused is None
    assert loaded.time_limits == {1: 91.0} and loaded.announced[2].starts == 110.0


async def test_a_no_show_is_dropped_with_the_count_and_a_result_corrected(
        opened: Opened) -> None:
    store = opened.store
    await store.create(dataclasses.replace(spec(max_players=9), final_table=3))
    for n in range(4):
        await store.register("c_1", registration(n), 9)
    await store.start("c_1", 20.0, 3)
    players = ("a_0", "a_1", "a_2", "a_3")
    await store.seat_round("c_1", 1, 21.0, [SeatedTable(1, 1, "t_1", players)])
    result = GameResult(1, 1, players, (10, 20, 30, 0), no_shows=("a_3",))
    assert await store.count("c_1", Counted("t_1", result, 30.0, GameEndReason.TIME_LIMIT),
                             drop_from=2)
    fixed = GameResult(1, 1, players, (30, 20, 10, 0), leavers=("a_3",))
    await refused("TABLE_NOT_COUNTED",
                  store.correct("c_1", Counted("t_9", fixed, 31.0, None, 31.0, "typo"), 3))
    await store.correct("c_1", Counted("t_1", fixed, 31.0, None, 31.0, "typo"), 3)
    loaded = await opened.reopen().load("c_1")
    assert [r.dropped for r in loaded.registrations] == [0, 0, 0, 2]
    assert loaded.plays(2) == ["a_0", "a_1", "a_2"]
    (counted,) = loaded.counted
    assert counted.result == fixed and counted.counted == 30.0
    assert (counted.end_reason, counted.corrected, counted.correction) == (
        GameEndReason.TIME_LIMIT, 31.0, "typo")
    store = opened.store
    # Once the final (round 3 here) is paired, the results that chose its players are fixed.
    assert await store.announce("c_1", 3, 40.0, 50.0, [("a_0", "a_1", "a_2")])
    await refused("RESULT_LOCKED",
                  store.correct("c_1", Counted("t_1", result, 41.0, None, 41.0, "x"), 3))
    await refused("RESULT_LOCKED", store.disqualify("c_1", "a_1", 42.0, final_round=3))
    await store.disqualify("c_1", "a_3", 43.0, final_round=3)  # not a finalist
    await refused("ALREADY_DISQUALIFIED", store.disqualify("c_1", "a_3", 44.0, final_round=3))
    await refused("NOT_REGISTERED", store.disqualify("c_1", "a_9", 44.0))
    assert (await store.load("c_1")).registrations[3].disqualified == 43.0
    await store.end("c_1", Phase.FINISHED, 60.0)
    # Finished: its results are still corrected (the last round's come after its end).
    await store.correct("c_1", Counted("t_1", result, 61.0, None, 61.0, "x"), 0)
    await refused("CHAMPIONSHIP_NOT_RUNNING", store.disqualify("c_1", "a_0", 62.0))
    await store.create(spec("c_2"))
    await store.end("c_2", Phase.CANCELLED, 63.0)
    await refused("RESULT_LOCKED",
                  store.correct("c_2", Counted("t_1", result, 64.0, None, 64.0, "x"), 0))


async def test_a_version_2_database_is_migrated_to_3_keeping_its_championships(
        opened: Opened) -> None:
    """A database the previous schema (2) wrote: the new columns take the values of what it
    was (first round 1, nobody checked in, dropped or disqualified, no pause)."""
    from server.championships.store import SCHEMA, SCHEMA_V2, spec_to_json

    opened.store.close()
    if opened.kind == "sqlite":
        opened.path.unlink()
        for extra in ("-wal", "-shm"):
            Path(f"{opened.path}{extra}").unlink(missing_ok=True)
        db: Any = sqlite3.connect(opened.path, isolation_level=None)
        db.executescript(SCHEMA)
        db.executescript(SCHEMA_V2)
        db.execute("PRAGMA user_version = 2")
        mark = "?"
    else:
        opened.dsn = fresh_database(opened.request.getfixturevalue("postgres").dsn)
        import psycopg

        db = psycopg.connect(opened.dsn, autocommit=True)
        for statement in (SCHEMA + ";" + SCHEMA_V2).split(";"):
            if statement.strip() and "championship_pairings" not in statement:
                db.execute(statement)
        db.execute("CREATE TABLE championships_meta (key text PRIMARY KEY, value text)")
        db.execute("INSERT INTO championships_meta VALUES ('schema_version', '2')")
        mark = "%s"
    db.execute("INSERT INTO championships (championship_id, spec, phase, began, ended, "
               "created, creator, request_key, version) VALUES "
               f"({mark}, {mark}, 'running', 20.0, NULL, 1.0, '', '', 3)",
               ("c_1", spec_to_json(spec())))
    db.execute("INSERT INTO championship_players (championship_id, account_id, display_name, "
               f"registered, withdrawn) VALUES ({mark}, 'a_0', 'P0', 10.0, NULL)", ("c_1",))
    db.execute("INSERT INTO championship_rounds (championship_id, round_no, seated) VALUES "
               f"({mark}, 1, 21.0)", ("c_1",))
    db.close()
    loaded = await opened.reopen().load("c_1")
    assert loaded.spec == spec() and loaded.paused is None and loaded.rounds == {1: 21.0}
    assert loaded.registrations == [Registration("a_0", "P0", 10.0)]
    assert not loaded.time_limits and not loaded.announced

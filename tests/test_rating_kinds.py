"""Ratings per kind of game (the game, its player count, partners or not): a game moves only
the ratings of its own kind, each kind has its own leaderboard, history lines say their kind;
and the accounts' schema 3 carries the previous release's data forward (tests/fixtures/
release-1c5f50a/: every rating and history line becomes the default game's, Hearts's), and a
server that knows only schema 2 refuses it, leaving it as it was."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from server.accounts import sqlite as account_sqlite
from server.accounts.model import (
    Account,
    FinishedGame,
    Identity,
    Method,
    Placed,
)
from server.accounts.postgres import PgAccountStore
from server.accounts.ratings import (
    DEFAULT_KIND,
    PROVISIONAL_GAMES,
    Contender,
    Rating,
    Update,
    rate_game,
    rating_kind,
)
from server.accounts.sqlite import SqliteAccountStore
from server.games import DEFAULT_GAME
from server.store.base import StoreUnusable
from tests.helpers.account_stores import Opened
from tests.helpers.servers import ROOT, fresh_database
from tools.pglocal import tool

RELEASE = ROOT / "tests" / "fixtures" / "release-1c5f50a"
FACTS = json.loads((RELEASE / "facts.json").read_text())
TEAMS = rating_kind("bisca", has_partnerships=True)  # a kind no game of this server plays yet


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
async def opened(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opened]:
    made = Opened(request.param, tmp_path, request)
    yield made
    made.close()


def game(n: int, kind: str, ids: list[str]) -> FinishedGame:
    """A rated game of ``kind`` among ``ids``, the first of them winning."""
    return FinishedGame(f"r_{kind}_{n}", "T", 5000.0 + n, len(ids),
                        tuple(Placed(a, place + 1, 10 * place, place)
                              for place, a in enumerate(ids)), True, kind)


def winner_first(before: list[Rating]) -> list[Update]:
    return rate_game([Contender(seat, seat + 1, True, "", rating, False)
                      for seat, rating in enumerate(before)])


async def test_a_game_moves_only_the_ratings_of_its_kind(opened: Opened) -> None:
    store = opened.store
    ids = [f"a_{n:05d}" for n in range(4)]
    for n, account_id in enumerate(ids):
        await store.create(Account(account_id, f"Person {n}", 1000.0 + n),
                           Identity(Method.DEVICE, f"dev-{n}", account_id))
    for n in range(PROVISIONAL_GAMES):  # established in the partnership kind of 4
        assert await store.record_game(game(n, TEAMS, ids), winner_first)
    assert await store.record_game(game(99, DEFAULT_KIND, ids), winner_first)  # one of Hearts
    store = opened.reopen()
    assert {p: r.games for p, r in (await store.ratings(ids[0], TEAMS)).items()} == {
        4: PROVISIONAL_GAMES}
    assert {p: r.games for p, r in (await store.ratings(ids[0])).items()} == {4: 1}
    assert await store.ratings(ids[0], rating_kind("bisca")) == {}  # each for itself: another
    assert await store.leaderboard(4, 0, 10) == []  # Hearts's board: nobody established
    board = await store.leaderboard(4, 0, 10, TEAMS)
    assert [line.account_id for line in board] == ids and board[0].place == 1
    assert await store.place_of(ids[0], 4, TEAMS) == 1
    assert await store.place_of(ids[0], 4) is None
    lines = await store.games_of(ids[0], 20, None)
    assert [line.kind for line in lines][:2] == [DEFAULT_KIND, TEAMS]


def test_a_kind_is_the_game_and_whether_partners_share_a_result() -> None:
    assert rating_kind(DEFAULT_GAME) == DEFAULT_KIND == "hearts"
    assert rating_kind("bisca", has_partnerships=True) != rating_kind("bisca")


def fixture_ratings() -> dict[str, list[tuple[int, int, int]]]:
    return {a["account_id"]: [(r["players"], r["games"], r["wins"]) for r in a["ratings"]]
            for a in FACTS["sqlite"]["accounts"]}


async def test_the_previous_releases_sqlite_accounts_become_hearts_ratings(
        tmp_path: Path) -> None:
    path = tmp_path / "accounts.sqlite3"
    shutil.copy(RELEASE / "sqlite" / "accounts.sqlite3", path)
    store = SqliteAccountStore(path)
    try:
        for account_id, ratings in fixture_ratings().items():
            found = await store.ratings(account_id)
            assert sorted((p, r.games, r.wins) for p, r in found.items()) == sorted(ratings)
            assert await store.ratings(account_id, TEAMS) == {}
            assert {line.kind for line in await store.games_of(account_id, 50, None)} \
                <= {DEFAULT_KIND}
    finally:
        store.close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == account_sqlite.SCHEMA_VERSION == 4
    assert {k for (k,) in db.execute("SELECT DISTINCT kind FROM ratings")} == {DEFAULT_KIND}
    assert db.execute("SELECT count(*) FROM ratings").fetchone()[0] == sum(
        len(r) for r in fixture_ratings().values())
    db.close()


def test_a_server_that_knows_schema_2_refuses_schema_3_and_changes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "accounts.sqlite3"
    shutil.copy(RELEASE / "sqlite" / "accounts.sqlite3", path)
    SqliteAccountStore(path).close()  # migrated to 4 (the histogram of issue 37 is 4)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    monkeypatch.setattr(account_sqlite, "SCHEMA_VERSION", 2)
    with pytest.raises(StoreUnusable, match="schema version 4"):
        SqliteAccountStore(path)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


async def test_the_previous_releases_postgresql_accounts_become_hearts_ratings(
        postgres: Any) -> None:
    dsn = fresh_database(postgres.dsn)
    subprocess.run([tool("psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", dsn, "-f",
                    str(RELEASE / "postgres.sql")], check=True, capture_output=True, text=True,
                   timeout=60)
    store = PgAccountStore(dsn)
    try:
        facts = {a["account_id"]: [(r["players"], r["games"], r["wins"]) for r in a["ratings"]]
                 for a in FACTS["postgres"]["accounts"]}
        for account_id, ratings in facts.items():
            found = await store.ratings(account_id)
            assert sorted((p, r.games, r.wins) for p, r in found.items()) == sorted(ratings)
            assert {line.kind for line in await store.games_of(account_id, 50, None)} \
                <= {DEFAULT_KIND}
    finally:
        store.close()
    import psycopg

    with psycopg.connect(dsn) as db:
        assert db.execute("SELECT value FROM accounts_meta WHERE key = 'schema_version'"
                          ).fetchone() == ("4",)
        assert {k for (k,) in db.execute("SELECT DISTINCT kind FROM ratings")} <= {DEFAULT_KIND}

"""The accounts' store contract, the same checks against memory, SQLite and PostgreSQL:
accounts and their identities, sessions that rotate (the old refresh token remembered, a bounded
number of them), revocation, ratings rated exactly once per game, the leaderboard's order and
a place on it; and for the durable ones, all of it still there after a reopen."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from server.accounts.model import (
    SESSIONS_KEPT,
    USED_REFRESH_KEPT,
    Account,
    AccountStore,
    FinishedGame,
    Identity,
    IdentityTaken,
    Method,
    NameTaken,
    Placed,
    Session,
)
from server.accounts.postgres import PgAccountStore
from server.accounts.ratings import Rating, Update, rate
from server.accounts.sqlite import SCHEMA_V1, SqliteAccountStore
from server.store.base import StoreUnusable
from tests.helpers.account_stores import Opened

KINDS = ["memory", "sqlite", "postgresql"]


@pytest.fixture(params=KINDS)
async def opened(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opened]:
    made = Opened(request.param, tmp_path, request)
    yield made
    made.close()


@pytest.fixture(params=["sqlite", "postgresql"])
async def durable(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opened]:
    made = Opened(request.param, tmp_path, request)
    yield made
    made.close()


def account(n: int) -> Account:
    return Account(f"a_{n:05d}", f"Person {n}", 1000.0 + n)


def session(family: str, account_id: str, generation: int = 0) -> Session:
    return Session(family, account_id, f"acc-{family}-{generation}", 2000.0,
                   f"ref-{family}-{generation}", 9000.0, generation)


async def test_accounts_and_identities_come_back_and_an_identity_is_one_accounts(
        opened: Opened) -> None:
    store: AccountStore = opened.store
    ana, bia = account(1), account(2)
    await store.create(ana, Identity(Method.DEVICE, "dev-1", ana.id))
    await store.create(bia, Identity(Method.PASSWORD, "bia", bia.id, "$argon2id$hash"))
    with pytest.raises(IdentityTaken):
        await store.create(account(3), Identity(Method.DEVICE, "dev-1", "a_00003"))
    with pytest.raises(IdentityTaken):
        await store.link(Identity(Method.PASSWORD, "bia", ana.id, "other"))
    await store.link(Identity(Method.OIDC, "https://id.test\nsub-1", ana.id))
    store = opened.reopen()
    assert await store.account(ana.id) == ana
    assert await store.account("a_00003") is None
    assert await store.identity(Method.PASSWORD, "bia") == Identity(
        Method.PASSWORD, "bia", bia.id, "$argon2id$hash")
    assert [i.method for i in await store.identities(ana.id)] == [Method.DEVICE, Method.OIDC]
    await store.unlink(Method.OIDC, "https://id.test\nsub-1")
    await store.save_account(Account(ana.id, "Ana", ana.created, is_banned=True))
    store = opened.reopen()
    assert [i.method for i in await store.identities(ana.id)] == [Method.DEVICE]
    assert await store.account(ana.id) == Account(ana.id, "Ana", ana.created, is_banned=True)
    assert len(store) == 2


async def test_sessions_rotate_remember_old_refresh_tokens_and_end(opened: Opened) -> None:
    store: AccountStore = opened.store
    ana = account(1)
    await store.create(ana, Identity(Method.DEVICE, "dev-1", ana.id))
    first = session("f1", ana.id)
    await store.start_session(first)
    await store.start_session(session("f2", ana.id))
    current = first
    for generation in range(1, USED_REFRESH_KEPT + 3):
        new = session("f1", ana.id, generation)
        assert await store.rotate(current, new)
        assert not await store.rotate(current, session("f1", ana.id, 99))  # spent already
        current = new
    store = opened.reopen()
    assert await store.session_by_access(current.access_digest) == current
    assert await store.session_by_access(first.access_digest) is None
    assert await store.session_and_account(current.access_digest) == (current, ana)
    assert await store.session_and_account(first.access_digest) == (None, None)
    assert await store.session_by_refresh(current.refresh_digest) == (current, True)
    recent = session("f1", ana.id, USED_REFRESH_KEPT).refresh_digest
    assert await store.session_by_refresh(recent) == (current, False)  # a reuse
    assert await store.session_by_refresh(first.refresh_digest) == (None, False)  # forgotten
    await store.end_family("f1")
    assert await store.session_by_refresh(recent) == (None, False)
    assert await store.session_by_access(current.access_digest) is None
    assert await store.end_sessions(ana.id) == 1
    store = opened.reopen()
    assert await store.session_by_access("acc-f2-0") is None


def game(record_id: str, places: dict[str, int], *, players: int = 4, is_rated: bool = True,
         finished: float = 5000.0) -> FinishedGame:
    return FinishedGame(record_id, f"table {record_id}", finished, players,
                        tuple(Placed(a, p, 10 * p, seat) for seat, (a, p)
                              in enumerate(places.items())), is_rated)


def rated(places: dict[str, int], *, step: int = 10) -> Any:
    """A ``compute`` rating everyone against everyone by ``places``, each game counting
    ``step`` rated games (10: a single game makes a rating established, on the board)."""
    def compute(before: list[Rating]) -> list[Update]:
        after = rate(before, list(places.values()))
        return [Update(n, b, Rating(a.mu, a.sigma, b.games + step, a.wins),
                       tuple(k for k in range(len(before)) if k != n))
                for n, (b, a) in enumerate(zip(before, after, strict=True))]
    return compute


async def test_a_game_is_recorded_once_and_the_leaderboard_orders_by_rating(
        opened: Opened) -> None:
    store: AccountStore = opened.store
    people = [account(n) for n in range(6)]
    for person in people:
        await store.create(person, Identity(Method.DEVICE, f"dev-{person.id}", person.id))
    g1 = {p.id: n + 1 for n, p in enumerate(people[:4])}
    first = await store.record_game(game("g1", g1), rated(g1))
    assert first is not None and first[0].before == Rating() and first[0].seat == 0
    assert await store.game_ratings("g1") == first  # kept beside the game
    assert await store.record_game(game("g1", {p.id: 1 for p in people[:4]}), rated(g1)) \
        is None
    assert await store.is_recorded("g1") and not await store.is_recorded("g2")
    g2 = {people[0].id: 1, people[4].id: 2, people[5].id: 2, people[3].id: 4}
    await store.record_game(game("g2", g2, finished=6000.0), rated(g2))
    g3 = {people[5].id: 1, people[4].id: 2, people[3].id: 3}
    await store.record_game(game("g3", g3, players=3, finished=7000.0), rated(g3))
    unrated = await store.record_game(game("g4", {people[0].id: 2}, is_rated=False,
                                           finished=8000.0), rated({people[0].id: 2}))
    assert unrated == [] and await store.game_ratings("g4") == []
    # One game of provisional ratings (a step of 1 rated game): on no leaderboard.
    g5 = {people[1].id: 1, people[2].id: 2}
    await store.record_game(game("g5", g5, players=5, finished=9000.0), rated(g5, step=1))
    assert await store.leaderboard(5, 0, 10) == []
    assert await store.place_of(people[1].id, 5) is None
    store = opened.reopen()
    assert await store.game_ratings("g1") == first
    ratings = await store.ratings(people[0].id)
    assert set(ratings) == {4} and ratings[4].games == 20 and ratings[4].wins == 2
    board = await store.leaderboard(4, 0, 10)
    assert [r.place for r in board] == [1, 2, 3, 4, 5, 6]
    assert board[0].account_id == people[0].id and board[0].display_name == "Person 0"
    shown = [(r.rating.shown, r.rating.games) for r in board]
    assert shown == sorted(shown, reverse=True)
    page = await store.leaderboard(4, 2, 2)
    assert [r.account_id for r in page] == [r.account_id for r in board[2:4]]
    assert [r.place for r in page] == [3, 4]
    for line in board:
        assert await store.place_of(line.account_id, 4) == line.place
    assert await store.place_of(people[0].id, 3) is None
    top = await store.leaderboard(3, 0, 5)
    assert top[0].account_id == people[5].id
    history = await store.games_of(people[0].id, 10, None)
    assert [g.record_id for g in history] == ["g4", "g2", "g1"]
    assert [(g.place, g.points, g.is_rated) for g in history] == [
        (2, 20, False), (1, 10, True), (1, 10, True)]
    assert history[1].rating_after == ratings[4].shown
    assert history[2].rating_change == history[2].rating_after > 0
    assert history[1].rating_change == history[1].rating_after - history[2].rating_after
    assert history[0].rating_after == history[0].rating_change == 0
    older = await store.games_of(people[0].id, 1, (history[0].finished, history[0].record_id))
    assert [g.record_id for g in older] == ["g2"]
    assert await store.totals(people[0].id) == (3, 2, pytest.approx(4 / 3))
    assert await store.totals("a_nobody") == (0, 0, 0.0)


async def test_games_rated_at_once_from_two_connections_lose_no_update(
        durable: Opened) -> None:
    opened = durable
    other = SqliteAccountStore(opened.path) if opened.kind == "sqlite" \
        else PgAccountStore(opened.dsn)
    try:
        ids = [account(n).id for n in range(4)]
        games = [(f"g{n}", opened.store if n % 2 else other) for n in range(20)]
        await asyncio.gather(*(store.record_game(
            game(record_id, {a: 1 + (k + n) % 4 for k, a in enumerate(ids)}),
            rated({a: 1 + (k + n) % 4 for k, a in enumerate(ids)}, step=1))
            for n, (record_id, store) in enumerate(games)))
        for account_id in ids:
            assert (await opened.store.ratings(account_id))[4].games == 20
            assert len(await opened.store.games_of(account_id, 100, None)) == 20
    finally:
        other.close()


async def test_no_two_accounts_share_a_name_that_looks_the_same(opened: Opened) -> None:
    store: AccountStore = opened.store
    ana = Account("a_ana", "Ana", 1.0)
    await store.create(ana, Identity(Method.DEVICE, "dev-ana", ana.id))
    for copy in ("Ana", "ANA", "A n a", "Аna", "Anа"):  # the last two: Cyrillic letters
        with pytest.raises(NameTaken):
            await store.create(Account("a_copy", copy, 2.0),
                               Identity(Method.DEVICE, "dev-copy", "a_copy"))
    assert await store.identity(Method.DEVICE, "dev-copy") is None  # nothing was written
    bia = Account("a_bia", "Bia", 3.0)
    await store.create(bia, Identity(Method.DEVICE, "dev-bia", bia.id))
    with pytest.raises(NameTaken):
        await store.save_account(Account(bia.id, "ana", bia.created))
    await store.save_account(Account(ana.id, "Ana Maria", ana.created))  # her own rename
    await store.save_account(Account(bia.id, "Ana", bia.created))  # "Ana" is free now
    store = opened.reopen()
    assert (await store.account(bia.id)).display_name == "Ana"
    await store.save_account(Account(bia.id, "", bia.created, is_deleted=True))
    cai = Account("a_cai", "Ana", 4.0)  # a deleted account's name is free again
    await store.create(cai, Identity(Method.DEVICE, "dev-cai", cai.id))


async def test_an_account_holds_a_bounded_number_of_sessions_and_expired_ones_go(
        opened: Opened) -> None:
    store: AccountStore = opened.store
    ana = account(1)
    await store.create(ana, Identity(Method.DEVICE, "dev-1", ana.id))
    for n in range(SESSIONS_KEPT + 3):  # one device secret signing in again and again
        await store.start_session(replace(session(f"s{n:02d}", ana.id), created=100.0 + n,
                                          refresh_expires=10_000.0 + n))
    assert await store.sessions_of(ana.id) == SESSIONS_KEPT
    assert await store.session_by_access("acc-s00-0") is None  # the oldest went first
    assert await store.session_by_access(f"acc-s{SESSIONS_KEPT + 2:02d}-0") is not None
    store = opened.reopen()
    assert await store.sweep(10_005.0, 0.0) == (3, 0)  # refresh tokens expired: swept
    assert await store.sessions_of(ana.id) == SESSIONS_KEPT - 3


async def test_idle_guests_go_and_everyone_else_stays(opened: Opened) -> None:
    """A guest not seen for the time goes with its history, unless it has a rated game (a
    guest's games against bots only, which rate nothing, keep nobody)."""
    store: AccountStore = opened.store
    idle, seen, player, named, banned, botter = (
        Account(f"a_{w}", w.title(), 10.0, w == "banned")
        for w in ("idle", "seen", "player", "named", "banned", "botter"))
    for person in (idle, seen, player, named, banned, botter):
        await store.create(person, Identity(Method.DEVICE, f"dev-{person.id}", person.id))
        await store.start_session(replace(session(person.id, person.id), created=20.0))
    await store.link(Identity(Method.PASSWORD, "named", named.id, "$argon2id$x"))
    await store.record_game(game("g1", {player.id: 1, named.id: 2}), rated(
        {player.id: 1, named.id: 2}))
    await store.record_game(game("g2", {botter.id: 1}, is_rated=False), rated({}))
    await store.start_session(replace(session("later", seen.id), created=500.0))
    assert await store.sweep(30.0, 100.0) == (0, 2)  # the idle guest and the bots' player
    assert await store.account(idle.id) is None
    assert await store.account(botter.id) is None
    assert await store.games_of(botter.id, 10, None) == []
    assert await store.identity(Method.DEVICE, f"dev-{idle.id}") is None
    assert await store.session_by_access(f"acc-{idle.id}-0") is None
    for kept in (seen, player, named, banned):
        assert await store.account(kept.id) is not None
    fresh = Account("a_new", "Idle", 50.0)  # its name is free again
    await store.create(fresh, Identity(Method.DEVICE, "dev-new", fresh.id))
    assert await store.sweep(30.0, 40.0) == (0, 0)  # made since: kept


async def test_an_older_accounts_database_is_migrated_and_a_newer_one_refused(
        tmp_path: Path) -> None:
    """Version 1 (before names had keys): its accounts come through with their names made
    unique, oldest first (a later copy keeps its name but holds no key); a database of a
    newer version is refused and left as it was."""
    path = tmp_path / "accounts.sqlite3"
    db = sqlite3.connect(path)
    db.executescript(SCHEMA_V1)
    db.executemany("INSERT INTO accounts VALUES (?, ?, ?, 0, 0)",
                   [("a_old", "Ana", 1.0), ("a_copy", "ana", 2.0), ("a_bia", "Bia", 3.0)])
    db.commit()
    db.close()
    store = SqliteAccountStore(path)
    try:
        assert (await store.account("a_copy")).display_name == "ana"
        with pytest.raises(NameTaken):
            await store.create(Account("a_new", "ANA", 4.0),
                               Identity(Method.DEVICE, "dev-new", "a_new"))
        await store.save_account(Account("a_old", "Ana Clara", 1.0))
        await store.create(Account("a_new", "ANA", 4.0),  # the oldest's key was Ana's
                           Identity(Method.DEVICE, "dev-new", "a_new"))
    finally:
        store.close()
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 99")
    db.commit()
    db.close()
    before = path.read_bytes()
    with pytest.raises(StoreUnusable, match="newer Copas"):
        SqliteAccountStore(path)
    assert path.read_bytes() == before

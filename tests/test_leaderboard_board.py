"""The leaderboard from its histogram (issue 37), on memory, SQLite and PostgreSQL: every place,
every page at every offset and every "around me" equal a sort in Python of the established
ratings (``shown`` down, then games down, then account id up), through ratings that tie, move,
cross the provisional threshold and go with their account; and a database of the previous
version gets its histogram from the ratings it holds."""

from __future__ import annotations

import asyncio
import random
import sqlite3
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from server.accounts.attempts import AttemptRule, SignInAttempts
from server.accounts.credentials import PasswordParameters, Passwords
from server.accounts.model import Account, FinishedGame, Identity, Method, Placed
from server.accounts.oidc import OidcVerifier
from server.accounts.postgres import PgAccountStore
from server.accounts.ratings import DEFAULT_KIND, PROVISIONAL_GAMES, RATING_KINDS, Rating, Update
from server.accounts.service import Accounts
from server.accounts.sqlite import BUCKET_BITS, SCHEMA_V1, SqliteAccountStore
from tests.helpers.account_stores import Opened
from tests.helpers.accounts import ManualClock

BOARDS = [(DEFAULT_KIND, 4), (DEFAULT_KIND, 3), (RATING_KINDS[-1], 4)]
PEOPLE = 160


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
async def opened(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opened]:
    made = Opened(request.param, tmp_path, request)
    yield made
    made.close()


class Truth:
    """What the stores must answer, kept by brute force."""

    def __init__(self) -> None:
        self.ratings: dict[tuple[str, str, int], Rating] = {}

    def order(self, kind: str, players: int) -> list[tuple[str, Rating]]:
        rows = [(a, r) for (a, k, p), r in self.ratings.items()
                if (k, p) == (kind, players) and r.games >= PROVISIONAL_GAMES]
        return sorted(rows, key=lambda row: (-row[1].shown, -row[1].games, row[0]))

    def forget(self, account_id: str) -> None:
        for key in [k for k in self.ratings if k[0] == account_id]:
            del self.ratings[key]


def a_rating(rng: random.Random, games: int) -> Rating:
    """Few values of mu and sigma, so that ``shown`` and games tie often (some below 0)."""
    return Rating(rng.choice([20.0, 24.5, 25.0, 27.25, 31.0]), rng.choice([1.5, 2.0, 3.0, 7.5]),
                  games, rng.randint(0, games))


async def rate(store: Any, truth: Truth, record_id: str, kind: str, players: int,
               chosen: dict[str, Rating], gone: frozenset[str] = frozenset()) -> None:
    """A rated game whose ``compute`` gives its seats the ``chosen`` ratings."""
    places = tuple(Placed(a, n + 1, 0, n) for n, a in enumerate(chosen))

    def compute(before: list[Rating]) -> list[Update]:
        return [Update(n, b, chosen[a], ()) for n, (a, b) in enumerate(zip(chosen, before,
                                                                           strict=True))]
    game = FinishedGame(record_id, "t", 1.0, players, places, True, kind)
    assert await store.record_game(game, compute) is not None
    for account_id, rating in chosen.items():
        if account_id not in gone:
            truth.ratings[(account_id, kind, players)] = rating


async def check(store: Any, truth: Truth, everyone: list[str]) -> None:
    for kind, players in BOARDS:
        board = truth.order(kind, players)
        lines = [(n + 1, a, r) for n, (a, r) in enumerate(board)]
        where = {a: n for n, (a, _) in enumerate(board)}
        for account_id in everyone:
            place = await store.place_of(account_id, players, kind)
            assert place == (where[account_id] + 1 if account_id in where else None), \
                (kind, players, account_id)
        for offset in range(len(board) + 2):
            page = await store.leaderboard(players, offset, 7, kind)
            assert [(r.place, r.account_id, r.rating) for r in page] == \
                lines[offset:offset + 7], (kind, players, offset)
        for size in (5, 6, 1):
            for account_id in everyone:
                page = await store.around(account_id, players, size, kind)
                if account_id not in where:
                    assert page is None
                    continue
                offset = max(where[account_id] - size // 2, 0)
                assert [(r.place, r.account_id, r.rating) for r in page] == \
                    lines[offset:offset + size], (kind, players, account_id, size)
                assert all(r.display_name == f"P{r.account_id}" for r in page)


async def test_places_pages_and_around_equal_a_sort_through_updates_and_deletions(
        opened: Opened) -> None:
    rng = random.Random(37)
    store = opened.store
    people = [Account(f"a_{n:04d}", f"Pa_{n:04d}", 1.0 + n) for n in range(PEOPLE)]
    for person in people:
        await store.create(person, Identity(Method.DEVICE, f"dev-{person.id}", person.id))
    everyone = [p.id for p in people]
    truth = Truth()
    games = 0
    for kind, players in BOARDS:  # most people on each board, some still provisional
        seated = rng.sample(everyone, PEOPLE * 3 // 4)
        for start in range(0, len(seated), 4):
            chosen = {a: a_rating(rng, rng.randint(PROVISIONAL_GAMES - 3, PROVISIONAL_GAMES + 4))
                      for a in seated[start:start + 4]}
            games += 1
            await rate(store, truth, f"g{games}", kind, players, chosen)
    await check(store, truth, everyone)
    for _ in range(60):  # ratings move; provisional ones cross into the board
        kind, players = rng.choice(BOARDS)
        chosen = {}
        for account_id in rng.sample(everyone, 3):
            old = truth.ratings.get((account_id, kind, players), Rating())
            chosen[account_id] = a_rating(rng, old.games + rng.choice([1, 1, 2]))
        games += 1
        await rate(store, truth, f"g{games}", kind, players, chosen)
    crossed = [a for (a, _, _), r in truth.ratings.items() if r.games == PROVISIONAL_GAMES]
    assert crossed  # some crossed the threshold in this run
    doomed = rng.sample(everyone, 12)
    for account_id in doomed:  # as Accounts.delete does
        account = await store.account(account_id)
        await store.save_account(replace(account, display_name="", is_deleted=True))
        await store.forget_games(account_id)
        truth.forget(account_id)
    for kind, players in BOARDS:  # a game that ends after a seat's account went
        chosen = {a: a_rating(rng, 30) for a in [doomed[0], *rng.sample(everyone, 2)]}
        games += 1
        await rate(store, truth, f"g{games}", kind, players, chosen, frozenset(doomed))
    await check(store, truth, everyone)
    store = opened.reopen()
    await check(store, truth, everyone)


async def test_the_services_around_is_the_accounts_page_or_the_top_one_off_the_board(
        opened: Opened) -> None:
    """Accounts.around (GetLeaderboard's around_me): the account's own page when it is on the
    board; the top page when it is not (provisional there, or never rated)."""
    rng = random.Random(11)
    store = opened.store
    clock = ManualClock(1_000_000.0)
    accounts = Accounts(store, clock, passwords=Passwords(PasswordParameters(1, 8, 1)),
                        verifier=OidcVerifier([]), attempts=SignInAttempts(
                            clock, per_pair=AttemptRule(3, 0.1), per_address=AttemptRule(5, 0.1)))
    people = [Account(f"a_{n:04d}", f"Pa_{n:04d}", 1.0 + n) for n in range(30)]
    for person in people:
        await store.create(person, Identity(Method.DEVICE, f"dev-{person.id}", person.id))
    truth = Truth()
    for start in range(0, 28, 4):
        await rate(store, truth, f"g{start}", DEFAULT_KIND, 4, {
            p.id: a_rating(rng, PROVISIONAL_GAMES + start % 3) for p in people[start:start + 4]})
    await rate(store, truth, "g-new", DEFAULT_KIND, 4, {people[28].id: a_rating(rng, 3)})
    board = [a for a, _ in truth.order(DEFAULT_KIND, 4)]
    assert people[28].id not in board and people[29].id not in board and len(board) == 28
    for person in people:
        page = [r.account_id for r in await accounts.around(person, 4, 6)]
        if person.id in board:
            first = max(board.index(person.id) - 3, 0)
            assert page == board[first:first + 6] and person.id in page
        else:  # people[28] provisional, people[29] never rated
            assert page == board[:6]


async def test_games_rated_at_once_on_two_postgresql_connections_keep_the_histogram(
        request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Two nodes rate games at once, one moving people from a high bucket to a low one while
    the other moves its people from the low one to the high one: no game waits on the other's
    buckets for good (a deadlock would fail a game), and the board is a sort of the ratings."""
    first = Opened("postgresql", tmp_path, request)
    second = PgAccountStore(first.dsn)
    try:
        truth = Truth()
        people = [f"a_{n:04d}" for n in range(40)]
        for n, account_id in enumerate(people):
            await first.store.create(Account(account_id, f"P{account_id}", 1.0 + n),
                                     Identity(Method.DEVICE, f"dev-{account_id}", account_id))
        high, low = Rating(31.0, 1.5, 12, 1), Rating(20.0, 3.0, 12, 1)
        for n, account_id in enumerate(people):
            await rate(first.store, truth, f"start{n}", DEFAULT_KIND, 4,
                       {account_id: high if n < 20 else low})

        async def node(store: Any, name: str, movers: list[str], is_high: bool) -> None:
            for round_ in range(8):
                is_high = not is_high
                for account_id in movers:
                    rating = replace(high if is_high else low, games=13 + round_)
                    await rate(store, truth, f"{name}{round_}{account_id}", DEFAULT_KIND, 4,
                               {account_id: rating})
        await asyncio.gather(node(first.store, "one", people[:20], True),
                             node(second, "two", people[20:], False))
        await check(first.store, truth, people)
    finally:
        second.close()
        first.close()


def histogram(path: Path) -> Counter[tuple[str, int, int]]:
    db = sqlite3.connect(path)
    try:
        return Counter({(k, p, s): n for k, p, s, n in db.execute(
            "SELECT kind, players, bucket, n FROM board_counts WHERE n > 0")})
    finally:
        db.close()


async def test_an_older_sqlite_database_gets_its_histogram_from_its_ratings(
        tmp_path: Path) -> None:
    """Version 1's ratings (one kind, by player count) come through to the board of the
    default game, each place and page as a sort of them says."""
    rng = random.Random(3)
    path = tmp_path / "accounts.sqlite3"
    db = sqlite3.connect(path)
    db.executescript(SCHEMA_V1)
    truth = Truth()
    for n in range(120):
        db.execute("INSERT INTO accounts VALUES (?, ?, 1.0, 0, 0)", (f"a_{n:04d}",
                                                                   f"Pa_{n:04d}"))
        for players in (3, 4):
            rating = a_rating(rng, rng.randint(PROVISIONAL_GAMES - 3, PROVISIONAL_GAMES + 3))
            db.execute("INSERT INTO ratings VALUES (?, ?, ?, ?, ?, ?, ?)",
                       (f"a_{n:04d}", players, rating.mu, rating.sigma, rating.games,
                        rating.wins, rating.shown))
            truth.ratings[(f"a_{n:04d}", DEFAULT_KIND, players)] = rating
    db.commit()
    db.close()
    store = SqliteAccountStore(path)
    try:
        everyone = [f"a_{n:04d}" for n in range(120)]
        for players in (3, 4):
            board = truth.order(DEFAULT_KIND, players)
            assert len(board) > 20
            for offset in range(len(board) + 1):
                page = await store.leaderboard(players, offset, 5)
                assert [r.account_id for r in page] == [a for a, _ in board[offset:offset + 5]]
            for account_id in everyone:
                assert await store.place_of(account_id, players) == next(
                    (n + 1 for n, (a, _) in enumerate(board) if a == account_id), None)
    finally:
        store.close()
    assert histogram(path) == Counter(
        (k, p, r.shown >> BUCKET_BITS) for (_, k, p), r in truth.ratings.items()
        if r.games >= PROVISIONAL_GAMES)


async def test_a_postgresql_database_of_the_previous_version_gets_its_histogram(
        request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Version 3 had no histogram: opened by this server, the board's places come from one
    built from the ratings."""
    rng = random.Random(5)
    opened = Opened("postgresql", tmp_path, request)
    try:
        store = opened.store
        truth = Truth()
        people = [f"a_{n:04d}" for n in range(60)]
        for n, account_id in enumerate(people):
            await store.create(Account(account_id, f"P{account_id}", 1.0 + n),
                               Identity(Method.DEVICE, f"dev-{account_id}", account_id))
        for start in range(0, 60, 3):
            await rate(store, truth, f"g{start}", DEFAULT_KIND, 4, {
                a: a_rating(rng, rng.randint(PROVISIONAL_GAMES - 2, PROVISIONAL_GAMES + 2))
                for a in people[start:start + 3]})
        store.close()
        import psycopg

        with psycopg.connect(opened.dsn, autocommit=True) as db:  # back to version 3
            db.execute("DROP TABLE board_counts")
            db.execute("UPDATE accounts_meta SET value = '3' WHERE key = 'schema_version'")
        store = opened.store = opened.open()
        await check(store, truth, people)
    finally:
        opened.close()

"""Accounts in PostgreSQL, shared by every node of a cluster (so a sign-in on one node works on
all, and a revoke on one ends the session on all at their next lookup). The tables sit beside the
cluster's in the same database; each call is one transaction on a connection of its own, on a
thread."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from server.accounts.model import (
    USED_REFRESH_KEPT,
    Account,
    FinishedGame,
    Identity,
    IdentityTaken,
    Method,
    PlayedGame,
    Ranked,
    RatingUpdate,
    Session,
)
from server.accounts.ratings import MU, SIGMA, Rating
from server.store.pg_connection import PgConnection

T = TypeVar("T")

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS accounts (
    account_id text PRIMARY KEY, display_name text NOT NULL, created double precision NOT NULL,
    is_banned boolean NOT NULL DEFAULT false, is_deleted boolean NOT NULL DEFAULT false);
CREATE TABLE IF NOT EXISTS identities (
    method text NOT NULL, key text NOT NULL, account_id text NOT NULL, secret text NOT NULL,
    PRIMARY KEY (method, key));
CREATE INDEX IF NOT EXISTS identities_by_account ON identities (account_id);
CREATE TABLE IF NOT EXISTS sessions (
    family text PRIMARY KEY, account_id text NOT NULL, access_digest text NOT NULL UNIQUE,
    access_expires double precision NOT NULL, refresh_digest text NOT NULL UNIQUE,
    refresh_expires double precision NOT NULL, generation integer NOT NULL);
CREATE INDEX IF NOT EXISTS sessions_by_account ON sessions (account_id);
CREATE TABLE IF NOT EXISTS used_refresh (
    digest text PRIMARY KEY, family text NOT NULL, generation integer NOT NULL);
CREATE INDEX IF NOT EXISTS used_refresh_by_family ON used_refresh (family, generation);
CREATE TABLE IF NOT EXISTS ratings (
    account_id text NOT NULL, players integer NOT NULL,
    mu double precision NOT NULL DEFAULT {MU}, sigma double precision NOT NULL DEFAULT {SIGMA},
    games integer NOT NULL DEFAULT 0, wins integer NOT NULL DEFAULT 0,
    shown integer NOT NULL DEFAULT 0, PRIMARY KEY (account_id, players));
CREATE INDEX IF NOT EXISTS ratings_board ON ratings (players, shown DESC, games DESC, account_id);
CREATE TABLE IF NOT EXISTS recorded_games (record_id text PRIMARY KEY);
CREATE TABLE IF NOT EXISTS history (
    account_id text NOT NULL, finished double precision NOT NULL, record_id text NOT NULL,
    table_name text NOT NULL, players integer NOT NULL, place integer NOT NULL,
    points integer NOT NULL, is_rated boolean NOT NULL, rating_after integer NOT NULL,
    rating_change integer NOT NULL, PRIMARY KEY (account_id, finished, record_id))
"""

_SESSION = ("family, account_id, access_digest, access_expires, refresh_digest, "
            "refresh_expires, generation")


def _session(row: Any) -> Session:
    return Session(row[0], row[1], row[2], row[3], row[4], row[5], row[6])


class PgAccountStore:
    """The ``AccountStore`` of a cluster."""

    def __init__(self, dsn: str) -> None:
        self._connection = PgConnection(dsn, SCHEMA, 7031980, "the accounts'")

    def close(self) -> None:
        self._connection.close()

    def _run(self, body: Callable[[Any], T]) -> T:
        return self._connection.run(body)

    async def _do(self, body: Callable[[Any], T]) -> T:
        return await asyncio.to_thread(self._run, body)

    def __len__(self) -> int:
        return int(self._run(lambda db: db.execute("SELECT count(*) FROM accounts").fetchone()[0]))

    async def identity(self, method: Method, key: str) -> Identity | None:
        def body(db: Any) -> Identity | None:
            row = db.execute("SELECT account_id, secret FROM identities WHERE method = %s "
                             "AND key = %s", (method.value, key)).fetchone()
            return None if row is None else Identity(method, key, row[0], row[1])
        return await self._do(body)

    async def identities(self, account_id: str) -> list[Identity]:
        def body(db: Any) -> list[Identity]:
            return [Identity(Method(m), k, account_id, s) for m, k, s in db.execute(
                "SELECT method, key, secret FROM identities WHERE account_id = %s "
                "ORDER BY method, key", (account_id,))]
        return await self._do(body)

    async def account(self, account_id: str) -> Account | None:
        def body(db: Any) -> Account | None:
            row = db.execute("SELECT account_id, display_name, created, is_banned, is_deleted "
                             "FROM accounts WHERE account_id = %s", (account_id,)).fetchone()
            return None if row is None else Account(*row)
        return await self._do(body)

    async def create(self, account: Account, identity: Identity) -> None:
        def body(db: Any) -> None:
            if db.execute("INSERT INTO identities VALUES (%s, %s, %s, %s) ON CONFLICT DO "
                          "NOTHING", (identity.method.value, identity.key, account.id,
                                      identity.secret)).rowcount == 0:
                raise IdentityTaken(identity.method)
            db.execute("INSERT INTO accounts VALUES (%s, %s, %s, %s, %s)",
                       (account.id, account.display_name, account.created, account.is_banned,
                        account.is_deleted))
        await self._do(body)

    async def link(self, identity: Identity) -> None:
        def body(db: Any) -> None:
            row = db.execute("INSERT INTO identities VALUES (%s, %s, %s, %s) ON CONFLICT "
                             "(method, key) DO UPDATE SET secret = excluded.secret "
                             "WHERE identities.account_id = excluded.account_id "
                             "RETURNING account_id", (identity.method.value, identity.key,
                                                      identity.account_id, identity.secret)
                             ).fetchone()
            if row is None:
                raise IdentityTaken(identity.method)
        await self._do(body)

    async def unlink(self, method: Method, key: str) -> None:
        await self._do(lambda db: db.execute(
            "DELETE FROM identities WHERE method = %s AND key = %s", (method.value, key)))

    async def banned_among(self, account_ids: list[str]) -> set[str]:
        return {a for (a,) in await self._do(lambda db: db.execute(
            "SELECT account_id FROM accounts WHERE account_id = ANY(%s) AND "
            "(is_banned OR is_deleted)", (account_ids,)).fetchall())} if account_ids else set()

    async def save_account(self, account: Account) -> None:
        await self._do(lambda db: db.execute(
            "UPDATE accounts SET display_name = %s, is_banned = %s, is_deleted = %s "
            "WHERE account_id = %s", (account.display_name, account.is_banned,
                                      account.is_deleted, account.id)))

    async def start_session(self, session: Session) -> None:
        await self._do(lambda db: db.execute(
            f"INSERT INTO sessions ({_SESSION}) VALUES (%s, %s, %s, %s, %s, %s, %s)",
            (session.family, session.account_id, session.access_digest,
             session.access_expires, session.refresh_digest, session.refresh_expires,
             session.generation)))

    async def session_by_access(self, digest: str) -> Session | None:
        def body(db: Any) -> Session | None:
            row = db.execute(f"SELECT {_SESSION} FROM sessions WHERE access_digest = %s",
                             (digest,)).fetchone()
            return None if row is None else _session(row)
        return await self._do(body)

    async def session_by_refresh(self, digest: str) -> tuple[Session | None, bool]:
        def body(db: Any) -> tuple[Session | None, bool]:
            row = db.execute(f"SELECT {_SESSION} FROM sessions WHERE refresh_digest = %s",
                             (digest,)).fetchone()
            if row is not None:
                return _session(row), True
            row = db.execute(f"SELECT {', '.join('s.' + c for c in _SESSION.split(', '))} "
                             "FROM used_refresh u JOIN sessions s ON s.family = u.family "
                             "WHERE u.digest = %s", (digest,)).fetchone()
            return (None, False) if row is None else (_session(row), False)
        return await self._do(body)

    async def rotate(self, old: Session, new: Session) -> bool:
        def body(db: Any) -> bool:
            changed = db.execute(
                "UPDATE sessions SET access_digest = %s, access_expires = %s, "
                "refresh_digest = %s, refresh_expires = %s, generation = %s "
                "WHERE family = %s AND refresh_digest = %s",
                (new.access_digest, new.access_expires, new.refresh_digest,
                 new.refresh_expires, new.generation, old.family, old.refresh_digest)).rowcount
            if not changed:
                return False
            db.execute("INSERT INTO used_refresh VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                       (old.refresh_digest, old.family, old.generation))
            db.execute("DELETE FROM used_refresh WHERE family = %s AND generation <= %s",
                       (old.family, old.generation - USED_REFRESH_KEPT))
            return True
        return await self._do(body)

    async def end_family(self, family: str) -> None:
        def body(db: Any) -> None:
            db.execute("DELETE FROM sessions WHERE family = %s", (family,))
            db.execute("DELETE FROM used_refresh WHERE family = %s", (family,))
        await self._do(body)

    async def end_sessions(self, account_id: str) -> int:
        def body(db: Any) -> int:
            families = [f for (f,) in db.execute(
                "DELETE FROM sessions WHERE account_id = %s RETURNING family", (account_id,))]
            db.execute("DELETE FROM used_refresh WHERE family = ANY(%s)", (families,))
            return len(families)
        return await self._do(body)

    async def ratings(self, account_id: str) -> dict[int, Rating]:
        def body(db: Any) -> dict[int, Rating]:
            return {p: Rating(mu, sigma, games, wins) for p, mu, sigma, games, wins in db.execute(
                "SELECT players, mu, sigma, games, wins FROM ratings WHERE account_id = %s "
                "AND games > 0", (account_id,))}
        return await self._do(body)

    async def record_game(self, game: FinishedGame, compute: RatingUpdate
                          ) -> dict[str, tuple[Rating, Rating]] | None:
        def body(db: Any) -> dict[str, tuple[Rating, Rating]] | None:
            if db.execute("INSERT INTO recorded_games VALUES (%s) ON CONFLICT DO NOTHING",
                          (game.record_id,)).rowcount == 0:
                return None
            changes: dict[str, tuple[Rating, Rating]] = {}
            if game.is_rated:
                ids = [p.account_id for p in game.places]
                for account_id in sorted(ids):  # rows to lock, in one order (no deadlock)
                    db.execute("INSERT INTO ratings (account_id, players) VALUES (%s, %s) "
                               "ON CONFLICT DO NOTHING", (account_id, game.players))
                rows = {a: Rating(mu, sigma, games, wins)
                        for a, mu, sigma, games, wins in db.execute(
                            "SELECT account_id, mu, sigma, games, wins FROM ratings WHERE "
                            "players = %s AND account_id = ANY(%s) ORDER BY account_id "
                            "FOR UPDATE", (game.players, ids))}
                before = [rows[a] for a in ids]
                after = compute(before, [p.place for p in game.places])
                for account_id, rating in zip(ids, after, strict=True):
                    db.execute("UPDATE ratings SET mu = %s, sigma = %s, games = %s, wins = %s, "
                               "shown = %s WHERE account_id = %s AND players = %s",
                               (rating.mu, rating.sigma, rating.games, rating.wins,
                                rating.shown, account_id, game.players))
                changes = {a: (b, r) for a, b, r in zip(ids, before, after, strict=True)}
            for placed in game.places:
                b, r = changes.get(placed.account_id, (Rating(), Rating()))
                db.execute("INSERT INTO history VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                           "ON CONFLICT DO NOTHING",
                           (placed.account_id, game.finished, game.record_id, game.table_name,
                            game.players, placed.place, placed.points, game.is_rated,
                            r.shown if game.is_rated else 0,
                            r.shown - b.shown if game.is_rated else 0))
            return changes
        return await self._do(body)

    async def is_recorded(self, record_id: str) -> bool:
        return await self._do(lambda db: db.execute(
            "SELECT 1 FROM recorded_games WHERE record_id = %s", (record_id,)
        ).fetchone() is not None)

    async def games_of(self, account_id: str, limit: int,
                       before: tuple[float, str] | None) -> list[PlayedGame]:
        def body(db: Any) -> list[PlayedGame]:
            finished, record = before if before is not None else (float("inf"), "")
            rows = db.execute(
                "SELECT record_id, table_name, finished, players, place, points, is_rated, "
                "rating_after, rating_change FROM history WHERE account_id = %s AND "
                "(finished, record_id) < (%s, %s) "
                "ORDER BY finished DESC, record_id DESC LIMIT %s",
                (account_id, finished, record if before is not None else "\uffff", limit)
            ).fetchall()
            return [PlayedGame(*r) for r in rows]
        return await self._do(body)

    async def totals(self, account_id: str) -> tuple[int, int, float]:
        def body(db: Any) -> tuple[int, int, float]:
            games, wins, average = db.execute(
                "SELECT count(*), count(*) FILTER (WHERE place = 1), coalesce(avg(place), 0) "
                "FROM history WHERE account_id = %s", (account_id,)).fetchone()
            return int(games), int(wins), float(average)
        return await self._do(body)

    async def leaderboard(self, players: int, offset: int, limit: int) -> list[Ranked]:
        def body(db: Any) -> list[Ranked]:
            rows = db.execute(  # the page from the board's index alone, then its names
                "SELECT r.account_id, a.display_name, r.mu, r.sigma, r.games, r.wins "
                "FROM (SELECT account_id FROM ratings WHERE players = %s AND games > 0 "
                "      ORDER BY shown DESC, games DESC, account_id LIMIT %s OFFSET %s) page "
                "JOIN ratings r ON r.account_id = page.account_id AND r.players = %s "
                "JOIN accounts a ON a.account_id = r.account_id "
                "ORDER BY r.shown DESC, r.games DESC, r.account_id",
                (players, limit, offset, players)).fetchall()
            return [Ranked(offset + n + 1, a, name, Rating(mu, sigma, games, wins))
                    for n, (a, name, mu, sigma, games, wins) in enumerate(rows)]
        return await self._do(body)

    async def place_of(self, account_id: str, players: int) -> int | None:
        def body(db: Any) -> int | None:
            row = db.execute("SELECT shown, games FROM ratings WHERE account_id = %s AND "
                             "players = %s AND games > 0", (account_id, players)).fetchone()
            if row is None:
                return None
            shown, games = row
            ahead = db.execute(
                "SELECT count(*) FROM ratings WHERE players = %s AND games > 0 AND "
                "(shown > %s OR (shown = %s AND (games > %s OR (games = %s AND "
                "account_id < %s))))",
                (players, shown, shown, games, games, account_id)).fetchone()[0]
            return int(ahead) + 1
        return await self._do(body)

    async def forget_games(self, account_id: str) -> None:
        def body(db: Any) -> None:
            db.execute("DELETE FROM ratings WHERE account_id = %s", (account_id,))
            db.execute("DELETE FROM history WHERE account_id = %s", (account_id,))
        await self._do(body)

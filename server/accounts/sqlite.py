"""Accounts in SQLite: their own database file (``accounts.sqlite3``) beside the tables' in
``--data-dir``, WAL with ``synchronous=FULL``; each call one transaction on a thread, so the
event loop never waits on the disk."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from server.accounts.model import (
    SESSIONS_KEPT,
    USED_REFRESH_KEPT,
    Account,
    FinishedGame,
    Identity,
    IdentityTaken,
    Method,
    NameTaken,
    PlayedGame,
    Ranked,
    RatingUpdate,
    Session,
    history_line,
)
from server.accounts.ratings import DEFAULT_KIND, PROVISIONAL_GAMES, Rating, Update
from server.names import name_key
from server.store.base import StoreUnusable

T = TypeVar("T")
SCHEMA_VERSION = 4
BUCKET_BITS = 4  # a board's histogram counts shown ratings in buckets of 16 (shown >> 4)

# Version 1: the first layout (written before the accounts' schema had a version).
SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS accounts (
    account_id TEXT PRIMARY KEY, display_name TEXT NOT NULL, created REAL NOT NULL,
    is_banned INTEGER NOT NULL DEFAULT 0, is_deleted INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS identities (
    method TEXT NOT NULL, key TEXT NOT NULL, account_id TEXT NOT NULL, secret TEXT NOT NULL,
    PRIMARY KEY (method, key)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS identities_by_account ON identities (account_id);
CREATE TABLE IF NOT EXISTS sessions (
    family TEXT PRIMARY KEY, account_id TEXT NOT NULL, access_digest TEXT NOT NULL UNIQUE,
    access_expires REAL NOT NULL, refresh_digest TEXT NOT NULL UNIQUE,
    refresh_expires REAL NOT NULL, generation INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS sessions_by_account ON sessions (account_id);
CREATE TABLE IF NOT EXISTS used_refresh (
    digest TEXT PRIMARY KEY, family TEXT NOT NULL, generation INTEGER NOT NULL) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS used_refresh_by_family ON used_refresh (family, generation);
CREATE TABLE IF NOT EXISTS ratings (
    account_id TEXT NOT NULL, players INTEGER NOT NULL, mu REAL NOT NULL, sigma REAL NOT NULL,
    games INTEGER NOT NULL, wins INTEGER NOT NULL, shown INTEGER NOT NULL,
    PRIMARY KEY (account_id, players)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS ratings_board ON ratings (players, shown DESC, games DESC, account_id);
CREATE TABLE IF NOT EXISTS recorded_games (record_id TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS history (
    account_id TEXT NOT NULL, finished REAL NOT NULL, record_id TEXT NOT NULL,
    table_name TEXT NOT NULL, players INTEGER NOT NULL, place INTEGER NOT NULL,
    points INTEGER NOT NULL, is_rated INTEGER NOT NULL, rating_after INTEGER NOT NULL,
    rating_change INTEGER NOT NULL, PRIMARY KEY (account_id, finished, record_id)) WITHOUT ROWID;
"""
# Version 2: names unique by their look (name_key), when an account was last seen (never-used
# guests go), sessions with their creation (a cap per account), their last rotation and salt
# (a repeat within the grace), how each game moved its seats' ratings, the established board.
SCHEMA_V2 = f"""
ALTER TABLE accounts ADD COLUMN name_key TEXT;
ALTER TABLE accounts ADD COLUMN last_seen REAL NOT NULL DEFAULT 0;
UPDATE accounts SET last_seen = created;
CREATE INDEX accounts_by_last_seen ON accounts (last_seen);
ALTER TABLE sessions ADD COLUMN created REAL NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN previous_refresh TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN rotated REAL NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN salt TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN rotated_by TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN repeats INTEGER NOT NULL DEFAULT 0;
CREATE INDEX sessions_by_expiry ON sessions (refresh_expires);
CREATE INDEX sessions_by_created ON sessions (account_id, created);
CREATE TABLE game_ratings (
    record_id TEXT NOT NULL, seat INTEGER NOT NULL, mu_before REAL NOT NULL,
    sigma_before REAL NOT NULL, games_before INTEGER NOT NULL, wins_before INTEGER NOT NULL,
    mu_after REAL NOT NULL, sigma_after REAL NOT NULL, games_after INTEGER NOT NULL,
    wins_after INTEGER NOT NULL, opponents TEXT NOT NULL,
    PRIMARY KEY (record_id, seat)) WITHOUT ROWID;
CREATE INDEX ratings_established ON ratings (players, shown DESC, games DESC, account_id)
    WHERE games >= {PROVISIONAL_GAMES};
"""

# Version 3: ratings per kind of game (the game, and whether partners share a result) beside the
# player count; every rating and history line before it is the default game's (Hearts's).
SCHEMA_V3 = f"""
CREATE TABLE ratings_by_kind (
    account_id TEXT NOT NULL, kind TEXT NOT NULL, players INTEGER NOT NULL, mu REAL NOT NULL,
    sigma REAL NOT NULL, games INTEGER NOT NULL, wins INTEGER NOT NULL, shown INTEGER NOT NULL,
    PRIMARY KEY (account_id, kind, players)) WITHOUT ROWID;
INSERT INTO ratings_by_kind SELECT account_id, '{DEFAULT_KIND}', players, mu, sigma, games, wins,
    shown FROM ratings;
DROP TABLE ratings;
ALTER TABLE ratings_by_kind RENAME TO ratings;
CREATE INDEX ratings_board ON ratings (kind, players, shown DESC, games DESC, account_id);
CREATE INDEX ratings_established ON ratings (kind, players, shown DESC, games DESC, account_id)
    WHERE games >= {PROVISIONAL_GAMES};
ALTER TABLE history ADD COLUMN kind TEXT NOT NULL DEFAULT '{DEFAULT_KIND}'
"""

# Version 4: each board's histogram (issue 37): how many established ratings of a kind of game
# and player count show a number in each bucket of BUCKET_WIDTH numbers (a few hundred buckets),
# so a place is a sum over the buckets ahead and a count within its own, and a page a walk from
# the start of its bucket, not a count or an OFFSET over the whole board. Triggers keep it in
# the transaction of every write to ratings (the connection turns on recursive_triggers, so an
# INSERT OR REPLACE counts the row it replaces out too). A bucket that empties stays, at 0.
_ESTABLISHED = f"games >= {PROVISIONAL_GAMES}"
SCHEMA_V4 = (
    "CREATE TABLE board_counts (kind TEXT NOT NULL, players INTEGER NOT NULL, "
    "bucket INTEGER NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (kind, players, bucket)) "
    "WITHOUT ROWID",
    f"INSERT INTO board_counts SELECT kind, players, shown >> {BUCKET_BITS}, count(*) "
    f"FROM ratings WHERE {_ESTABLISHED} GROUP BY 1, 2, 3",
    f"CREATE TRIGGER ratings_into_board AFTER INSERT ON ratings WHEN new.{_ESTABLISHED} BEGIN "
    f"INSERT INTO board_counts VALUES (new.kind, new.players, new.shown >> {BUCKET_BITS}, 1) "
    "ON CONFLICT (kind, players, bucket) DO UPDATE SET n = n + 1; END",
    f"CREATE TRIGGER ratings_out_of_board AFTER DELETE ON ratings WHEN old.{_ESTABLISHED} BEGIN "
    "UPDATE board_counts SET n = n - 1 WHERE kind = old.kind AND players = old.players "
    f"AND bucket = old.shown >> {BUCKET_BITS}; END",
    "CREATE TRIGGER ratings_moved_on_board AFTER UPDATE OF kind, players, games, shown "
    "ON ratings BEGIN "
    f"UPDATE board_counts SET n = n - 1 WHERE old.{_ESTABLISHED} AND kind = old.kind "
    f"AND players = old.players AND bucket = old.shown >> {BUCKET_BITS}; "
    f"INSERT INTO board_counts SELECT new.kind, new.players, new.shown >> {BUCKET_BITS}, 1 "
    f"WHERE new.{_ESTABLISHED} ON CONFLICT (kind, players, bucket) DO UPDATE SET n = n + 1; END",
)

_SESSION = ("family, account_id, access_digest, access_expires, refresh_digest, "
            "refresh_expires, generation, created, previous_refresh, rotated, salt, rotated_by, "
            "repeats")
_SESSION_MARKS = ", ".join("?" * len(_SESSION.split(", ")))
_UPDATE = ("seat, mu_before, sigma_before, games_before, wins_before, mu_after, sigma_after, "
           "games_after, wins_after, opponents")


def _session(row: Any) -> Session:
    return Session(*row)


def _session_row(session: Session) -> tuple[Any, ...]:
    return (session.family, session.account_id, session.access_digest,
            session.access_expires, session.refresh_digest, session.refresh_expires,
            session.generation, session.created, session.previous_refresh, session.rotated,
            session.salt, session.rotated_by, session.repeats)


def update_row(update: Update) -> tuple[Any, ...]:
    """A seat's update as ``game_ratings`` keeps it (both stores)."""
    b, a = update.before, update.after
    return (update.seat, b.mu, b.sigma, b.games, b.wins, a.mu, a.sigma, a.games, a.wins,
            ",".join(str(o) for o in update.opponents))


def update_of(row: Any) -> Update:
    seat, mu0, sigma0, games0, wins0, mu1, sigma1, games1, wins1, opponents = row
    return Update(int(seat), Rating(mu0, sigma0, games0, wins0), Rating(mu1, sigma1, games1,
                                                                        wins1),
                  tuple(int(o) for o in opponents.split(",") if o))


def unique_name_keys(rows: list[tuple[str, str]]) -> list[tuple[str | None, str]]:
    """(name_key, account id) for accounts (id, name), oldest first: a name that looks like an
    older account's keeps no key (it stays, but names no one for uniqueness)."""
    taken: set[str] = set()
    out: list[tuple[str | None, str]] = []
    for account_id, name in rows:
        key = name_key(name) if name else ""
        out.append((key if key and key not in taken else None, account_id))
        taken.add(key)
    return out


def _account(row: Any) -> Account:
    return Account(row[0], row[1], row[2], bool(row[3]), bool(row[4]))


class SqliteAccountStore:
    """The ``AccountStore`` of a single node."""

    def __init__(self, path: Path) -> None:
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            self._db.close()
            raise StoreUnusable(f"{path} has accounts schema version {version}; this server "
                                f"knows up to {SCHEMA_VERSION}: run a newer Copas")
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA busy_timeout=5000")
        if version < 1:
            self._db.executescript(SCHEMA_V1)
        if version < 2:
            self._db.execute("BEGIN IMMEDIATE")
            for statement in SCHEMA_V2.split(";"):
                if statement.strip():
                    self._db.execute(statement)
            self._db.executemany("UPDATE accounts SET name_key = ? WHERE account_id = ?",
                                 unique_name_keys(self._db.execute(
                                     "SELECT account_id, display_name FROM accounts WHERE NOT "
                                     "is_deleted ORDER BY created, account_id").fetchall()))
            self._db.execute("CREATE UNIQUE INDEX accounts_by_name ON accounts (name_key) "
                             "WHERE name_key IS NOT NULL")
            self._db.execute("PRAGMA user_version = 2")
            self._db.execute("COMMIT")
        if version < 3:
            self._db.execute("BEGIN IMMEDIATE")
            for statement in SCHEMA_V3.split(";"):
                if statement.strip():
                    self._db.execute(statement)
            self._db.execute("PRAGMA user_version = 3")
            self._db.execute("COMMIT")
        if version < 4:
            self._db.execute("BEGIN IMMEDIATE")
            for statement in SCHEMA_V4:
                self._db.execute(statement)
            self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            self._db.execute("COMMIT")
        self._db.execute("PRAGMA recursive_triggers = ON")  # a REPLACE's delete is counted
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _run(self, body: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                result = body(self._db)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
            return result

    async def _do(self, body: Callable[[sqlite3.Connection], T]) -> T:
        return await asyncio.to_thread(self._run, body)

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT count(*) FROM accounts").fetchone()[0])

    async def identity(self, method: Method, key: str) -> Identity | None:
        def body(db: sqlite3.Connection) -> Identity | None:
            row = db.execute("SELECT account_id, secret FROM identities WHERE method = ? "
                             "AND key = ?", (method.value, key)).fetchone()
            return None if row is None else Identity(method, key, row[0], row[1])
        return await self._do(body)

    async def identities(self, account_id: str) -> list[Identity]:
        def body(db: sqlite3.Connection) -> list[Identity]:
            return [Identity(Method(m), k, account_id, s) for m, k, s in db.execute(
                "SELECT method, key, secret FROM identities WHERE account_id = ? "
                "ORDER BY method, key", (account_id,))]
        return await self._do(body)

    async def account(self, account_id: str) -> Account | None:
        def body(db: sqlite3.Connection) -> Account | None:
            row = db.execute("SELECT account_id, display_name, created, is_banned, is_deleted "
                             "FROM accounts WHERE account_id = ?", (account_id,)).fetchone()
            return None if row is None else _account(row)
        return await self._do(body)

    async def create(self, account: Account, identity: Identity) -> None:
        def body(db: sqlite3.Connection) -> None:
            try:
                db.execute("INSERT INTO identities VALUES (?, ?, ?, ?)",
                           (identity.method.value, identity.key, account.id, identity.secret))
            except sqlite3.IntegrityError:
                raise IdentityTaken(identity.method) from None
            try:
                db.execute("INSERT INTO accounts (account_id, display_name, created, is_banned, "
                           "is_deleted, name_key, last_seen) VALUES (?, ?, ?, ?, ?, ?, ?)",
                           (account.id, account.display_name, account.created,
                            int(account.is_banned), int(account.is_deleted),
                            _key_of(account), account.created))
            except sqlite3.IntegrityError:
                raise NameTaken(account.display_name) from None
        await self._do(body)

    async def link(self, identity: Identity) -> None:
        def body(db: sqlite3.Connection) -> None:
            row = db.execute("SELECT account_id FROM identities WHERE method = ? AND key = ?",
                             (identity.method.value, identity.key)).fetchone()
            if row is not None and row[0] != identity.account_id:
                raise IdentityTaken(identity.method)
            db.execute("INSERT OR REPLACE INTO identities VALUES (?, ?, ?, ?)",
                       (identity.method.value, identity.key, identity.account_id,
                        identity.secret))
        await self._do(body)

    async def unlink(self, method: Method, key: str) -> None:
        await self._do(lambda db: db.execute(
            "DELETE FROM identities WHERE method = ? AND key = ?", (method.value, key)))

    async def banned_among(self, account_ids: list[str]) -> set[str]:
        def body(db: sqlite3.Connection) -> set[str]:
            marks = ",".join("?" * len(account_ids))
            return {a for (a,) in db.execute(
                f"SELECT account_id FROM accounts WHERE account_id IN ({marks}) AND "
                "(is_banned OR is_deleted)", account_ids)}
        return await self._do(body) if account_ids else set()

    async def deleted_among(self, account_ids: list[str]) -> set[str]:
        def body(db: sqlite3.Connection) -> set[str]:
            marks = ",".join("?" * len(account_ids))
            return {a for (a,) in db.execute(
                f"SELECT account_id FROM accounts WHERE account_id IN ({marks}) AND "
                "is_deleted", account_ids)}
        return await self._do(body) if account_ids else set()

    async def save_account(self, account: Account) -> None:
        def body(db: sqlite3.Connection) -> None:
            try:
                db.execute("UPDATE accounts SET display_name = ?, is_banned = ?, "
                           "is_deleted = ?, name_key = ? WHERE account_id = ?",
                           (account.display_name, int(account.is_banned),
                            int(account.is_deleted), _key_of(account), account.id))
            except sqlite3.IntegrityError:
                raise NameTaken(account.display_name) from None
        await self._do(body)

    async def start_session(self, session: Session, keep: int = SESSIONS_KEPT) -> None:
        def body(db: sqlite3.Connection) -> None:
            db.execute(f"INSERT INTO sessions ({_SESSION}) VALUES ({_SESSION_MARKS})",
                       _session_row(session))
            db.execute("UPDATE accounts SET last_seen = ? WHERE account_id = ?",
                       (session.created, session.account_id))
            doomed = [f for (f,) in db.execute(
                "SELECT family FROM sessions WHERE account_id = ? ORDER BY created DESC, "
                "family DESC LIMIT -1 OFFSET ?", (session.account_id, keep))]
            for family in doomed:
                db.execute("DELETE FROM sessions WHERE family = ?", (family,))
                db.execute("DELETE FROM used_refresh WHERE family = ?", (family,))
        await self._do(body)

    async def session_by_access(self, digest: str) -> Session | None:
        def body(db: sqlite3.Connection) -> Session | None:
            row = db.execute(f"SELECT {_SESSION} FROM sessions WHERE access_digest = ?",
                             (digest,)).fetchone()
            return None if row is None else _session(row)
        return await self._do(body)

    async def session_and_account(self, digest: str) -> tuple[Session | None, Account | None]:
        def body(db: sqlite3.Connection) -> tuple[Session | None, Account | None]:
            row = db.execute(f"SELECT {_SESSION} FROM sessions WHERE access_digest = ?",
                             (digest,)).fetchone()
            if row is None:
                return None, None
            session = _session(row)
            row = db.execute("SELECT account_id, display_name, created, is_banned, is_deleted "
                             "FROM accounts WHERE account_id = ?",
                             (session.account_id,)).fetchone()
            return session, None if row is None else _account(row)
        return await self._do(body)

    async def session_by_refresh(self, digest: str) -> tuple[Session | None, bool]:
        def body(db: sqlite3.Connection) -> tuple[Session | None, bool]:
            row = db.execute(f"SELECT {_SESSION} FROM sessions WHERE refresh_digest = ?",
                             (digest,)).fetchone()
            if row is not None:
                return _session(row), True
            row = db.execute(f"SELECT {', '.join('s.' + c for c in _SESSION.split(', '))} "
                             "FROM used_refresh u JOIN sessions s ON s.family = u.family "
                             "WHERE u.digest = ?", (digest,)).fetchone()
            return (None, False) if row is None else (_session(row), False)
        return await self._do(body)

    async def rotate(self, old: Session, new: Session) -> bool:
        def body(db: sqlite3.Connection) -> bool:
            changed = db.execute(
                "UPDATE sessions SET access_digest = ?, access_expires = ?, refresh_digest = ?, "
                "refresh_expires = ?, generation = ?, previous_refresh = ?, rotated = ?, "
                "rotated_by = ?, repeats = 0 WHERE family = ? AND refresh_digest = ?",
                (new.access_digest, new.access_expires, new.refresh_digest,
                 new.refresh_expires, new.generation, new.previous_refresh, new.rotated,
                 new.rotated_by, old.family, old.refresh_digest)).rowcount
            if not changed:
                return False
            db.execute("UPDATE accounts SET last_seen = ? WHERE account_id = ?",
                       (new.rotated, new.account_id))
            db.execute("INSERT OR IGNORE INTO used_refresh VALUES (?, ?, ?)",
                       (old.refresh_digest, old.family, old.generation))
            db.execute("DELETE FROM used_refresh WHERE family = ? AND generation <= ?",
                       (old.family, old.generation - USED_REFRESH_KEPT))
            return True
        return await self._do(body)

    async def repeat(self, session: Session) -> bool:
        return bool(await self._do(lambda db: db.execute(
            "UPDATE sessions SET repeats = repeats + 1 WHERE family = ? AND refresh_digest = ? "
            "AND repeats = 0", (session.family, session.refresh_digest)).rowcount))

    async def end_family(self, family: str) -> None:
        def body(db: sqlite3.Connection) -> None:
            db.execute("DELETE FROM sessions WHERE family = ?", (family,))
            db.execute("DELETE FROM used_refresh WHERE family = ?", (family,))
        await self._do(body)

    async def end_sessions(self, account_id: str) -> int:
        def body(db: sqlite3.Connection) -> int:
            families = [f for (f,) in db.execute(
                "SELECT family FROM sessions WHERE account_id = ?", (account_id,))]
            for family in families:
                db.execute("DELETE FROM used_refresh WHERE family = ?", (family,))
            db.execute("DELETE FROM sessions WHERE account_id = ?", (account_id,))
            return len(families)
        return await self._do(body)

    async def sessions_of(self, account_id: str) -> int:
        return int(await self._do(lambda db: db.execute(
            "SELECT count(*) FROM sessions WHERE account_id = ?", (account_id,)
        ).fetchone()[0]))

    async def sweep(self, now: float, idle_guests_before: float) -> tuple[int, int]:
        def body(db: sqlite3.Connection) -> tuple[int, int]:
            expired = [f for (f,) in db.execute(
                "SELECT family FROM sessions WHERE refresh_expires <= ?", (now,))]
            for family in expired:
                db.execute("DELETE FROM sessions WHERE family = ?", (family,))
                db.execute("DELETE FROM used_refresh WHERE family = ?", (family,))
            guests = [a for (a,) in db.execute(
                "SELECT a.account_id FROM accounts a WHERE a.last_seen < ?1 AND a.created < ?1 "
                "AND NOT a.is_banned AND NOT a.is_deleted "
                "AND EXISTS (SELECT 1 FROM identities i WHERE i.account_id = a.account_id) "
                "AND NOT EXISTS (SELECT 1 FROM identities i WHERE i.account_id = a.account_id "
                "                AND i.method != 'device') "
                "AND NOT EXISTS (SELECT 1 FROM history h WHERE h.account_id = a.account_id "
                "                AND h.is_rated)",
                (idle_guests_before,))]
            for account_id in guests:
                for (family,) in db.execute("SELECT family FROM sessions WHERE account_id = ?",
                                            (account_id,)).fetchall():
                    db.execute("DELETE FROM used_refresh WHERE family = ?", (family,))
                db.execute("DELETE FROM sessions WHERE account_id = ?", (account_id,))
                db.execute("DELETE FROM identities WHERE account_id = ?", (account_id,))
                db.execute("DELETE FROM history WHERE account_id = ?", (account_id,))
                db.execute("DELETE FROM accounts WHERE account_id = ?", (account_id,))
            return len(expired), len(guests)
        return await self._do(body)

    async def ratings(self, account_id: str, kind: str = DEFAULT_KIND) -> dict[int, Rating]:
        def body(db: sqlite3.Connection) -> dict[int, Rating]:
            return {p: Rating(mu, sigma, games, wins) for p, mu, sigma, games, wins in db.execute(
                "SELECT players, mu, sigma, games, wins FROM ratings WHERE account_id = ? AND "
                "kind = ?", (account_id, kind))}
        return await self._do(body)

    async def record_game(self, game: FinishedGame, compute: RatingUpdate
                          ) -> list[Update] | None:
        def body(db: sqlite3.Connection) -> list[Update] | None:
            if db.execute("INSERT OR IGNORE INTO recorded_games VALUES (?)",
                          (game.record_id,)).rowcount == 0:
                return None
            marks = ",".join("?" * len(game.places))
            gone = {a for (a,) in db.execute(  # deleted meanwhile: nothing of theirs is kept
                f"SELECT account_id FROM accounts WHERE account_id IN ({marks}) AND is_deleted",
                [p.account_id for p in game.places])}
            updates: list[Update] = []
            if game.is_rated:
                before = []
                for placed in game.places:
                    row = db.execute("SELECT mu, sigma, games, wins FROM ratings WHERE "
                                     "account_id = ? AND kind = ? AND players = ?",
                                     (placed.account_id, game.kind, game.players)).fetchone()
                    before.append(Rating() if row is None else Rating(*row))
                updates = compute(before)
                by_seat = {p.seat: p.account_id for p in game.places}
                for update in updates:
                    rating = update.after
                    if by_seat[update.seat] not in gone:
                        db.execute("INSERT INTO ratings VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                                   "ON CONFLICT (account_id, kind, players) DO UPDATE SET "
                                   "mu = excluded.mu, sigma = excluded.sigma, "
                                   "games = excluded.games, wins = excluded.wins, "
                                   "shown = excluded.shown",
                                   (by_seat[update.seat], game.kind, game.players, rating.mu,
                                    rating.sigma, rating.games, rating.wins, rating.shown))
                    db.execute(f"INSERT OR REPLACE INTO game_ratings (record_id, {_UPDATE}) "
                               "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                               (game.record_id, *update_row(update)))
            moved = {u.seat: u for u in updates}
            for placed in game.places:
                if placed.account_id in gone:
                    continue
                line = history_line(game, placed, moved.get(placed.seat))
                db.execute("INSERT OR IGNORE INTO history VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                           "?)", (placed.account_id, line.finished, line.record_id,
                                  line.table_name, line.players, line.place, line.points,
                                  int(line.is_rated), line.rating_after, line.rating_change,
                                  line.kind))
            return updates
        return await self._do(body)

    async def game_ratings(self, record_id: str) -> list[Update]:
        return [update_of(row) for row in await self._do(lambda db: db.execute(
            f"SELECT {_UPDATE} FROM game_ratings WHERE record_id = ? ORDER BY seat",
            (record_id,)).fetchall())]

    async def is_recorded(self, record_id: str) -> bool:
        return await self._do(lambda db: db.execute(
            "SELECT 1 FROM recorded_games WHERE record_id = ?", (record_id,)
        ).fetchone() is not None)

    async def games_of(self, account_id: str, limit: int,
                       before: tuple[float, str] | None) -> list[PlayedGame]:
        def body(db: sqlite3.Connection) -> list[PlayedGame]:
            finished, record = before if before is not None else (float("inf"), "")
            rows = db.execute(
                "SELECT record_id, table_name, finished, players, place, points, is_rated, "
                "rating_after, rating_change, kind FROM history WHERE account_id = ? AND "
                "(finished < ? OR (finished = ? AND record_id < ?)) "
                "ORDER BY finished DESC, record_id DESC LIMIT ?",
                (account_id, finished, finished, record, limit)).fetchall()
            return [PlayedGame(r[0], r[1], r[2], r[3], r[4], r[5], bool(r[6]), r[7], r[8], r[9])
                    for r in rows]
        return await self._do(body)

    async def totals(self, account_id: str) -> tuple[int, int, float]:
        def body(db: sqlite3.Connection) -> tuple[int, int, float]:
            games, wins, average = db.execute(
                "SELECT count(*), coalesce(sum(place = 1), 0), coalesce(avg(place), 0) "
                "FROM history WHERE account_id = ?", (account_id,)).fetchone()
            return int(games), int(wins), float(average)
        return await self._do(body)

    async def leaderboard(self, players: int, offset: int, limit: int,
                          kind: str = DEFAULT_KIND) -> list[Ranked]:
        def body(db: sqlite3.Connection) -> list[Ranked]:
            found = bucket_holding(db.execute(
                "SELECT bucket, n FROM board_counts WHERE kind = ? AND players = ? "
                "ORDER BY bucket DESC", (kind, players)), offset)
            if found is None:
                return []
            bucket, ahead = found
            ids = [a for (a,) in db.execute(  # from that bucket on, along the board's index
                f"SELECT account_id FROM ratings WHERE kind = ? AND players = ? AND {_BOARD} "
                "AND shown < ? ORDER BY shown DESC, games DESC, account_id LIMIT ? OFFSET ?",
                (kind, players, (bucket + 1) << BUCKET_BITS, limit, offset - ahead))]
            return _lines(db, kind, players, offset + 1, ids)
        return await self._do(body)

    async def place_of(self, account_id: str, players: int, kind: str = DEFAULT_KIND
                       ) -> int | None:
        def body(db: sqlite3.Connection) -> int | None:
            key = _key_on_board(db, account_id, players, kind)
            return None if key is None else _place(db, kind, players, key)
        return await self._do(body)

    async def around(self, account_id: str, players: int, size: int,
                     kind: str = DEFAULT_KIND) -> list[Ranked] | None:
        def body(db: sqlite3.Connection) -> list[Ranked] | None:
            key = _key_on_board(db, account_id, players, kind)
            if key is None:
                return None
            before = _walk(db, kind, players, key, size // 2, is_ahead=True)[::-1]
            ids = before + _walk(db, kind, players, key, size - len(before), is_ahead=False)
            return _lines(db, kind, players, _place(db, kind, players, key) - len(before), ids)
        return await self._do(body)

    async def forget_games(self, account_id: str) -> None:
        def body(db: sqlite3.Connection) -> None:
            db.execute("DELETE FROM ratings WHERE account_id = ?", (account_id,))
            db.execute("DELETE FROM history WHERE account_id = ?", (account_id,))
        await self._do(body)


_BOARD = f"games >= {PROVISIONAL_GAMES}"  # an established rating: on its board


def bucket_holding(buckets: Iterable[tuple[int, int]], offset: int) -> tuple[int, int] | None:
    """The bucket of a board's histogram (its (bucket, n), top first) that holds place
    ``offset + 1``, and how many lines are ahead of it; None past the board's end."""
    ahead = 0
    for bucket, n in buckets:
        if ahead + n > offset:
            return bucket, ahead
        ahead += n
    return None


def _key_on_board(db: sqlite3.Connection, account_id: str, players: int, kind: str
                  ) -> tuple[int, int, str] | None:
    """The account's (shown, games, id) on the board, None when it is not on it."""
    row = db.execute(f"SELECT shown, games FROM ratings WHERE account_id = ? AND kind = ? AND "
                     f"players = ? AND {_BOARD}", (account_id, kind, players)).fetchone()
    return None if row is None else (int(row[0]), int(row[1]), account_id)


def _place(db: sqlite3.Connection, kind: str, players: int, key: tuple[int, int, str]) -> int:
    """The place of ``key``: the buckets ahead of its own from the histogram, then three
    ranges of the board's index within its bucket."""
    shown, games, account_id = key
    board = f"FROM ratings WHERE kind = ?1 AND players = ?2 AND {_BOARD}"
    ahead = db.execute(
        "SELECT (SELECT coalesce(sum(n), 0) FROM board_counts WHERE kind = ?1 AND "
        "players = ?2 AND bucket > ?6) + "
        f"(SELECT count(*) {board} AND shown > ?3 AND shown < ?7) + "
        f"(SELECT count(*) {board} AND shown = ?3 AND games > ?4) + "
        f"(SELECT count(*) {board} AND shown = ?3 AND games = ?4 AND account_id < ?5)",
        (kind, players, shown, games, account_id, shown >> BUCKET_BITS,
         ((shown >> BUCKET_BITS) + 1) << BUCKET_BITS)).fetchone()[0]
    return int(ahead) + 1


def _walk(db: sqlite3.Connection, kind: str, players: int, key: tuple[int, int, str],
          limit: int, *, is_ahead: bool) -> list[str]:
    """Up to ``limit`` ids of the board from ``key``: the ones ahead of it, nearest first, or
    itself and the ones after it, in the board's order (three ranges of the board's index)."""
    shown, games, account_id = key
    if is_ahead:
        ranges = (("shown = ?3 AND games = ?4 AND account_id < ?5", "account_id DESC"),
                  ("shown = ?3 AND games > ?4", "games, account_id DESC"),
                  ("shown > ?3", "shown, games, account_id DESC"))
    else:
        ranges = (("shown = ?3 AND games = ?4 AND account_id >= ?5", "account_id"),
                  ("shown = ?3 AND games < ?4", "games DESC, account_id"),
                  ("shown < ?3", "shown DESC, games DESC, account_id"))
    ids: list[str] = []
    for where, order in ranges:
        if len(ids) >= limit:
            break
        ids += [a for (a,) in db.execute(
            f"SELECT account_id FROM ratings WHERE kind = ?1 AND players = ?2 AND {_BOARD} "
            f"AND {where} ORDER BY {order} LIMIT ?6",
            (kind, players, shown, games, account_id, limit - len(ids)))]
    return ids


def _lines(db: sqlite3.Connection, kind: str, players: int, first: int, ids: list[str]
           ) -> list[Ranked]:
    """The board's lines for ``ids`` (in its order, the first at place ``first``)."""
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    rows = {a: (name, Rating(mu, sigma, games, wins)) for a, name, mu, sigma, games, wins in
            db.execute("SELECT r.account_id, a.display_name, r.mu, r.sigma, r.games, r.wins "
                       "FROM ratings r JOIN accounts a ON a.account_id = r.account_id "
                       f"WHERE r.kind = ? AND r.players = ? AND r.account_id IN ({marks})",
                       (kind, players, *ids))}
    return [Ranked(first + n, a, *rows[a]) for n, a in enumerate(ids) if a in rows]


def _key_of(account: Account) -> str | None:
    """The name's key, None for a deleted account (its name is free again)."""
    return None if account.is_deleted or not account.display_name \
        else name_key(account.display_name)

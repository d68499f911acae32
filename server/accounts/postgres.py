"""Accounts in PostgreSQL, shared by every node of a cluster (so a sign-in on one node works on
all, and a revoke on one ends the session on all at their next lookup). The tables sit beside the
cluster's in the same database; each call is one transaction on a connection of its own, on a
thread."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterable
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
from server.accounts.ratings import DEFAULT_KIND, MU, PROVISIONAL_GAMES, SIGMA, Rating, Update
from server.accounts.sqlite import (
    BUCKET_BITS,
    SCHEMA_VERSION,
    bucket_holding,
    unique_name_keys,
    update_of,
    update_row,
)
from server.names import name_key
from server.store.base import StoreUnusable
from server.store.pg_connection import PgConnection

T = TypeVar("T")

# Version 1 (the first layout, made before the accounts' schema had a version); the version
# is kept in accounts_meta, the same numbers as the SQLite store's (server/accounts/sqlite.py).
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
    rating_change integer NOT NULL, PRIMARY KEY (account_id, finished, record_id));
CREATE TABLE IF NOT EXISTS accounts_meta (key text PRIMARY KEY, value text NOT NULL)
"""
SCHEMA_V2 = f"""
ALTER TABLE accounts ADD COLUMN name_key text;
ALTER TABLE accounts ADD COLUMN last_seen double precision NOT NULL DEFAULT 0;
UPDATE accounts SET last_seen = created;
CREATE INDEX accounts_by_last_seen ON accounts (last_seen);
ALTER TABLE sessions ADD COLUMN created double precision NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN previous_refresh text NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN rotated double precision NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN salt text NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN rotated_by text NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN repeats INTEGER NOT NULL DEFAULT 0;
CREATE INDEX sessions_by_expiry ON sessions (refresh_expires);
CREATE INDEX sessions_by_created ON sessions (account_id, created);
CREATE TABLE game_ratings (
    record_id text NOT NULL, seat integer NOT NULL, mu_before double precision NOT NULL,
    sigma_before double precision NOT NULL, games_before integer NOT NULL,
    wins_before integer NOT NULL, mu_after double precision NOT NULL,
    sigma_after double precision NOT NULL, games_after integer NOT NULL,
    wins_after integer NOT NULL, opponents text NOT NULL, PRIMARY KEY (record_id, seat));
CREATE INDEX ratings_established ON ratings (players, shown DESC, games DESC, account_id)
    WHERE games >= {PROVISIONAL_GAMES}
"""
# Version 3: ratings per kind of game beside the player count (as the SQLite store's).
SCHEMA_V3 = f"""
ALTER TABLE ratings ADD COLUMN kind text NOT NULL DEFAULT '{DEFAULT_KIND}';
ALTER TABLE ratings DROP CONSTRAINT ratings_pkey;
ALTER TABLE ratings ADD PRIMARY KEY (account_id, kind, players);
DROP INDEX ratings_board;
CREATE INDEX ratings_board ON ratings (kind, players, shown DESC, games DESC, account_id);
DROP INDEX ratings_established;
CREATE INDEX ratings_established ON ratings (kind, players, shown DESC, games DESC, account_id)
    WHERE games >= {PROVISIONAL_GAMES};
ALTER TABLE history ADD COLUMN kind text NOT NULL DEFAULT '{DEFAULT_KIND}'
"""
# Version 4: each board's histogram (as the SQLite store's, issue 37). No trigger keeps it: the
# store changes it itself, bucket by bucket in one order after the ratings' rows are locked, so
# that two games rated at once never wait on each other's buckets in opposite orders.
SCHEMA_V4 = f"""
CREATE TABLE board_counts (
    kind text NOT NULL, players integer NOT NULL, bucket integer NOT NULL, n integer NOT NULL,
    PRIMARY KEY (kind, players, bucket));
INSERT INTO board_counts SELECT kind, players, shown >> {BUCKET_BITS}, count(*) FROM ratings
    WHERE games >= {PROVISIONAL_GAMES} GROUP BY 1, 2, 3
"""
_BOARD = f"games >= {PROVISIONAL_GAMES}"  # an established rating: on its board

_SESSION = ("family, account_id, access_digest, access_expires, refresh_digest, "
            "refresh_expires, generation, created, previous_refresh, rotated, salt, rotated_by, "
            "repeats")
_SESSION_MARKS = ", ".join(["%s"] * len(_SESSION.split(", ")))
_UPDATE = ("seat, mu_before, sigma_before, games_before, wins_before, mu_after, sigma_after, "
           "games_after, wins_after, opponents")


def _session(row: Any) -> Session:
    return Session(*row)


def _session_row(session: Session) -> tuple[Any, ...]:
    return (session.family, session.account_id, session.access_digest,
            session.access_expires, session.refresh_digest, session.refresh_expires,
            session.generation, session.created, session.previous_refresh, session.rotated,
            session.salt, session.rotated_by, session.repeats)


def _migrate(db: Any) -> None:
    """The accounts' schema to SCHEMA_VERSION (under the connection's advisory lock)."""
    row = db.execute("SELECT value FROM accounts_meta WHERE key = 'schema_version'").fetchone()
    version = int(row[0]) if row is not None else 1
    if version > SCHEMA_VERSION:
        raise StoreUnusable(f"the database has accounts schema version {version}; this server "
                            f"knows up to {SCHEMA_VERSION}: run a newer Copas")
    if version < 2:
        for statement in SCHEMA_V2.split(";"):
            if statement.strip():
                db.execute(statement)
        rows = db.execute("SELECT account_id, display_name FROM accounts WHERE NOT is_deleted "
                          "ORDER BY created, account_id").fetchall()
        for key, account_id in unique_name_keys(rows):
            db.execute("UPDATE accounts SET name_key = %s WHERE account_id = %s",
                       (key, account_id))
        db.execute("CREATE UNIQUE INDEX accounts_by_name ON accounts (name_key) "
                   "WHERE name_key IS NOT NULL")
    if version < 3:
        for statement in SCHEMA_V3.split(";"):
            if statement.strip():
                db.execute(statement)
    if version < 4:
        for statement in SCHEMA_V4.split(";"):
            if statement.strip():
                db.execute(statement)
    db.execute("INSERT INTO accounts_meta VALUES ('schema_version', %s) ON CONFLICT (key) DO "
               "UPDATE SET value = excluded.value", (str(SCHEMA_VERSION),))


def _board_change(rows: Iterable[tuple[str, int, int, int]], by: int) -> Counter[Any]:
    """How rows (kind, players, shown, games) coming onto the board (``by`` 1) or leaving it
    (-1) change its histogram."""
    return Counter({key: by * n for key, n in Counter(
        (kind, players, shown >> BUCKET_BITS) for kind, players, shown, games in rows
        if games >= PROVISIONAL_GAMES).items()})


def _count(db: Any, change: Counter[Any]) -> None:
    """The histogram takes ``change``, bucket by bucket in one order (no deadlock)."""
    for (kind, players, bucket), n in sorted(change.items()):
        if n:
            db.execute("INSERT INTO board_counts VALUES (%s, %s, %s, %s) ON CONFLICT "
                       "(kind, players, bucket) DO UPDATE SET n = board_counts.n + excluded.n",
                       (kind, players, bucket, n))


def _key_on_board(db: Any, account_id: str, players: int, kind: str
                  ) -> tuple[int, int, str] | None:
    """The account's (shown, games, id) on the board, None when it is not on it."""
    row = db.execute(f"SELECT shown, games FROM ratings WHERE account_id = %s AND kind = %s "
                     f"AND players = %s AND {_BOARD}", (account_id, kind, players)).fetchone()
    return None if row is None else (int(row[0]), int(row[1]), account_id)


def _place(db: Any, kind: str, players: int, key: tuple[int, int, str]) -> int:
    """The place of ``key``: the buckets ahead of its own from the histogram, then three
    ranges of the board's index within its bucket."""
    shown, games, account_id = key
    board = f"FROM ratings WHERE kind = %(kind)s AND players = %(players)s AND {_BOARD}"
    ahead = db.execute(
        "SELECT (SELECT coalesce(sum(n), 0) FROM board_counts WHERE kind = %(kind)s AND "
        "players = %(players)s AND bucket > %(bucket)s) + "
        f"(SELECT count(*) {board} AND shown > %(shown)s AND shown < %(top)s) + "
        f"(SELECT count(*) {board} AND shown = %(shown)s AND games > %(games)s) + "
        f"(SELECT count(*) {board} AND shown = %(shown)s AND games = %(games)s "
        "AND account_id < %(id)s)",
        {"kind": kind, "players": players, "shown": shown, "games": games, "id": account_id,
         "bucket": shown >> BUCKET_BITS,
         "top": ((shown >> BUCKET_BITS) + 1) << BUCKET_BITS}).fetchone()[0]
    return int(ahead) + 1


def _walk(db: Any, kind: str, players: int, key: tuple[int, int, str], limit: int, *,
          is_ahead: bool) -> list[str]:
    """Up to ``limit`` ids of the board from ``key``: the ones ahead of it, nearest first, or
    itself and the ones after it, in the board's order (three ranges of the board's index)."""
    shown, games, account_id = key
    if is_ahead:
        ranges = (("shown = %(shown)s AND games = %(games)s AND account_id < %(id)s",
                   "account_id DESC"),
                  ("shown = %(shown)s AND games > %(games)s", "games, account_id DESC"),
                  ("shown > %(shown)s", "shown, games, account_id DESC"))
    else:
        ranges = (("shown = %(shown)s AND games = %(games)s AND account_id >= %(id)s",
                   "account_id"),
                  ("shown = %(shown)s AND games < %(games)s", "games DESC, account_id"),
                  ("shown < %(shown)s", "shown DESC, games DESC, account_id"))
    ids: list[str] = []
    for where, order in ranges:
        if len(ids) >= limit:
            break
        ids += [a for (a,) in db.execute(
            f"SELECT account_id FROM ratings WHERE kind = %(kind)s AND players = %(players)s "
            f"AND {_BOARD} AND {where} ORDER BY {order} LIMIT %(limit)s",
            {"kind": kind, "players": players, "shown": shown, "games": games,
             "id": account_id, "limit": limit - len(ids)})]
    return ids


def _lines(db: Any, kind: str, players: int, first: int, ids: list[str]) -> list[Ranked]:
    """The board's lines for ``ids`` (in its order, the first at place ``first``)."""
    if not ids:
        return []
    rows = {a: (name, Rating(mu, sigma, games, wins)) for a, name, mu, sigma, games, wins in
            db.execute("SELECT r.account_id, a.display_name, r.mu, r.sigma, r.games, r.wins "
                       "FROM ratings r JOIN accounts a ON a.account_id = r.account_id "
                       "WHERE r.kind = %s AND r.players = %s AND r.account_id = ANY(%s)",
                       (kind, players, ids))}
    return [Ranked(first + n, a, *rows[a]) for n, a in enumerate(ids) if a in rows]


def _key_of(account: Account) -> str | None:
    return None if account.is_deleted or not account.display_name \
        else name_key(account.display_name)


class PgAccountStore:
    """The ``AccountStore`` of a cluster."""

    def __init__(self, dsn: str) -> None:
        self._connection = PgConnection(dsn, SCHEMA, 7031980, "the accounts'", _migrate)

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
            if db.execute("INSERT INTO accounts (account_id, display_name, created, is_banned, "
                          "is_deleted, name_key, last_seen) VALUES (%s, %s, %s, %s, %s, %s, %s) "
                          "ON CONFLICT DO NOTHING",
                          (account.id, account.display_name, account.created, account.is_banned,
                           account.is_deleted, _key_of(account), account.created)
                          ).rowcount == 0:
                raise NameTaken(account.display_name)
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

    async def deleted_among(self, account_ids: list[str]) -> set[str]:
        return {a for (a,) in await self._do(lambda db: db.execute(
            "SELECT account_id FROM accounts WHERE account_id = ANY(%s) AND is_deleted",
            (account_ids,)).fetchall())} if account_ids else set()

    async def save_account(self, account: Account) -> None:
        def body(db: Any) -> None:
            key = _key_of(account)
            if key is not None and db.execute(
                    "SELECT 1 FROM accounts WHERE name_key = %s AND account_id != %s",
                    (key, account.id)).fetchone() is not None:
                raise NameTaken(account.display_name)
            db.execute("UPDATE accounts SET display_name = %s, is_banned = %s, is_deleted = %s, "
                       "name_key = %s WHERE account_id = %s",
                       (account.display_name, account.is_banned, account.is_deleted, key,
                        account.id))
        try:
            await self._do(body)
        except _unique_violation():  # another rename took the name meanwhile
            raise NameTaken(account.display_name) from None

    async def start_session(self, session: Session, keep: int = SESSIONS_KEPT) -> None:
        def body(db: Any) -> None:
            db.execute(f"INSERT INTO sessions ({_SESSION}) VALUES ({_SESSION_MARKS})",
                       _session_row(session))
            db.execute("UPDATE accounts SET last_seen = %s WHERE account_id = %s",
                       (session.created, session.account_id))
            doomed = [f for (f,) in db.execute(
                "DELETE FROM sessions WHERE family IN (SELECT family FROM sessions WHERE "
                "account_id = %s ORDER BY created DESC, family DESC OFFSET %s) "
                "RETURNING family", (session.account_id, keep))]
            if doomed:
                db.execute("DELETE FROM used_refresh WHERE family = ANY(%s)", (doomed,))
        await self._do(body)

    async def session_by_access(self, digest: str) -> Session | None:
        def body(db: Any) -> Session | None:
            row = db.execute(f"SELECT {_SESSION} FROM sessions WHERE access_digest = %s",
                             (digest,)).fetchone()
            return None if row is None else _session(row)
        return await self._do(body)

    async def session_and_account(self, digest: str) -> tuple[Session | None, Account | None]:
        def body(db: Any) -> tuple[Session | None, Account | None]:
            row = db.execute(f"SELECT {_SESSION} FROM sessions WHERE access_digest = %s",
                             (digest,)).fetchone()
            if row is None:
                return None, None
            session = _session(row)
            row = db.execute("SELECT account_id, display_name, created, is_banned, is_deleted "
                             "FROM accounts WHERE account_id = %s",
                             (session.account_id,)).fetchone()
            return session, None if row is None else Account(*row)
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
                "refresh_digest = %s, refresh_expires = %s, generation = %s, "
                "previous_refresh = %s, rotated = %s, rotated_by = %s, repeats = 0 "
                "WHERE family = %s AND refresh_digest = %s",
                (new.access_digest, new.access_expires, new.refresh_digest,
                 new.refresh_expires, new.generation, new.previous_refresh, new.rotated,
                 new.rotated_by, old.family, old.refresh_digest)).rowcount
            if not changed:
                return False
            db.execute("UPDATE accounts SET last_seen = %s WHERE account_id = %s",
                       (new.rotated, new.account_id))
            db.execute("INSERT INTO used_refresh VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                       (old.refresh_digest, old.family, old.generation))
            db.execute("DELETE FROM used_refresh WHERE family = %s AND generation <= %s",
                       (old.family, old.generation - USED_REFRESH_KEPT))
            return True
        return await self._do(body)

    async def repeat(self, session: Session) -> bool:
        return bool(await self._do(lambda db: db.execute(
            "UPDATE sessions SET repeats = repeats + 1 WHERE family = %s AND "
            "refresh_digest = %s AND repeats = 0",
            (session.family, session.refresh_digest)).rowcount))

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

    async def sessions_of(self, account_id: str) -> int:
        return int(await self._do(lambda db: db.execute(
            "SELECT count(*) FROM sessions WHERE account_id = %s", (account_id,)
        ).fetchone()[0]))

    async def sweep(self, now: float, idle_guests_before: float) -> tuple[int, int]:
        def body(db: Any) -> tuple[int, int]:
            expired = [f for (f,) in db.execute(
                "DELETE FROM sessions WHERE refresh_expires <= %s RETURNING family", (now,))]
            if expired:
                db.execute("DELETE FROM used_refresh WHERE family = ANY(%s)", (expired,))
            guests = [a for (a,) in db.execute(
                "SELECT a.account_id FROM accounts a WHERE a.last_seen < %s AND a.created < %s "
                "AND NOT a.is_banned AND NOT a.is_deleted "
                "AND EXISTS (SELECT 1 FROM identities i WHERE i.account_id = a.account_id) "
                "AND NOT EXISTS (SELECT 1 FROM identities i WHERE i.account_id = a.account_id "
                "                AND i.method != 'device') "
                "AND NOT EXISTS (SELECT 1 FROM history h WHERE h.account_id = a.account_id "
                "                AND h.is_rated) "
                "FOR UPDATE OF a SKIP LOCKED", (idle_guests_before, idle_guests_before))]
            if guests:
                families = [f for (f,) in db.execute(
                    "DELETE FROM sessions WHERE account_id = ANY(%s) RETURNING family",
                    (guests,))]
                db.execute("DELETE FROM used_refresh WHERE family = ANY(%s)", (families,))
                db.execute("DELETE FROM identities WHERE account_id = ANY(%s)", (guests,))
                db.execute("DELETE FROM history WHERE account_id = ANY(%s)", (guests,))
                db.execute("DELETE FROM accounts WHERE account_id = ANY(%s)", (guests,))
            return len(expired), len(guests)
        return await self._do(body)

    async def ratings(self, account_id: str, kind: str = DEFAULT_KIND) -> dict[int, Rating]:
        def body(db: Any) -> dict[int, Rating]:
            return {p: Rating(mu, sigma, games, wins) for p, mu, sigma, games, wins in db.execute(
                "SELECT players, mu, sigma, games, wins FROM ratings WHERE account_id = %s "
                "AND kind = %s AND games > 0", (account_id, kind))}
        return await self._do(body)

    async def record_game(self, game: FinishedGame, compute: RatingUpdate
                          ) -> list[Update] | None:
        def body(db: Any) -> list[Update] | None:
            if db.execute("INSERT INTO recorded_games VALUES (%s) ON CONFLICT DO NOTHING",
                          (game.record_id,)).rowcount == 0:
                return None
            gone = {a for (a,) in db.execute(  # deleted meanwhile: nothing of theirs is kept
                "SELECT account_id FROM accounts WHERE account_id = ANY(%s) AND is_deleted",
                ([p.account_id for p in game.places],))}
            updates: list[Update] = []
            if game.is_rated:
                ids = [p.account_id for p in game.places]
                for account_id in sorted(ids):  # rows to lock, in one order (no deadlock)
                    db.execute("INSERT INTO ratings (account_id, kind, players) VALUES "
                               "(%s, %s, %s) ON CONFLICT DO NOTHING",
                               (account_id, game.kind, game.players))
                rows: dict[str, Rating] = {}
                shown: dict[str, int] = {}
                for a, mu, sigma, games, wins, shown[a] in db.execute(
                        "SELECT account_id, mu, sigma, games, wins, shown FROM ratings WHERE "
                        "kind = %s AND players = %s AND account_id = ANY(%s) "
                        "ORDER BY account_id FOR UPDATE", (game.kind, game.players, ids)):
                    rows[a] = Rating(mu, sigma, games, wins)
                updates = compute([rows[a] for a in ids])
                by_seat = {p.seat: p.account_id for p in game.places}
                change: Counter[Any] = Counter()
                for update in updates:
                    rating = update.after
                    if by_seat[update.seat] in gone:
                        change.update(_board_change(db.execute(
                            "DELETE FROM ratings WHERE account_id = %s RETURNING kind, "
                            "players, shown, games", (by_seat[update.seat],)), -1))
                    else:  # (it is gone of every kind, above)
                        account_id = by_seat[update.seat]
                        change.update(_board_change([(game.kind, game.players,
                                                      shown[account_id],
                                                      rows[account_id].games)], -1))
                        change.update(_board_change([(game.kind, game.players, rating.shown,
                                                      rating.games)], 1))
                        db.execute(
                            "UPDATE ratings SET mu = %s, sigma = %s, games = %s, wins = %s, "
                            "shown = %s WHERE account_id = %s AND kind = %s AND players = %s",
                            (rating.mu, rating.sigma, rating.games, rating.wins,
                             rating.shown, by_seat[update.seat], game.kind, game.players))
                    db.execute(f"INSERT INTO game_ratings (record_id, {_UPDATE}) VALUES "
                               "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO "
                               "NOTHING", (game.record_id, *update_row(update)))
                _count(db, change)
            moved = {u.seat: u for u in updates}
            for placed in game.places:
                if placed.account_id in gone:
                    continue
                line = history_line(game, placed, moved.get(placed.seat))
                db.execute("INSERT INTO history (account_id, finished, record_id, table_name, "
                           "players, place, points, is_rated, rating_after, rating_change, "
                           "kind) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                           "ON CONFLICT DO NOTHING",
                           (placed.account_id, line.finished, line.record_id, line.table_name,
                            line.players, line.place, line.points, line.is_rated,
                            line.rating_after, line.rating_change, line.kind))
            return updates
        return await self._do(body)

    async def game_ratings(self, record_id: str) -> list[Update]:
        return [update_of(row) for row in await self._do(lambda db: db.execute(
            f"SELECT {_UPDATE} FROM game_ratings WHERE record_id = %s ORDER BY seat",
            (record_id,)).fetchall())]

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
                "rating_after, rating_change, kind FROM history WHERE account_id = %s AND "
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

    async def leaderboard(self, players: int, offset: int, limit: int,
                          kind: str = DEFAULT_KIND) -> list[Ranked]:
        def body(db: Any) -> list[Ranked]:
            found = bucket_holding(db.execute(
                "SELECT bucket, n FROM board_counts WHERE kind = %s AND players = %s "
                "ORDER BY bucket DESC", (kind, players)), offset)
            if found is None:
                return []
            bucket, ahead = found
            ids = [a for (a,) in db.execute(  # from that bucket on, along the board's index
                f"SELECT account_id FROM ratings WHERE kind = %s AND players = %s AND {_BOARD} "
                "AND shown < %s ORDER BY shown DESC, games DESC, account_id LIMIT %s OFFSET %s",
                (kind, players, (bucket + 1) << BUCKET_BITS, limit, offset - ahead))]
            return _lines(db, kind, players, offset + 1, ids)
        return await self._do(body)

    async def place_of(self, account_id: str, players: int, kind: str = DEFAULT_KIND
                       ) -> int | None:
        def body(db: Any) -> int | None:
            key = _key_on_board(db, account_id, players, kind)
            return None if key is None else _place(db, kind, players, key)
        return await self._do(body)

    async def around(self, account_id: str, players: int, size: int,
                     kind: str = DEFAULT_KIND) -> list[Ranked] | None:
        def body(db: Any) -> list[Ranked] | None:
            key = _key_on_board(db, account_id, players, kind)
            if key is None:
                return None
            before = _walk(db, kind, players, key, size // 2, is_ahead=True)[::-1]
            ids = before + _walk(db, kind, players, key, size - len(before), is_ahead=False)
            return _lines(db, kind, players, _place(db, kind, players, key) - len(before), ids)
        return await self._do(body)

    async def forget_games(self, account_id: str) -> None:
        def body(db: Any) -> None:
            _count(db, _board_change(db.execute(
                "DELETE FROM ratings WHERE account_id = %s RETURNING kind, players, shown, "
                "games", (account_id,)).fetchall(), -1))
            db.execute("DELETE FROM history WHERE account_id = %s", (account_id,))
        await self._do(body)


def _unique_violation() -> type[Exception]:
    import psycopg

    return psycopg.errors.UniqueViolation

"""What accounts keep, and the port they keep it behind: ``AccountStore``, implemented in memory
here (tests, ``--data-dir memory``) and by the durable stores. Every method is one transaction;
a write returns once it is durable."""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Protocol

from server.accounts.ratings import DEFAULT_KIND, Rating, Update
from server.names import name_key


class Method(StrEnum):
    """A way to sign in."""

    DEVICE = "device"
    PASSWORD = "password"
    OIDC = "oidc"


@dataclass(frozen=True, slots=True)
class Account:
    """A person who comes back."""

    id: str
    """``a_`` and random characters; shown to nobody but the person and operators."""
    display_name: str
    """The name seats take unless a join gives one."""
    created: float
    """When it was made (seconds since the epoch)."""
    is_banned: bool = False
    """An operator banned it: no sign-in, no seat."""
    is_deleted: bool = False
    """Deleted on request: records keep its games but no longer name it."""


@dataclass(frozen=True, slots=True)
class Identity:
    """One way an account signs in."""

    method: Method
    """Which way."""
    key: str
    """What it is found by: a device secret's digest, a username (lower case), or an OIDC
    issuer and subject."""
    account_id: str
    """The account it signs in."""
    secret: str = ""
    """A password's argon2id hash (empty for the others)."""


@dataclass(frozen=True, slots=True)
class Session:
    """One sign-in: an access token and the refresh token that renews it. Rotating keeps the
    family; reusing an old refresh token ends the family."""

    family: str
    """Its id, the same across rotations."""
    account_id: str
    """Whose it is."""
    access_digest: str
    """The current access token's digest."""
    access_expires: float
    """When the access token stops working."""
    refresh_digest: str
    """The current refresh token's digest."""
    refresh_expires: float
    """When the refresh token stops working."""
    generation: int = 0
    """How many times it was refreshed."""
    created: float = 0.0
    """When it signed in (the oldest go first past an account's cap)."""
    previous_refresh: str = ""
    """The refresh token's digest before the last rotation: presented again within the grace
    after ``rotated`` (two tabs, a retry), it answers the same new tokens."""
    rotated: float = 0.0
    """When it was last refreshed."""
    salt: str = ""
    """The secret the next tokens are derived with from the refresh token presented, so a
    repeat within the grace gets the same ones (``server.accounts.service``)."""
    rotated_by: str = ""
    """The network of the client that made the last rotation (a tag of it): a repeat is
    answered only from there."""
    repeats: int = 0
    """Repeats of the last rotation answered (one at most)."""


@dataclass(frozen=True, slots=True)
class Ranked:
    """One line of a leaderboard."""

    place: int
    """1 = the top."""
    account_id: str
    """Whose line it is."""
    display_name: str
    """The account's name."""
    rating: Rating
    """Its rating in this kind of game."""


@dataclass(frozen=True, slots=True)
class Placed:
    """One account's result in a finished game."""

    account_id: str
    """Who."""
    place: int
    """1-based; tied players share a place."""
    points: int
    """Game points (fewer is better)."""
    seat: int = -1
    """Its seat."""
    has_played: bool = True
    """Its person played the game (``ratings.has_played``)."""
    network: str = ""
    """Its network's tag at this table ("" unknown)."""
    has_left: bool = False
    """Its person left before the game's end."""


@dataclass(frozen=True, slots=True)
class FinishedGame:
    """A finished game, as the accounts of its seats keep it."""

    record_id: str
    """Its game record (GetGameRecord)."""
    table_name: str
    """The table's name."""
    finished: float
    """When it ended (seconds since the epoch)."""
    players: int
    """The kind of game: how many seats."""
    places: tuple[Placed, ...]
    """The accounts' results (seats without an account are not listed)."""
    is_rated: bool
    """Whether it may move ratings (RULES.md's "Rated games": who moves is
    ``ratings.rate_game``'s)."""
    kind: str = DEFAULT_KIND
    """With ``players``, the kind of game whose ratings it moves (``ratings.rating_kind``)."""


@dataclass(frozen=True, slots=True)
class PlayedGame:
    """One line of an account's history."""

    record_id: str
    """Its game record."""
    table_name: str
    """The table's name."""
    finished: float
    """When it ended."""
    players: int
    """How many seats."""
    place: int
    """The account's place."""
    points: int
    """The account's game points."""
    is_rated: bool
    """Whether it moved the rating."""
    rating_after: int
    """The shown rating after it (0 when unrated)."""
    rating_change: int
    """How the shown rating moved."""
    kind: str = DEFAULT_KIND
    """The kind of game (``ratings.rating_kind``), with ``players``."""


RatingUpdate = Callable[[list[Rating]], list[Update]]
"""The ratings of a game's ``places`` before it -> how each seat's moved."""


class IdentityTaken(Exception):
    """The identity's key already belongs to an account."""


class NameTaken(Exception):
    """Another account's name looks the same (``server.names.name_key``)."""


SESSIONS_KEPT = 10  # an account's sessions at once: a new sign-in ends the oldest beyond


class AccountStore(Protocol):
    async def identity(self, method: Method, key: str) -> Identity | None: ...
    async def identities(self, account_id: str) -> list[Identity]: ...
    async def account(self, account_id: str) -> Account | None: ...
    async def create(self, account: Account, identity: Identity) -> None:
        """:raises IdentityTaken: another account has the identity (nothing is written).
        :raises NameTaken: another account's name looks the same (nothing is written)."""
    async def link(self, identity: Identity) -> None:
        """:raises IdentityTaken: another account has the identity."""
    async def unlink(self, method: Method, key: str) -> None: ...
    async def save_account(self, account: Account) -> None:
        """:raises NameTaken: another account's name looks the same (nothing is written)."""
    async def banned_among(self, account_ids: list[str]) -> set[str]:
        """Those of ``account_ids`` banned (or deleted)."""
    async def deleted_among(self, account_ids: list[str]) -> set[str]:
        """Those of ``account_ids`` deleted."""
    async def start_session(self, session: Session, keep: int = SESSIONS_KEPT) -> None:
        """A new sign-in; the account's oldest sessions beyond ``keep`` end, and the account
        was seen now."""
    async def session_by_access(self, digest: str) -> Session | None: ...
    async def session_and_account(self, digest: str) -> tuple[Session | None, Account | None]:
        """``session_by_access`` and, if found, its account, in one read (an authenticated
        call's)."""
    async def session_by_refresh(self, digest: str) -> tuple[Session | None, bool]:
        """The session whose current refresh token has ``digest`` (and True), or whose
        earlier one had it (and False: a reuse), or (None, False)."""
    async def rotate(self, old: Session, new: Session) -> bool:
        """Replace ``old`` by ``new`` if ``old`` is still current (False: it was rotated or
        ended meanwhile; nothing written); the account was seen at ``new.rotated``."""
    async def repeat(self, session: Session) -> bool:
        """Counts one repeat of ``session``'s last rotation, if none was (else False: a
        second repeat is a copy's)."""
    async def end_family(self, family: str) -> None: ...
    async def end_sessions(self, account_id: str) -> int:
        """End every session of the account; returns how many."""
    async def sessions_of(self, account_id: str) -> int:
        """How many sessions the account has."""
    async def sweep(self, now: float, idle_guests_before: float) -> tuple[int, int]:
        """Sessions whose refresh token expired end, and idle guests go (their history with
        them): accounts that sign in only by a device, have no rated game and were neither
        made nor seen since ``idle_guests_before``. Returns (sessions, guests) removed."""
    async def ratings(self, account_id: str, kind: str = DEFAULT_KIND) -> dict[int, Rating]:
        """The account's ratings in games of ``kind``, by player count."""
    async def record_game(self, game: FinishedGame, compute: RatingUpdate
                          ) -> list[Update] | None:
        """Take one finished game into its accounts' histories exactly once, and when it is
        rated, read their ratings for games of its kind and player count, ``compute`` how they
        move and write them, and each seat's update beside the game (``game_ratings``), all in
        one transaction. Returns the updates ([] for an unrated game), or None when the game was
        recorded already (nothing written)."""
    async def game_ratings(self, record_id: str) -> list[Update]:
        """How a game moved its seats' ratings (kept when an account is deleted)."""
    async def is_recorded(self, record_id: str) -> bool: ...
    async def games_of(self, account_id: str, limit: int,
                       before: tuple[float, str] | None) -> list[PlayedGame]:
        """The account's games, newest first, older than ``before`` (finish time, record)."""
    async def totals(self, account_id: str) -> tuple[int, int, float]:
        """The account's games, wins and average place over every game recorded."""
    async def leaderboard(self, players: int, offset: int, limit: int,
                          kind: str = DEFAULT_KIND) -> list[Ranked]:
        """Established accounts (``Rating.is_provisional`` not) in games of ``kind`` and
        ``players`` by shown rating (then games, then id), from place ``offset + 1``."""
    async def place_of(self, account_id: str, players: int, kind: str = DEFAULT_KIND
                       ) -> int | None:
        """The account's place on the leaderboard of ``kind`` and ``players`` (1 = top), if
        on it."""
    async def around(self, account_id: str, players: int, size: int,
                     kind: str = DEFAULT_KIND) -> list[Ranked] | None:
        """The page of ``size`` lines with the account in its middle: ``size // 2`` lines
        before it (fewer near the top) and the rest from it on, as ``leaderboard`` from
        ``max(place - 1 - size // 2, 0)`` would answer; None when it is not on the board."""
    async def forget_games(self, account_id: str) -> None:
        """The account's ratings and history go (it was deleted): it leaves every leaderboard
        and no listing links it to its games."""



USED_REFRESH_KEPT = 16  # a family remembers this many of its old refresh tokens (reuse check)


def history_line(game: FinishedGame, placed: Placed, update: Update | None) -> PlayedGame:
    """The account's line for ``game`` (its rating's move, if the game moved it)."""
    return PlayedGame(game.record_id, game.table_name, game.finished, game.players,
                      placed.place, placed.points, update is not None,
                      update.after.shown if update is not None else 0,
                      update.after.shown - update.before.shown if update is not None else 0,
                      game.kind)


def is_never_used_guest(identities: list[Identity], games: int, account: Account,
                        seen: float, before: float) -> bool:
    """A guest to forget (``AccountStore.sweep``)."""
    return (bool(identities) and all(i.method is Method.DEVICE for i in identities)
            and not games and not account.is_banned and account.created < before
            and seen < before)


class MemoryAccountStore:
    """The in-memory ``AccountStore``: nothing survives a restart."""

    def __init__(self) -> None:
        self._accounts: dict[str, Account] = {}
        self._names: dict[str, str] = {}  # name_key -> account id
        self._seen: dict[str, float] = {}
        self._identities: dict[tuple[Method, str], Identity] = {}
        self._sessions: dict[str, Session] = {}  # family -> session
        self._by_access: dict[str, str] = {}
        self._by_refresh: dict[str, str] = {}
        self._used_refresh: dict[str, str] = {}  # an old refresh digest -> its family
        self._used_order: dict[str, list[str]] = {}
        self._ratings: dict[str, dict[tuple[str, int], Rating]] = {}  # by (kind, players)
        self._recorded: set[str] = set()
        self._game_ratings: dict[str, list[Update]] = {}
        self._history: dict[str, list[PlayedGame]] = {}
        self._boards: dict[tuple[str, int], list[tuple[int, int, str]]] = {}  # sorted keys

    def __len__(self) -> int:
        """How many accounts it holds."""
        return len(self._accounts)

    async def identity(self, method: Method, key: str) -> Identity | None:
        return self._identities.get((method, key))

    async def identities(self, account_id: str) -> list[Identity]:
        return sorted((i for i in self._identities.values() if i.account_id == account_id),
                      key=lambda i: (i.method.value, i.key))

    async def account(self, account_id: str) -> Account | None:
        return self._accounts.get(account_id)

    def _check_name(self, account: Account) -> str:
        key = name_key(account.display_name) if not account.is_deleted else ""
        holder = self._names.get(key) if key else None
        if holder is not None and holder != account.id:
            raise NameTaken(account.display_name)
        return key

    async def create(self, account: Account, identity: Identity) -> None:
        if (identity.method, identity.key) in self._identities:
            raise IdentityTaken(identity.method)
        key = self._check_name(account)
        self._accounts[account.id] = account
        self._names[key] = account.id
        self._seen[account.id] = account.created
        self._identities[identity.method, identity.key] = identity

    async def link(self, identity: Identity) -> None:
        found = self._identities.get((identity.method, identity.key))
        if found is not None and found.account_id != identity.account_id:
            raise IdentityTaken(identity.method)
        self._identities[identity.method, identity.key] = identity

    async def unlink(self, method: Method, key: str) -> None:
        self._identities.pop((method, key), None)

    async def banned_among(self, account_ids: list[str]) -> set[str]:
        return {a for a in account_ids if (found := self._accounts.get(a)) is not None
                and (found.is_banned or found.is_deleted)}

    async def deleted_among(self, account_ids: list[str]) -> set[str]:
        return {a for a in account_ids if (found := self._accounts.get(a)) is not None
                and found.is_deleted}

    async def save_account(self, account: Account) -> None:
        key = self._check_name(account)
        old = self._accounts.get(account.id)
        if old is not None:
            self._names.pop(name_key(old.display_name), None) \
                if self._names.get(name_key(old.display_name)) == account.id else None
        self._accounts[account.id] = account
        if key:
            self._names[key] = account.id

    async def start_session(self, session: Session, keep: int = SESSIONS_KEPT) -> None:
        self._add_session(session)
        self._seen[session.account_id] = session.created
        mine = sorted((s for s in self._sessions.values() if s.account_id == session.account_id),
                      key=lambda s: (s.created, s.family))
        for old in mine[:max(len(mine) - keep, 0)]:
            await self.end_family(old.family)

    def _add_session(self, session: Session) -> None:
        self._sessions[session.family] = session
        self._by_access[session.access_digest] = session.family
        self._by_refresh[session.refresh_digest] = session.family

    async def session_by_access(self, digest: str) -> Session | None:
        family = self._by_access.get(digest)
        return None if family is None else self._sessions.get(family)

    async def session_and_account(self, digest: str) -> tuple[Session | None, Account | None]:
        session = await self.session_by_access(digest)
        return session, None if session is None else self._accounts.get(session.account_id)

    async def session_by_refresh(self, digest: str) -> tuple[Session | None, bool]:
        family = self._by_refresh.get(digest)
        if family is not None:
            return self._sessions.get(family), True
        family = self._used_refresh.get(digest)
        if family is not None and family in self._sessions:
            return self._sessions[family], False
        return None, False

    async def rotate(self, old: Session, new: Session) -> bool:
        if self._sessions.get(old.family) != old:
            return False
        self._by_access.pop(old.access_digest, None)
        self._by_refresh.pop(old.refresh_digest, None)
        used = self._used_order.setdefault(old.family, [])
        used.append(old.refresh_digest)
        self._used_refresh[old.refresh_digest] = old.family
        while len(used) > USED_REFRESH_KEPT:
            self._used_refresh.pop(used.pop(0), None)
        self._add_session(new)
        self._seen[new.account_id] = new.rotated
        return True

    async def repeat(self, session: Session) -> bool:
        current = self._sessions.get(session.family)
        if current is None or current.refresh_digest != session.refresh_digest \
                or current.repeats:
            return False
        self._sessions[session.family] = replace(current, repeats=1)
        return True

    async def end_family(self, family: str) -> None:
        session = self._sessions.pop(family, None)
        if session is not None:
            self._by_access.pop(session.access_digest, None)
            self._by_refresh.pop(session.refresh_digest, None)
        for digest in self._used_order.pop(family, []):
            self._used_refresh.pop(digest, None)

    async def end_sessions(self, account_id: str) -> int:
        families = [s.family for s in self._sessions.values() if s.account_id == account_id]
        for family in families:
            await self.end_family(family)
        return len(families)

    async def sessions_of(self, account_id: str) -> int:
        return sum(1 for s in self._sessions.values() if s.account_id == account_id)

    async def sweep(self, now: float, idle_guests_before: float) -> tuple[int, int]:
        expired = [s.family for s in self._sessions.values() if s.refresh_expires <= now]
        for family in expired:
            await self.end_family(family)
        guests = [a for a in list(self._accounts.values()) if is_never_used_guest(
            await self.identities(a.id), sum(g.is_rated for g in self._history.get(a.id, [])),
            a, self._seen.get(a.id, a.created), idle_guests_before)]
        for account in guests:
            await self.end_sessions(account.id)
            for identity in await self.identities(account.id):
                await self.unlink(identity.method, identity.key)
            self._names.pop(name_key(account.display_name), None)
            del self._accounts[account.id]
            self._seen.pop(account.id, None)
            self._history.pop(account.id, None)
        return len(expired), len(guests)

    async def ratings(self, account_id: str, kind: str = DEFAULT_KIND) -> dict[int, Rating]:
        return {players: rating for (k, players), rating in self._ratings.get(account_id, {})
                .items() if k == kind}

    async def record_game(self, game: FinishedGame, compute: RatingUpdate
                          ) -> list[Update] | None:
        if game.record_id in self._recorded:
            return None
        gone = {p.account_id for p in game.places
                if (a := self._accounts.get(p.account_id)) is not None and a.is_deleted}
        updates: list[Update] = []
        if game.is_rated:
            key = (game.kind, game.players)
            before = [self._ratings.get(p.account_id, {}).get(key, Rating())
                      for p in game.places]
            updates = compute(before)
            by_seat = {p.seat: p.account_id for p in game.places}
            for update in updates:
                if by_seat[update.seat] not in gone:
                    self._rate(by_seat[update.seat], key, update.after)
            self._game_ratings[game.record_id] = updates
        moved = {u.seat: u for u in updates}
        for placed in game.places:
            if placed.account_id in gone:
                continue
            self._history.setdefault(placed.account_id, []).append(
                history_line(game, placed, moved.get(placed.seat)))
        self._recorded.add(game.record_id)
        return updates

    async def game_ratings(self, record_id: str) -> list[Update]:
        return list(self._game_ratings.get(record_id, []))

    async def is_recorded(self, record_id: str) -> bool:
        return record_id in self._recorded

    async def games_of(self, account_id: str, limit: int,
                       before: tuple[float, str] | None) -> list[PlayedGame]:
        games = sorted(self._history.get(account_id, []),
                       key=lambda g: (g.finished, g.record_id), reverse=True)
        return [g for g in games if before is None
                or (g.finished, g.record_id) < before][:limit]

    async def totals(self, account_id: str) -> tuple[int, int, float]:
        games = self._history.get(account_id, [])
        if not games:
            return 0, 0, 0.0
        return (len(games), sum(g.place == 1 for g in games),
                sum(g.place for g in games) / len(games))

    def _rate(self, account_id: str, board: tuple[str, int], rating: Rating | None) -> None:
        """The account's rating on ``board`` becomes ``rating`` (None: it goes), and the
        board's sorted keys with it."""
        ratings = self._ratings.setdefault(account_id, {})
        keys = self._boards.setdefault(board, [])
        old = ratings.pop(board, None)
        if old is not None and not old.is_provisional:
            del keys[bisect.bisect_left(keys, _board_key(account_id, old))]
        if rating is not None:
            ratings[board] = rating
            if not rating.is_provisional:
                bisect.insort(keys, _board_key(account_id, rating))

    def _line(self, place: int, key: tuple[int, int, str], board: tuple[str, int]) -> Ranked:
        account_id = key[2]
        return Ranked(place, account_id, self._accounts[account_id].display_name,
                      self._ratings[account_id][board])

    async def leaderboard(self, players: int, offset: int, limit: int,
                          kind: str = DEFAULT_KIND) -> list[Ranked]:
        board = (kind, players)
        keys = self._boards.get(board, [])[offset:offset + limit]
        return [self._line(offset + n + 1, key, board) for n, key in enumerate(keys)]

    async def forget_games(self, account_id: str) -> None:
        for board in list(self._ratings.get(account_id, {})):
            self._rate(account_id, board, None)
        self._ratings.pop(account_id, None)
        self._history.pop(account_id, None)

    async def place_of(self, account_id: str, players: int, kind: str = DEFAULT_KIND
                       ) -> int | None:
        rating = self._ratings.get(account_id, {}).get((kind, players))
        if rating is None or rating.is_provisional:
            return None
        keys = self._boards[(kind, players)]
        return bisect.bisect_left(keys, _board_key(account_id, rating)) + 1

    async def around(self, account_id: str, players: int, size: int,
                     kind: str = DEFAULT_KIND) -> list[Ranked] | None:
        place = await self.place_of(account_id, players, kind)
        if place is None:
            return None
        return await self.leaderboard(players, max(place - 1 - size // 2, 0), size, kind)


def _board_key(account_id: str, rating: Rating) -> tuple[int, int, str]:
    """Where a rating sorts on its board: shown down, then games down, then account id up."""
    return -rating.shown, -rating.games, account_id


def renamed(account: Account, name: str) -> Account:
    return replace(account, display_name=name)

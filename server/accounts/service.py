"""``Accounts``: sign-in by device, password or OIDC; sessions that refresh with rotation (a
reused refresh token ends its whole family, as OAuth 2.0's security practice says, except the
same token again within ``REFRESH_GRACE`` seconds of its rotation: two tabs, a retry, which get
the same new tokens); linking a second way to an account; the operators' rename, revoke, ban
and delete.

Accounts are bounded like every other resource: an account holds at most ``SESSIONS_KEPT``
sessions (a new sign-in ends the oldest), expired sessions are swept, and a guest never used
(no game, not signed in for ``guest_ttl``) goes. Names follow ``server.names``' one policy, and
no two accounts' names look the same (NAME_TAKEN).

Every refusal is a ``ServiceError`` with its reason; a refused call changed nothing. No secret
(device secret, password, token) is kept but as a digest or hash, or put in a message.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass, replace

import structlog

from server.accounts.attempts import AccountCreations, SignInAttempts
from server.accounts.credentials import (
    ACCESS_PREFIX,
    REFRESH_PREFIX,
    Passwords,
    check_password,
    device_digest,
    new_access_token,
    new_refresh_token,
    username_key,
)
from server.accounts.hashing import PasswordWork
from server.accounts.model import (
    SESSIONS_KEPT,
    Account,
    AccountStore,
    FinishedGame,
    Identity,
    IdentityTaken,
    Method,
    NameTaken,
    PlayedGame,
    Ranked,
    Session,
)
from server.accounts.oidc import OidcVerifier
from server.accounts.ratings import (
    DEFAULT_KIND,
    RATING_KINDS,
    Contender,
    Rating,
    Update,
    rate_game,
)
from server.bounded import Bounded
from server.errors import ServiceError
from server.names import person
from server.tokens import hash_token, network_tag

log = structlog.get_logger("copas.accounts")

ACCESS_TTL = 15 * 60.0  # seconds an access token works
REFRESH_TTL = 30 * 86400.0  # seconds a refresh token works (each refresh starts it again)
ACTIVE_SECONDS = 900.0  # an account signed in or seen within this is active
ACTIVE_KEPT = 100_000  # accounts remembered as recently seen (the least recent forgotten)
REFRESH_GRACE = 30.0  # seconds a rotated refresh token still answers the same new tokens
GUEST_TTL = 30 * 86400.0  # seconds a guest never used (no game) is kept after its last sign-in
SWEEP_INTERVAL = 3600.0  # seconds between sweeps of expired sessions and idle guests
DEFAULT_NAME_TRIES = 8  # default names drawn before a sign-in gives up (they never collide)


@dataclass(frozen=True, slots=True)
class Profile:
    """An account with its ways to sign in, ratings and totals."""

    account: Account
    """The account."""
    identities: tuple[Identity, ...]
    """How it signs in (secrets are digests or hashes)."""
    ratings: dict[tuple[str, int], Rating]
    """Its rating per kind of game (``ratings.rating_kind``) and player count."""
    places: dict[tuple[str, int], int]
    """Its place on each of those leaderboards."""
    games: int
    """Games finished."""
    wins: int
    """Games finished 1st."""
    average_place: float
    """The average place over them (0 without games)."""


@dataclass(frozen=True, slots=True)
class SignedIn:
    """What a sign-in or refresh answers."""

    account: Account
    """Who signed in."""
    access_token: str
    """The bearer token for calls (``authorization: Bearer ...``)."""
    refresh_token: str
    """Renews the access token, once: each refresh answers a new one."""
    access_expires: float
    """When ``access_token`` stops working (seconds since the epoch)."""
    refresh_expires: float
    """When ``refresh_token`` stops working."""
    is_new: bool
    """The account was created by this sign-in."""
    identities: tuple[Identity, ...] = ()
    """How it signs in (secrets are digests or hashes)."""


def _bad_credentials() -> ServiceError:
    return ServiceError.unauthenticated("these credentials do not sign in",
                                        "INVALID_CREDENTIALS")


def _revoked() -> ServiceError:
    return ServiceError.unauthenticated("this session has ended: sign in again",
                                        "SESSION_REVOKED")


def _banned() -> ServiceError:
    return ServiceError.denied("this account is banned", "ACCOUNT_BANNED")


def _name_taken() -> ServiceError:
    return ServiceError.already_exists("another account's name looks the same: choose another",
                                       "NAME_TAKEN")


def _derived(salt: str, refresh_token: str, kind: str) -> str:
    """The next token of a session, derived from the refresh token presented: the same
    presented twice (within the grace) gives the same tokens, and nobody derives them without
    both the session's salt and that refresh token."""
    mac = hmac.new(salt.encode(), f"{kind}:{refresh_token}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac).decode().rstrip("=")


class Accounts:
    def __init__(self, store: AccountStore, clock: Callable[[], float], *,
                 passwords: Passwords, verifier: OidcVerifier, attempts: SignInAttempts,
                 access_ttl: float = ACCESS_TTL, refresh_ttl: float = REFRESH_TTL,
                 guest_ttl: float = GUEST_TTL, sessions_kept: int = SESSIONS_KEPT,
                 is_one_network_rated: bool = False,
                 password_work: PasswordWork | None = None,
                 creations: AccountCreations | None = None) -> None:
        self._store = store
        self._clock = clock
        self._passwords = passwords
        self._verifier = verifier
        self._attempts = attempts
        self._access_ttl = access_ttl
        self._refresh_ttl = refresh_ttl
        self._guest_ttl = guest_ttl
        self._sessions_kept = sessions_kept
        self._is_one_network_rated = is_one_network_rated
        self._seen: Bounded[str, float] = Bounded(ACTIVE_KEPT, is_lru=True)  # id -> last use
        self.password_work = password_work or PasswordWork()  # argon2's turns, per address
        self._creations = creations or AccountCreations(clock, 0.0, 1.0)  # none: no limit

    # ------------------------------------------------------------ sign-in

    async def sign_in_device(self, secret: str, display_name: str, address: str = ""
                             ) -> SignedIn:
        """The device's account, created on its first sign-in (named ``display_name``, which
        the caller checked against the name policy; empty: a default name). ``address``: the
        caller's (its quota key), which new accounts are counted against.

        :raises ServiceError: WEAK_DEVICE_SECRET, NAME_TAKEN (a new account's name),
            TOO_MANY_ACCOUNTS, ...
        """
        key = device_digest(secret)
        found = await self._store.identity(Method.DEVICE, key)
        if found is not None:
            return await self._start(await self._usable(found.account_id), is_new=False)
        try:
            with self._creations.one(address):
                account = await self._create(display_name,
                                             lambda a: Identity(Method.DEVICE, key, a))
        except IdentityTaken:  # the same device signed in twice at once: the first won
            return await self.sign_in_device(secret, display_name, address)
        return await self._start(account, is_new=True)

    async def sign_up_password(self, username: str, password: str, display_name: str,
                               address: str = "") -> SignedIn:
        """A new account that signs in by username and password. A taken username is
        answered before any hash, and counts as one of the address's password checks.

        :raises ServiceError: IDENTITY_TAKEN, TOO_MANY_SIGN_INS, TOO_MANY_ACCOUNTS, ...
        """
        key = username_key(username)
        check_password(password)
        name = display_name or person(username)
        self.password_work.check(address)  # first: its refusal says nothing of the username
        if await self._store.identity(Method.PASSWORD, key) is not None:
            self.password_work.take(address)
            raise ServiceError.precondition("this username is taken", "IDENTITY_TAKEN")
        with self._creations.one(address):
            hashed = await self._hash(password, address)
            try:
                account = await self._create(
                    name, lambda a: Identity(Method.PASSWORD, key, a, hashed))
            except IdentityTaken:
                raise ServiceError.precondition("this username is taken",
                                                "IDENTITY_TAKEN") from None
        self._attempts.signed_in(key, address)
        return await self._start(account, is_new=True)

    async def sign_in_password(self, username: str, password: str, address: str) -> SignedIn:
        """The account of ``username``; the same answer, after the same work, whether the
        name is unknown or the password wrong."""
        key = username.lower()[:64]
        async with self._attempts.attempt(key, address) as attempt:  # refused, or held, here
            found = await self._store.identity(Method.PASSWORD, key)
            stored = found.secret if found is not None else None
            is_familiar = self._attempts.is_familiar(key, address)
            if not await self._verify(stored, password[:1024], address, is_familiar) \
                    or found is None:
                attempt.failed()
                raise _bad_credentials()
        self._attempts.signed_in(key, address)
        return await self._start(await self._usable(found.account_id), is_new=False)

    async def sign_in_oidc(self, id_token: str, display_name: str, address: str = ""
                           ) -> SignedIn:
        """The account of the ID token's issuer and subject, created on first use."""
        identity = await asyncio.to_thread(self._verifier.verify, id_token)
        found = await self._store.identity(Method.OIDC, identity.key)
        if found is not None:
            return await self._start(await self._usable(found.account_id), is_new=False)
        name = display_name or _claimed_name(identity.name)
        try:
            with self._creations.one(address):
                account = await self._create(
                    name, lambda a: Identity(Method.OIDC, identity.key, a),
                    is_name_chosen=bool(display_name))
        except IdentityTaken:
            return await self.sign_in_oidc(id_token, display_name, address)
        return await self._start(account, is_new=True)

    # ------------------------------------------------------------ sessions

    async def refresh(self, refresh_token: str, address: str = "") -> SignedIn:
        """A new access token and refresh token for ``refresh_token``, which stops working.
        An old refresh token presented again ends the session (someone copied it), but for
        one repeat of the last rotation within REFRESH_GRACE seconds from the network that
        made it (``address``: the caller's; two tabs, a retry), which gets the same tokens."""
        digest = hash_token(refresh_token)
        for _ in range(2):  # a second look when another refresh of it rotated it meanwhile
            session, is_current = await self._store.session_by_refresh(digest)
            if session is None:
                raise _revoked()
            now = self._clock()
            if not is_current:
                repeat = self._repeated(session, refresh_token, digest, now, address)
                if repeat is not None and await self._store.repeat(session):
                    return await self._signed_in(session.account_id, *repeat, session)
                await self._store.end_family(session.family)
                raise ServiceError.unauthenticated(
                    "this refresh token was already used: the session has ended, sign in again",
                    "SESSION_REVOKED")
            if session.refresh_expires <= now:
                await self._store.end_family(session.family)
                raise ServiceError.unauthenticated("this session expired: sign in again",
                                                   "SESSION_EXPIRED")
            await self._usable(session.account_id)
            access, refresh = self._next_tokens(session, refresh_token)
            new = replace(session, access_digest=hash_token(access),
                          access_expires=now + self._access_ttl, refresh_digest=hash_token(refresh),
                          refresh_expires=now + self._refresh_ttl,
                          generation=session.generation + 1, previous_refresh=digest, rotated=now,
                          rotated_by=network_tag(session.family, address), repeats=0)
            if await self._store.rotate(session, new):
                self._seen[session.account_id] = now
                return await self._signed_in(session.account_id, access, refresh, new)
        raise _revoked()

    def _next_tokens(self, session: Session, refresh_token: str) -> tuple[str, str]:
        """The access and refresh tokens that follow ``refresh_token`` (random for a session
        made before sessions had a salt)."""
        if not session.salt:
            return new_access_token(), new_refresh_token()
        return (ACCESS_PREFIX + _derived(session.salt, refresh_token, "access"),
                REFRESH_PREFIX + _derived(session.salt, refresh_token, "refresh"))

    def _repeated(self, session: Session, refresh_token: str, digest: str, now: float,
                  address: str) -> tuple[str, str] | None:
        """The tokens the last rotation answered, when ``refresh_token`` is the one it
        rotated and it comes again within REFRESH_GRACE from the network that rotated it and
        for the first time (else None: a reuse)."""
        if session.previous_refresh != digest or now - session.rotated > REFRESH_GRACE \
                or not session.salt or session.repeats \
                or session.rotated_by != network_tag(session.family, address):
            return None
        access, refresh = self._next_tokens(session, refresh_token)
        if not (hmac.compare_digest(hash_token(access), session.access_digest)
                and hmac.compare_digest(hash_token(refresh), session.refresh_digest)):
            return None
        return access, refresh

    async def _signed_in(self, account_id: str, access: str, refresh: str, session: Session
                         ) -> SignedIn:
        account = await self._usable(account_id)
        return SignedIn(account, access, refresh, session.access_expires,
                        session.refresh_expires, False,
                        tuple(await self._store.identities(account_id)))

    async def authenticate(self, access_token: str) -> Account:
        """The account an access token signs in.

        :raises ServiceError: SESSION_EXPIRED (refresh it), SESSION_REVOKED, ACCOUNT_BANNED.
        """
        return await self.authenticate_digest(hash_token(access_token))

    async def authenticate_digest(self, digest: str) -> Account:
        """``authenticate`` for the digest of an access token (the gateway keeps only that)."""
        session, account = await self._store.session_and_account(digest)  # one read
        if session is None:
            raise _revoked()
        if session.access_expires <= self._clock():
            raise ServiceError.unauthenticated(
                "this access token expired: refresh it", "SESSION_EXPIRED")
        account = self._checked(account)
        self._seen[account.id] = self._clock()
        return account

    async def is_signed_in(self, account_id: str) -> bool:
        """Whether ``account_id`` has a session anywhere (after signing out everywhere, or an
        operator's revoke, it has none until its person signs in again)."""
        return await self._store.sessions_of(account_id) > 0

    async def sign_out(self, access_digest: str) -> int:
        """End the session of the access token of ``access_digest`` (its refresh token too);
        returns how many sessions ended (0 or 1)."""
        session = await self._store.session_by_access(access_digest)
        if session is None:
            return 0
        await self._store.end_family(session.family)
        return 1

    async def sign_out_everywhere(self, account: Account) -> int:
        """End every session of ``account`` (each browser and device signed in to it, as an
        operator's revoke does); returns how many."""
        return await self._store.end_sessions(account.id)

    # ------------------------------------------------------------ linking

    async def link_password(self, account: Account, username: str, password: str,
                            address: str = "") -> None:
        """The account signs in by ``username`` and ``password`` too (history kept). A
        username of another account's is answered before any hash, as a sign-up's is."""
        key = username_key(username)
        check_password(password)
        taken = await self._store.identity(Method.PASSWORD, key)
        if taken is not None and taken.account_id != account.id:
            self.password_work.take(address)
            raise ServiceError.precondition("this username is taken", "IDENTITY_TAKEN")
        hashed = await self._hash(password, address)
        existing = [i for i in await self._store.identities(account.id)
                    if i.method is Method.PASSWORD]
        try:
            await self._store.link(Identity(Method.PASSWORD, key, account.id, hashed))
        except IdentityTaken:
            raise ServiceError.precondition("this username is taken", "IDENTITY_TAKEN") from None
        for old in existing:  # one password per account: a new username replaces the old
            if old.key != key:
                await self._store.unlink(old.method, old.key)
        self._attempts.signed_in(key, address)

    async def sweep(self) -> tuple[int, int]:
        """Expired sessions end and never-used guests go; (sessions, guests) removed."""
        now = self._clock()
        return await self._store.sweep(now, now - self._guest_ttl)

    async def sweep_forever(self, interval: float = SWEEP_INTERVAL) -> None:
        """The background task: a sweep every ``interval`` seconds (one at start)."""
        while True:
            try:
                sessions, guests = await self.sweep()
                if sessions or guests:
                    log.info("accounts_swept", sessions=sessions, guests=guests)
            except Exception as exc:
                log.warning("accounts_sweep_failed", error=str(exc)[:200])
            await asyncio.sleep(interval)

    async def link_oidc(self, account: Account, id_token: str) -> None:
        identity = await asyncio.to_thread(self._verifier.verify, id_token)
        try:
            await self._store.link(Identity(Method.OIDC, identity.key, account.id))
        except IdentityTaken:
            raise ServiceError.precondition(
                "this identity already signs in another account", "IDENTITY_TAKEN") from None

    # ------------------------------------------------------------ profiles, boards, history

    async def profile(self, account: Account) -> Profile:
        """What the account's own page shows."""
        identities = await self._store.identities(account.id)
        # The totals first: a game is recorded with its ratings at once, so ratings read
        # after totals that count a game hold its update (read the other way round, a game
        # recorded between the two reads was counted without its rating).
        games, wins, average = await self._store.totals(account.id)
        ratings = {(kind, players): rating for kind in RATING_KINDS
                   for players, rating in (await self._store.ratings(account.id, kind)).items()}
        places = {(kind, players): await self._store.place_of(account.id, players, kind)
                  for kind, players in ratings}
        return Profile(account, tuple(identities), ratings,
                       {p: place for p, place in places.items() if place is not None},
                       games, wins, average)

    async def leaderboard(self, players: int, offset: int, limit: int,
                          kind: str = DEFAULT_KIND) -> list[Ranked]:
        """The leaderboard of games of ``kind`` (by default the default game's, every seat
        for itself) and ``players``."""
        return await self._store.leaderboard(players, offset, limit, kind)

    async def around(self, account: Account, players: int, size: int,
                     kind: str = DEFAULT_KIND) -> list[Ranked]:
        """The page of ``size`` lines with the account in its middle (the top page when it
        is not rated in this kind of game)."""
        page = await self._store.around(account.id, players, size, kind)
        return await self._store.leaderboard(players, 0, size, kind) if page is None else page

    async def games(self, account: Account, limit: int, before: tuple[float, str] | None
                    ) -> list[PlayedGame]:
        return await self._store.games_of(account.id, limit, before)

    async def games_of_id(self, account_id: str, limit: int,
                          before: tuple[float, str] | None) -> list[PlayedGame]:
        """An account's games by its id (a deleted or unknown one: none)."""
        return await self._store.games_of(account_id, limit, before)

    async def game_finished(self, game: FinishedGame) -> list[Update] | None:
        """Take a finished game into its accounts' histories and, if rated, their ratings:
        exactly once. How it moved them (None: it was taken already, by this node or
        another)."""
        def compute(before: list[Rating]) -> list[Update]:
            return rate_game([Contender(p.seat, p.place, p.has_played, p.network, b, p.has_left)
                              for p, b in zip(game.places, before, strict=True)],
                             is_one_network_rated=self._is_one_network_rated)
        return await self._store.record_game(game, compute)

    async def game_ratings(self, record_id: str) -> list[Update]:
        """How a finished game moved its seats' ratings (none for an unrated game)."""
        return await self._store.game_ratings(record_id)

    # ------------------------------------------------------------ operators

    async def find_by(self, query: str) -> Account:
        """An account by its id, else by its username."""
        if not query.startswith("a_"):
            found = await self._store.identity(Method.PASSWORD, query.lower())
            if found is not None:
                query = found.account_id
        return await self.find(query)

    async def find(self, account_id: str) -> Account:
        account = await self._store.account(account_id)
        if account is None or account.is_deleted:
            raise ServiceError.not_found("no such account", "ACCOUNT_NOT_FOUND")
        return account

    async def rename(self, account_id: str, name: str) -> Account:
        """``name``, checked against the name policy by the caller, for the account.

        :raises ServiceError: ACCOUNT_NOT_FOUND, NAME_TAKEN.
        """
        account = replace(await self.find(account_id), display_name=name)
        try:
            await self._store.save_account(account)
        except NameTaken:
            raise _name_taken() from None
        return account

    async def revoke(self, account_id: str) -> int:
        """End every session of the account now; returns how many."""
        await self.find(account_id)
        return await self._store.end_sessions(account_id)

    async def set_banned(self, account_id: str, is_banned: bool) -> Account:
        account = replace(await self.find(account_id), is_banned=is_banned)
        await self._store.save_account(account)
        if is_banned:
            await self._store.end_sessions(account_id)
        return account

    async def banned_among(self, account_ids: list[str]) -> set[str]:
        return await self._store.banned_among(account_ids)

    async def deleted_among(self, account_ids: list[str]) -> set[str]:
        return await self._store.deleted_among(account_ids)

    async def delete(self, account_id: str) -> None:
        """Forget the person: sessions end, ways to sign in go, the name is gone."""
        account = await self.find(account_id)
        await self._store.end_sessions(account_id)
        for identity in await self._store.identities(account_id):
            await self._store.unlink(identity.method, identity.key)
        await self._store.forget_games(account_id)
        await self._store.save_account(replace(account, display_name="", is_deleted=True))

    # ------------------------------------------------------------ helpers

    async def _create(self, name: str, identity: Callable[[str], Identity], *,
                      is_name_chosen: bool = True) -> Account:
        """A new account named ``name`` (a default name when empty, or when it is not chosen
        by the person and taken), signing in by ``identity(account_id)``.

        :raises IdentityTaken: the identity signs in another account (nothing made).
        :raises ServiceError: NAME_TAKEN (a chosen name; nothing made).
        """
        for attempt in range(DEFAULT_NAME_TRIES):
            number = "a_" + secrets.token_urlsafe(12)
            given = name if name and (attempt == 0 or is_name_chosen) else _default_name()
            account = Account(number, given, self._clock())
            try:
                await self._store.create(account, identity(number))
                return account
            except NameTaken:
                if name and is_name_chosen:
                    raise _name_taken() from None
        raise ServiceError.unavailable("no free default name was found: try again",
                                       "SHUTTING_DOWN")

    async def _usable(self, account_id: str) -> Account:
        return self._checked(await self._store.account(account_id))

    @staticmethod
    def _checked(account: Account | None) -> Account:
        """``account`` if it may be used (not deleted, nor banned)."""
        if account is None or account.is_deleted:
            raise _bad_credentials()
        if account.is_banned:
            raise _banned()
        return account

    def active(self) -> int:
        """Accounts signed in or seen on this node within ``ACTIVE_SECONDS``."""
        since = self._clock() - ACTIVE_SECONDS
        return sum(1 for seen in self._seen.values() if seen >= since)

    async def _start(self, account: Account, *, is_new: bool) -> SignedIn:
        now = self._clock()
        self._seen[account.id] = now
        access, refresh = new_access_token(), new_refresh_token()
        session = Session(secrets.token_urlsafe(16), account.id, hash_token(access),
                          now + self._access_ttl, hash_token(refresh), now + self._refresh_ttl,
                          created=now, rotated=now, salt=secrets.token_urlsafe(24))
        await self._store.start_session(session, self._sessions_kept)
        return SignedIn(account, access, refresh, session.access_expires,
                        session.refresh_expires, is_new,
                        tuple(await self._store.identities(account.id)))

    async def _hash(self, password: str, address: str) -> str:
        """An argon2id hash, in ``address``'s turn (``hashing.py``)."""
        return await self.password_work.run(address, self._passwords.hash, password)

    async def _verify(self, stored: str | None, password: str, address: str,
                      is_familiar: bool = False) -> bool:
        return await self.password_work.run(address, self._passwords.verify, stored, password,
                                            is_familiar=is_familiar)


def _default_name() -> str:
    """A name for an account whose person gave none: "Player" and six random characters."""
    return "Player " + secrets.token_hex(3).upper()


def _claimed_name(claim: str) -> str:
    """An OIDC token's ``name`` claim as an account's name, when the name policy allows it
    as it is; else "" (a default name: the person may rename the account)."""
    try:
        return person(claim, required=False)
    except ServiceError:
        return ""

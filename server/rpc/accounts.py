"""The AccountService servicer: check sizes, decode, call ``Accounts``, encode. The caller's
address and its access token's digest come from the gateway (``caller()``); no secret a
request carries is logged or put in an answer other than the caller's own session."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import Any

import grpc
import structlog
from copas.v1 import accounts_pb2, accounts_pb2_grpc
from prometheus_client.core import GaugeMetricFamily

from server import names
from server.accounts.model import Account, Identity, Method, Ranked
from server.accounts.ratings import DEFAULT_KIND, RATING_KINDS, kind_parts, rating_kind
from server.accounts.service import Accounts, Profile, SignedIn
from server.errors import ServiceError
from server.observability import Metrics, gauges
from server.rpc import inputs
from server.rpc.gateway import caller
from server.tables import paging
from server.tables.creation import game_module
from server.tables.registry import TableRegistry
from server.wire import timestamp

log = structlog.get_logger("copas.accounts")
Context = grpc.aio.ServicerContext[Any, Any]
SECRET_MAX = 1024  # a password, device secret or refresh token longer than this is refused
ID_TOKEN_MAX = 16 * 1024
DEFAULT_BOARD = 50
_METHODS = {Method.DEVICE: accounts_pb2.SIGN_IN_METHOD_DEVICE,
            Method.PASSWORD: accounts_pb2.SIGN_IN_METHOD_PASSWORD,
            Method.OIDC: accounts_pb2.SIGN_IN_METHOD_OIDC}


def account_pb(account: Account, identities: tuple[Identity, ...] | list[Identity] = ()
               ) -> accounts_pb2.Account:
    return accounts_pb2.Account(
        account_id=account.id, display_name=account.display_name,
        create_time=timestamp(account.created),
        methods=sorted({_METHODS[i.method] for i in identities}),
        username=next((i.key for i in identities if i.method is Method.PASSWORD), ""))


def session_pb(signed: SignedIn) -> accounts_pb2.Session:
    return accounts_pb2.Session(
        account=account_pb(signed.account, signed.identities),
        access_token=signed.access_token,
        access_expire_time=timestamp(signed.access_expires),
        refresh_token=signed.refresh_token,
        refresh_expire_time=timestamp(signed.refresh_expires),
        is_new_account=signed.is_new)


def _secret(name: str, value: str, limit: int = SECRET_MAX) -> str:
    """A secret field: its length checked, never quoted back."""
    if len(value) > limit:
        raise ServiceError.invalid(f"{name} is at most {limit} characters",
                                   "FIELD_TOO_LONG")
    return value


def _name(value: str) -> str:
    return names.person(value, required=False)


def ratings_pb(profile: Profile, is_provisional_shown: bool = True
               ) -> list[accounts_pb2.Rating]:
    """A profile's ratings, the default game's kinds first, each by player count."""
    def order(key: tuple[str, int]) -> tuple[int, int]:
        return RATING_KINDS.index(key[0]), key[1]

    ratings = []
    for key in sorted(profile.ratings, key=order):
        kind, players = key
        rating = profile.ratings[key]
        game, partnerships = kind_parts(kind)
        ratings.append(accounts_pb2.Rating(
            players=players, rating=rating.shown, mu=rating.mu, sigma=rating.sigma,
            games=rating.games, wins=rating.wins, place=profile.places.get(key, 0),
            is_provisional=rating.is_provisional and is_provisional_shown, game=game,
            partnerships=partnerships))
    return ratings


def _board(requested: int, game: str, partnerships: bool) -> tuple[int, str]:
    """A leaderboard's player count and kind, as its game takes them.

    :raises ServiceError: INVALID_ARGUMENT (INVALID_RULES) listing what the game takes."""
    players = game_module(game).rating_players(requested, partnerships)
    return players, rating_kind(game or DEFAULT_KIND, partnerships)


def _entry(line: Ranked, you: str) -> accounts_pb2.LeaderboardEntry:
    return accounts_pb2.LeaderboardEntry(
        place=line.place, display_name=line.display_name, rating=line.rating.shown,
        games=line.rating.games, wins=line.rating.wins, is_you=line.account_id == you)


class AccountService(accounts_pb2_grpc.AccountServiceServicer):
    def __init__(self, accounts: Accounts, metrics: Metrics) -> None:
        self.accounts = accounts
        self._sign_ins = metrics.sign_ins

    def gauges(self) -> Iterable[GaugeMetricFamily]:
        work = self.accounts.password_work
        return gauges(("copas_accounts_active", "Accounts signed in or seen on this node in "
                       "the last 15 minutes", self.accounts.active()),
                      ("copas_password_checks_running", "argon2 password hashes computing now "
                       "(sign-ins, sign-ups, links)", work.running),
                      ("copas_password_checks_waiting", "Password sign-ins, sign-ups and links "
                       "waiting for a hash, from all addresses", work.waiting))

    async def _signed_in(self, method: str, sign_in: Awaitable[SignedIn]) -> accounts_pb2.Session:
        """A sign-in's session, counted by method and outcome (never with what was sent)."""
        try:
            signed = await sign_in
        except ServiceError as error:
            self._sign_ins.labels(method, error.reason).inc()
            raise
        self._sign_ins.labels(method, "ok").inc()
        return session_pb(signed)

    async def _me(self) -> Account:
        digest = caller().token_hash
        if digest is None:
            raise ServiceError.unauthenticated(
                "sign in first: send authorization: Bearer <access_token>", "SIGN_IN_REQUIRED")
        return await self.accounts.authenticate_digest(digest)

    async def SignInDevice(self, request: accounts_pb2.SignInDeviceRequest, context: Context
                           ) -> accounts_pb2.SignInDeviceResponse:
        return accounts_pb2.SignInDeviceResponse(session=await self._signed_in(
            "device", self.accounts.sign_in_device(
                _secret("device_secret", request.device_secret), _name(request.display_name),
                caller().peer)))

    async def SignUpPassword(self, request: accounts_pb2.SignUpPasswordRequest,
                             context: Context) -> accounts_pb2.SignUpPasswordResponse:
        return accounts_pb2.SignUpPasswordResponse(session=await self._signed_in(
            "sign_up", self.accounts.sign_up_password(
                inputs.check_length("username", request.username, 64, "INVALID_USERNAME"),
                _secret("password", request.password), _name(request.display_name),
                caller().peer)))

    async def SignInPassword(self, request: accounts_pb2.SignInPasswordRequest,
                             context: Context) -> accounts_pb2.SignInPasswordResponse:
        return accounts_pb2.SignInPasswordResponse(session=await self._signed_in(
            "password", self.accounts.sign_in_password(
                inputs.check_length("username", request.username, 64, "INVALID_USERNAME"),
                _secret("password", request.password), caller().peer)))

    async def SignInOidc(self, request: accounts_pb2.SignInOidcRequest, context: Context
                         ) -> accounts_pb2.SignInOidcResponse:
        return accounts_pb2.SignInOidcResponse(session=await self._signed_in(
            "oidc", self.accounts.sign_in_oidc(
                _secret("id_token", request.id_token, ID_TOKEN_MAX), _name(request.display_name),
                caller().peer)))

    async def RefreshSession(self, request: accounts_pb2.RefreshSessionRequest,
                             context: Context) -> accounts_pb2.RefreshSessionResponse:
        return accounts_pb2.RefreshSessionResponse(session=await self._signed_in(
            "refresh", self.accounts.refresh(_secret("refresh_token", request.refresh_token),
                                             caller().peer)))

    async def SignOut(self, request: accounts_pb2.SignOutRequest, context: Context
                      ) -> accounts_pb2.SignOutResponse:
        if request.everywhere:  # the token must still be good: a revoked one ends nothing
            ended = await self.accounts.sign_out_everywhere(await self._me())
            return accounts_pb2.SignOutResponse(sessions_ended=ended)
        digest = caller().token_hash
        ended = await self.accounts.sign_out(digest) if digest is not None else 0
        return accounts_pb2.SignOutResponse(sessions_ended=ended)

    async def GetProfile(self, request: accounts_pb2.GetProfileRequest, context: Context
                         ) -> accounts_pb2.GetProfileResponse:
        profile = await self.accounts.profile(await self._me())
        return accounts_pb2.GetProfileResponse(
            account=account_pb(profile.account, profile.identities),
            ratings=ratings_pb(profile),
            games=profile.games, wins=profile.wins, average_place=profile.average_place)

    async def UpdateProfile(self, request: accounts_pb2.UpdateProfileRequest,
                            context: Context) -> accounts_pb2.UpdateProfileResponse:
        me = await self._me()
        name = names.person(request.display_name)
        return accounts_pb2.UpdateProfileResponse(
            account=account_pb(await self.accounts.rename(me.id, name)))

    async def LinkPassword(self, request: accounts_pb2.LinkPasswordRequest, context: Context
                           ) -> accounts_pb2.LinkPasswordResponse:
        me = await self._me()
        await self.accounts.link_password(
            me, inputs.check_length("username", request.username, 64, "INVALID_USERNAME"),
            _secret("password", request.password), caller().peer)
        profile = await self.accounts.profile(me)
        return accounts_pb2.LinkPasswordResponse(account=account_pb(me, profile.identities))

    async def LinkOidc(self, request: accounts_pb2.LinkOidcRequest, context: Context
                       ) -> accounts_pb2.LinkOidcResponse:
        me = await self._me()
        await self.accounts.link_oidc(me, _secret("id_token", request.id_token, ID_TOKEN_MAX))
        profile = await self.accounts.profile(me)
        return accounts_pb2.LinkOidcResponse(account=account_pb(me, profile.identities))

    async def GetLeaderboard(self, request: accounts_pb2.GetLeaderboardRequest,
                             context: Context) -> accounts_pb2.GetLeaderboardResponse:
        inputs.check_length("game", request.game, inputs.PRESET_MAX, "INVALID_RULES")
        players, kind = _board(request.players, request.game, request.partnerships)
        size = min(request.page_size or DEFAULT_BOARD, paging.MAX_PAGE)
        if request.page_size < 0:
            raise ServiceError.invalid("page_size must not be negative", "INVALID_PAGE_SIZE")
        you = ""
        if request.around_me:
            me = await self._me()
            you = me.id
            lines = await self.accounts.around(me, players, size, kind)
        else:
            if caller().token_hash is not None:
                try:
                    you = (await self._me()).id
                except ServiceError:
                    you = ""  # the board is public; a stale token only loses is_you
            offset = paging.decode_offset(paging.Listing.LEADERBOARD, request.page_token)
            lines = await self.accounts.leaderboard(players, offset, size, kind)
        after = lines[-1].place if len(lines) == size else 0
        return accounts_pb2.GetLeaderboardResponse(
            players=players, game=kind_parts(kind)[0], partnerships=request.partnerships,
            entries=[_entry(line, you) for line in lines],
            next_page_token=paging.offset_token(paging.Listing.LEADERBOARD, after) if after
            else "")

    async def ListMyGames(self, request: accounts_pb2.ListMyGamesRequest, context: Context
                          ) -> accounts_pb2.ListMyGamesResponse:
        me = await self._me()
        size = paging.page_size(request.page_size)
        games = await self.accounts.games(
            me, size, paging.decode(paging.Listing.MY_GAMES, request.page_token))
        last = games[-1] if len(games) == size else None
        return accounts_pb2.ListMyGamesResponse(
            games=[accounts_pb2.MyGame(
                record_id=g.record_id, table_name=g.table_name, finish_time=timestamp(g.finished),
                players=g.players, place=g.place, points=g.points, is_rated=g.is_rated,
                rating_after=g.rating_after, rating_change=g.rating_change,
                game=kind_parts(g.kind)[0], partnerships=kind_parts(g.kind)[1])
                for g in games],
            next_page_token=paging.encode(paging.Listing.MY_GAMES, (last.finished, last.record_id))
            if last else "")


async def sweep_bans(registry: TableRegistry, accounts: Accounts, interval: float = 2.0
                     ) -> None:
    """Every ``interval`` seconds, the seats here of accounts banned meanwhile (on any node)
    are played as leavers' (a background task of the server's)."""
    while True:
        await asyncio.sleep(interval)
        seated = sorted({s.account_id for t in registry.live() if not t.is_finished
                         for s in t.seats if s.account_id and s.token_hash})
        try:
            banned = await accounts.banned_among(seated)
        except Exception as exc:
            log.warning("ban_sweep_failed", error=str(exc)[:200])
            continue
        for account_id in banned:
            for table in registry.remove_account(account_id):
                table.log.info("banned_account_removed")

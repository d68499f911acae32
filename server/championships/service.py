"""``Championships``: what the edge asks of the championships (create, register, check in,
withdraw, start, cancel, remove, pause, correct, disqualify, re-seat, read) checked and written
through the store, each refusal with its ``copas.v1.ErrorReason``; the driver is told of every
change so it steps at once."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import grpc

from server import games
from server.accounts.attempts import Creations
from server.accounts.model import Account
from server.bounded import Bounded
from server.championships.driver import SEAT_SCOPE, Driver, seat_key
from server.championships.format import (
    FINAL_TABLE_SIZES,
    MAX_ROUNDS,
    ChampionshipError,
    GameResult,
    Scoring,
    span,
    table_sizes,
)
from server.championships.model import Championship, Counted, Phase, Registration, Spec
from server.championships.store import ChampionshipStore, Refused
from server.championships.tables import TablePort
from server.config import RegistrySettings
from server.errors import ServiceError
from server.games import GameRules, RuleOverrides
from server.tables.creation import check_new_table, game_module
from server.tables.idempotency import unseal

T = TypeVar("T")
NAME_MAX = 60
PAUSE_MAX = 3600.0
DAY = 86400.0  # the longest check-in and round time limit
MIN_PLAYERS = 3
LATEST_KEPT = 1000  # championships whose latest read the watchers share
LATEST_FOR = 1.0  # seconds a shared read serves at most (another node's changes show then)
# The gRPC status of each refusal the store makes (errors.proto says the same).
_STATUS = {
    "CHAMPIONSHIP_NOT_FOUND": grpc.StatusCode.NOT_FOUND,
    "CHAMPIONSHIP_FULL": grpc.StatusCode.RESOURCE_EXHAUSTED,
    "TOO_MANY_CHAMPIONSHIPS": grpc.StatusCode.RESOURCE_EXHAUSTED,
    "REQUEST_ID_REUSED": grpc.StatusCode.INVALID_ARGUMENT,
    "INVALID_SWAP": grpc.StatusCode.INVALID_ARGUMENT,
}


def refusal(error: Refused) -> ServiceError:
    return ServiceError(_STATUS.get(error.reason, grpc.StatusCode.FAILED_PRECONDITION),
                        error.reason, error.message)


@dataclass(frozen=True, slots=True)
class NewChampionship:
    """What a creator asks for, decoded (``copas.v1.ChampionshipSettings``)."""

    name: str
    rounds: int
    preset: str
    overrides: RuleOverrides
    duplicate_deals: bool
    max_players: int
    """0: the server's most."""
    min_players: int
    """0: 3."""
    start_at: float | None
    start_when_full: bool
    round_pause: float
    scoring: Scoring = Scoring.PLACES
    buchholz: bool = False
    final_table: int = 0
    registration_opens: float | None = None
    registration_closes: float | None = None
    late_entry_rounds: int = 0
    check_in: float = 0.0
    drop_absent: bool = True
    round_time_limit: float = 0.0
    pairing_notice: float = 0.0
    game: str = ""
    """The game every table plays ("" for the default game)."""


@dataclass(frozen=True, slots=True)
class Correction:
    """An operator's result for a counted table (``AdminService.CorrectChampionshipResult``):
    totals by seat and, with ``set_absences``, who left (in order) and who never came."""

    round_no: int
    table_no: int
    totals: tuple[int, ...]
    set_absences: bool = False
    leaver_seats: tuple[int, ...] = ()
    no_show_seats: tuple[int, ...] = ()
    reason: str = ""


@dataclass(frozen=True, slots=True)
class SeatNow:
    """A registered person's table in the current round."""

    round_no: int
    table_id: str
    seat: int
    token: str


class Championships:
    def __init__(self, store: ChampionshipStore, driver: Driver, tables: TablePort,
                 settings: RegistrySettings, *, per_account: int, max_players: int,
                 clock: Callable[[], float] = time.time,
                 creations: Creations | None = None) -> None:
        self.store = store
        self.driver = driver
        self._tables = tables
        self._settings = settings
        self._per_account = per_account
        self._max_players = max_players
        self._clock = clock
        self._creations = creations or Creations(clock, 0.0, 1.0)  # none: no limit
        # championship -> (version, when read, what was read): the watchers' shared read
        self._latest: Bounded[str, tuple[int, float, Championship]] = Bounded(LATEST_KEPT)
        # championship -> (version, the read under way): the watchers who find no fresh read
        # all wait for one read of the store, not one each
        self._reading: dict[str, tuple[int, asyncio.Task[Championship]]] = {}

    # ------------------------------------------------------------ reading

    async def get(self, championship_id: str) -> Championship:
        """:raises ServiceError: NOT_FOUND CHAMPIONSHIP_NOT_FOUND."""
        found = await self.store.load(championship_id) if championship_id else None
        if found is None:
            raise ServiceError.not_found(f"no championship {championship_id!r:.80}",
                                         "CHAMPIONSHIP_NOT_FOUND")
        return found

    async def latest(self, championship_id: str) -> Championship:
        """``get`` for the watchers: one read per change this node saw, shared by all of
        them (and read again after ``LATEST_FOR`` seconds, for another node's changes).

        :raises ServiceError: NOT_FOUND CHAMPIONSHIP_NOT_FOUND.
        """
        version = self.driver.version(championship_id)
        cached = self._latest.get(championship_id)
        now = time.monotonic()
        if cached is not None and cached[0] == version and now - cached[1] < LATEST_FOR:
            return cached[2]
        reading = self._reading.get(championship_id)
        if reading is None or reading[0] != version:
            reading = (version, asyncio.ensure_future(self.get(championship_id)))
            self._reading[championship_id] = reading
            reading[1].add_done_callback(functools.partial(self._read_done, championship_id))
        found = await asyncio.shield(reading[1])  # a watcher gone leaves the read to the others
        cached = self._latest.get(championship_id)  # (another read may have ended meanwhile)
        if cached is not None and cached[2].version > found.version:
            return cached[2]  # never an older read than one this node showed
        self._latest[championship_id] = (version, now, found)
        return found

    def _read_done(self, championship_id: str, done: asyncio.Task[Championship]) -> None:
        reading = self._reading.get(championship_id)
        if reading is not None and reading[1] is done:
            del self._reading[championship_id]
        if not done.cancelled():
            done.exception()  # read here: a failed read nobody awaited any more is no warning

    async def is_published(self, championship_id: str, table_id: str) -> bool:
        """Whether the record of ``table_id``, a table of the championship, may be shown:
        its round is over (or the championship is). Until then it is withheld: with
        duplicate deals it tells the hands of the tables still playing the same deal, and a
        round's results are published together."""
        try:
            championship = await self.latest(championship_id)
        except ServiceError:
            return True  # no such championship here: nothing to withhold for
        if championship.phase.is_over:
            return True
        round_no = next((t.round_no for t in championship.tables if t.table_id == table_id),
                        None)
        return round_no is not None and championship.is_round_over(round_no)

    async def page(self, size: int, offset: int, include_finished: bool
                   ) -> list[Championship]:
        return await self.store.page(size, offset, include_finished)

    def seat_of(self, championship: Championship, account_id: str) -> SeatNow | None:
        """The account's table and seat in the current round and its player token (the
        token of the driver's own join, unsealed from the store: any node gives it), while
        its game is not counted and the account has not withdrawn."""
        registration = championship.registration(account_id)
        if registration is None or registration.withdrawn is not None \
                or championship.phase is not Phase.RUNNING:
            return None
        found = championship.playing(account_id)
        if found is None:
            return None
        table, seat = found
        token = unseal(table.sealed_tokens[seat], SEAT_SCOPE,
                       seat_key(championship, table.table_id, account_id))
        return SeatNow(table.round_no, table.table_id, seat, token)

    # ------------------------------------------------------------ creating

    def _check(self, new: NewChampionship) -> tuple[GameRules, int, int]:
        """:raises ServiceError: INVALID_CHAMPIONSHIP, INVALID_ROUNDS, INVALID_PLAYER_LIMITS,
        INVALID_RULES (rules the engine or this server refuses, or without clocks)."""
        if not new.name.strip() or len(new.name) > NAME_MAX:
            raise ServiceError.invalid(f"display_name is 1 to {NAME_MAX} characters",
                                       "INVALID_CHAMPIONSHIP")
        if not 1 <= new.rounds <= MAX_ROUNDS:
            raise ServiceError.invalid(f"rounds must be 1 to {MAX_ROUNDS}", "INVALID_ROUNDS")
        most = new.max_players or self._max_players
        least = new.min_players or MIN_PLAYERS
        if not MIN_PLAYERS <= least <= most <= self._max_players:
            raise ServiceError.invalid(
                f"players: {MIN_PLAYERS} <= min_players <= max_players <= "
                f"{self._max_players}", "INVALID_PLAYER_LIMITS")
        if not 0 <= new.round_pause <= PAUSE_MAX:
            raise ServiceError.invalid(f"round_pause_seconds is 0 to {PAUSE_MAX:g}",
                                       "INVALID_CHAMPIONSHIP")
        if new.start_at is not None and new.start_at < self._clock():
            raise ServiceError.invalid("start_time has passed", "INVALID_CHAMPIONSHIP")
        module = game_module(new.game)
        self._check_director(new, most, module.championship_sizes)
        sizes = {s for n in range(least, min(most, 12) + 1)
                 for s in table_sizes(n, module.name)}
        game: GameRules | None = None
        for size in sorted(sizes):
            checked = check_new_table(self._settings, preset=new.preset,
                                      overrides={**new.overrides, "players": size},
                                      bot_seats=0, bot_policy="", has_seed=False,
                                      game=new.game)
            if size == module.default_players or game is None:
                game = checked.rules
        assert game is not None
        missing = module.missing_clocks(game)
        if missing:
            raise ServiceError.invalid(f"a championship's games have clocks: {missing}",
                                       "INVALID_RULES")
        return game.replace(players=module.default_players), most, least

    def _check_director(self, new: NewChampionship, most: int,
                        finals: tuple[int, ...] = FINAL_TABLE_SIZES) -> None:
        """The tournament director's options.

        :raises ServiceError: MATCHPOINTS_NEED_DUPLICATE_DEALS, INVALID_CHAMPIONSHIP (the
            message names the setting).
        """
        def invalid(message: str) -> ServiceError:
            return ServiceError.invalid(message, "INVALID_CHAMPIONSHIP")
        if new.scoring is Scoring.MATCHPOINTS and not new.duplicate_deals:
            raise ServiceError.invalid("scoring matchpoints compares tables dealt the same "
                                       "cards: it needs duplicate_deals",
                                       "MATCHPOINTS_NEED_DUPLICATE_DEALS")
        if new.final_table and (new.final_table not in finals or new.final_table > most):
            raise invalid(f"final_table is 0, or {span(finals)} and at most max_players"
                          f" ({most})")
        if not 0 <= new.late_entry_rounds <= new.rounds:
            raise invalid("late_entry_rounds is 0 to rounds")
        if not 0 <= new.check_in <= DAY:
            raise invalid(f"check_in_seconds is 0 to {DAY:g}")
        if new.check_in and (new.start_at is None or new.start_when_full):
            raise invalid("check_in_seconds needs a start_time (and no start_when_full): "
                          "check-in ends at the start time")
        if not 0 <= new.round_time_limit <= DAY:
            raise invalid(f"round_time_limit_seconds is 0 to {DAY:g}")
        if not 0 <= new.pairing_notice <= PAUSE_MAX:
            raise invalid(f"pairing_notice_seconds is 0 to {PAUSE_MAX:g}")
        opens, closes = new.registration_opens, new.registration_closes
        if closes is not None and (closes <= self._clock()
                                   or (opens is not None and closes <= opens)):
            raise invalid("registration_close_time must be in the future, after "
                          "registration_open_time")
        if opens is not None and new.start_at is not None and new.start_at <= opens:
            raise invalid("registration_open_time must be before start_time")

    def check_creation(self, address: str) -> None:
        """Refuses at once, before anything is read, while ``address`` may create none.

        :raises ServiceError: RESOURCE_EXHAUSTED TOO_MANY_CHAMPIONSHIPS.
        """
        self._creations.check(address)

    async def create(self, new: NewChampionship, creator: Account | None,
                     request_key: str = "", address: str = "") -> Championship:
        """A championship open for registration; ``creator`` None: an operator (no quota);
        else at most --championships-per-account not over, and ``address`` (the caller's)
        bounded by --championships-per-address-per-hour.

        :raises ServiceError: the checks of ``_check``; TOO_MANY_CHAMPIONSHIPS,
            REQUEST_ID_REUSED.
        """
        game, most, least = self._check(new)
        fingerprint = hashlib.sha256(repr((new, creator.id if creator else "")).encode()
                                     ).hexdigest()
        preset = new.preset or games.get(new.game).default_preset
        spec = Spec("c_" + secrets.token_urlsafe(9), new.name.strip(), preset,
                    game, new.rounds, new.duplicate_deals, most, least, new.start_at,
                    new.start_when_full, new.round_pause, secrets.token_hex(16),
                    creator.id if creator else "", self._clock(), request_key, fingerprint,
                    new.scoring, new.buchholz, new.final_table, new.registration_opens,
                    new.registration_closes, new.late_entry_rounds, new.check_in,
                    new.drop_absent, new.round_time_limit, new.pairing_notice, new.game)
        try:
            if creator is None:
                made = await self.store.create(spec, None, address)
            else:
                with self._creations.one(address):
                    made = await self.store.create(spec, self._per_account, address)
        except Refused as error:
            raise refusal(error) from None
        self.driver.changed(made)
        return await self.get(made)

    # ------------------------------------------------------------ players

    async def register(self, championship_id: str, account: Account) -> Championship:
        """Within the registration window (and, after the start, late entry); registering
        once check-in is open checks in.

        :raises ServiceError: CHAMPIONSHIP_NOT_FOUND, ACCOUNT_BANNED, REGISTRATION_NOT_OPEN,
            REGISTRATION_CLOSED, ALREADY_REGISTERED, CHAMPIONSHIP_FULL.
        """
        if account.is_banned:
            raise ServiceError.denied("the account is banned", "ACCOUNT_BANNED")
        championship = await self.latest(championship_id)  # its spec: never changes
        spec, now = championship.spec, self._clock()
        if spec.registration_opens is not None and now < spec.registration_opens:
            raise ServiceError.precondition(
                f"registration opens at {_when(spec.registration_opens)}",
                "REGISTRATION_NOT_OPEN")
        if spec.registration_closes is not None and now >= spec.registration_closes:
            raise ServiceError.precondition(
                f"registration closed at {_when(spec.registration_closes)}",
                "REGISTRATION_CLOSED")
        opens = spec.check_in_opens
        checked_in = now if opens is not None and now >= opens else None
        await self._do(championship.id, self.store.register(
            championship.id, Registration(account.id, account.display_name, now,
                                          checked_in=checked_in),
            spec.max_players, spec.late_entry_rounds), step=False)
        championship = await self.latest(championship_id)  # read once with the watchers
        if championship.phase is not Phase.REGISTERING or (
                spec.start_when_full and len(championship.registrations) >= spec.max_players):
            self.driver.step_soon(championship.id)  # a late entrant, or it is full: it starts
        return championship

    async def check_in(self, championship_id: str, account_id: str) -> Championship:
        """:raises ServiceError: CHAMPIONSHIP_NOT_FOUND, CHECK_IN_NOT_OPEN, CHECK_IN_CLOSED,
        NOT_REGISTERED."""
        championship = await self.get(championship_id)
        opens = championship.spec.check_in_opens
        if opens is None:
            raise ServiceError.precondition("this championship has no check-in: nothing to "
                                            "do", "CHECK_IN_NOT_OPEN")
        if self._clock() < opens and championship.phase is Phase.REGISTERING:
            raise ServiceError.precondition(f"check-in opens at {_when(opens)}",
                                            "CHECK_IN_NOT_OPEN")
        try:
            changed = await self.store.check_in(championship.id, account_id, self._clock())
        except Refused as error:
            raise refusal(error) from None
        if changed:
            self.driver.changed(championship.id)
        return await self.get(championship_id)

    async def unregister(self, championship_id: str, account_id: str) -> Championship:
        """:raises ServiceError: CHAMPIONSHIP_NOT_FOUND, REGISTRATION_CLOSED, NOT_REGISTERED."""
        await self._do(championship_id, self.store.unregister(championship_id, account_id),
                       step=False)  # it cannot make the championship due
        return await self.latest(championship_id)  # read once with the watchers

    async def withdraw(self, championship_id: str, account_id: str) -> Championship:
        """:raises ServiceError: CHAMPIONSHIP_NOT_FOUND, CHAMPIONSHIP_NOT_RUNNING,
        NOT_REGISTERED, ALREADY_WITHDRAWN."""
        await self._do(championship_id,
                       self.store.withdraw(championship_id, account_id, self._clock()))
        return await self.latest(championship_id)  # read once with the watchers

    async def remove(self, championship_id: str, account_id: str) -> Championship:
        """An operator's: unregistered before the start, withdrawn after it."""
        championship = await self.get(championship_id)
        if championship.phase is Phase.REGISTERING:
            return await self.unregister(championship_id, account_id)
        return await self.withdraw(championship_id, account_id)

    # ------------------------------------------------------------ operators

    async def start(self, championship_id: str) -> Championship:
        """:raises ServiceError: CHAMPIONSHIP_NOT_FOUND, CHAMPIONSHIP_NOT_RUNNING (started or
        over), NOT_ENOUGH_PLAYERS."""
        championship = await self.get(championship_id)
        if championship.spec.check_in_opens is not None \
                and championship.phase is Phase.REGISTERING:
            await self.store.close_check_in(championship_id)  # who did not check in goes
        await self._do(championship_id, self.store.start(championship_id, self._clock(),
                                        championship.spec.min_players))
        await self.driver.step_if_held(championship_id)  # round 1 seated before the answer
        return await self.get(championship_id)

    async def forget_player(self, account_id: str, name: str) -> None:
        """A deleted account: its registrations are named ``name`` (its standings lines
        with them)."""
        for championship_id in await self.store.forget_player(account_id, name):
            self.driver.changed(championship_id)

    async def cancel(self, championship_id: str) -> Championship:
        """Its running games end CLOSED (never counted); the standings stay, CANCELLED.

        :raises ServiceError: CHAMPIONSHIP_NOT_FOUND, CHAMPIONSHIP_NOT_RUNNING (over).
        """
        championship = await self.get(championship_id)
        if not await self._do(championship_id, self.store.end(championship_id, Phase.CANCELLED,
                                             self._clock())):
            raise ServiceError.precondition("the championship is over already",
                                            "CHAMPIONSHIP_NOT_RUNNING")
        counted = championship.counted_ids()
        for table in championship.tables_of(championship.current_round):
            if table.table_id not in counted:
                self._tables.close(table.table_id)
        return await self.get(championship_id)

    async def pause(self, championship_id: str, is_paused: bool) -> Championship:
        """Pauses or resumes; its tables here are held or released before the answer (those
        on other nodes at their next pass).

        :raises ServiceError: CHAMPIONSHIP_NOT_FOUND, CHAMPIONSHIP_NOT_RUNNING.
        """
        await self._do(championship_id,
                       self.store.pause(championship_id, self._clock(), is_paused))
        championship = await self.get(championship_id)
        await self.driver.enforce(championship)
        return championship

    async def correct(self, championship_id: str, correction: Correction) -> Championship:
        """:raises ServiceError: CHAMPIONSHIP_NOT_FOUND, CHAMPIONSHIP_TABLE_NOT_FOUND,
        TABLE_NOT_COUNTED, INVALID_RESULT, RESULT_LOCKED."""
        championship = await self.get(championship_id)
        table = next((t for t in championship.tables_of(correction.round_no)
                      if t.table_no == correction.table_no), None)
        if table is None:
            raise ServiceError.not_found(
                f"no table {correction.table_no} in round {correction.round_no}",
                "CHAMPIONSHIP_TABLE_NOT_FOUND")
        counted = next((c for c in championship.counted if c.table_id == table.table_id), None)
        if counted is None:
            raise ServiceError.precondition("the table's game is not over and counted yet: "
                                            "wait for it, or end it (CloseTable) first",
                                            "TABLE_NOT_COUNTED")
        players = table.players
        if correction.set_absences:
            seats = (*correction.leaver_seats, *correction.no_show_seats)
            if len(set(seats)) != len(seats) or not all(0 <= s < len(players) for s in seats):
                raise ServiceError.invalid("leaver_seats and no_show_seats are seats of the "
                                           "table, each at most once", "INVALID_RESULT")
            leavers = tuple(players[s] for s in correction.leaver_seats)
            no_shows = tuple(players[s] for s in correction.no_show_seats)
        else:
            leavers, no_shows = counted.result.leavers, counted.result.no_shows
        if len(correction.totals) != len(players) or min(correction.totals, default=0) < 0:
            raise ServiceError.invalid(f"totals: one per seat ({len(players)}), none negative",
                                       "INVALID_RESULT")
        try:
            result = GameResult(table.round_no, table.table_no, players, correction.totals,
                                leavers, no_shows, championship.spec.game_name)
        except ChampionshipError as exc:
            raise ServiceError.invalid(str(exc), "INVALID_RESULT") from None
        now = self._clock()
        await self._do(championship_id, self.store.correct(championship_id, Counted(
            table.table_id, result, now, None, now, correction.reason),
            championship.spec.final_round))
        return await self.get(championship_id)

    def _account_of(self, championship: Championship, player: str) -> str | None:
        """An account id ("a_...") or this championship's player id ("p_...") as the
        registered account (None: neither)."""
        if player.startswith("p_"):
            return championship.accounts_by_player_id().get(player)
        return player if championship.registration(player) is not None else None

    async def disqualify(self, championship_id: str, player: str) -> Championship:
        """Disqualifies: they leave the game they are in at once (here; on another node at
        its next pass), play no more rounds and are ranked last.

        :raises ServiceError: CHAMPIONSHIP_NOT_FOUND, NOT_REGISTERED, CHAMPIONSHIP_NOT_RUNNING,
            ALREADY_DISQUALIFIED, RESULT_LOCKED.
        """
        championship = await self.get(championship_id)
        account_id = self._account_of(championship, player)
        if account_id is None:
            raise ServiceError.precondition("that player is not registered", "NOT_REGISTERED")
        await self._do(championship_id, self.store.disqualify(
            championship_id, account_id, self._clock(), championship.spec.final_round))
        championship = await self.get(championship_id)
        await self.driver.enforce(championship)
        return championship

    async def reseat(self, championship_id: str, round_no: int, a: str, b: str
                     ) -> Championship:
        """Swaps two players of an announced round's pairings.

        :raises ServiceError: CHAMPIONSHIP_NOT_FOUND, CHAMPIONSHIP_NOT_RUNNING,
            ROUND_ALREADY_STARTED, ROUND_NOT_ANNOUNCED, PLAYER_NOT_IN_ROUND, INVALID_SWAP.
        """
        championship = await self.get(championship_id)
        accounts = [self._account_of(championship, p) for p in (a, b)]
        if accounts[0] is not None and accounts[0] == accounts[1]:
            raise ServiceError.invalid("a swap is of two players at two different tables",
                                       "INVALID_SWAP")
        missing = next((p for p, found in zip((a, b), accounts, strict=True) if found is None),
                       None)
        if missing is not None:
            raise ServiceError.precondition(f"{missing[:80]!r} is not a player of this "
                                            "championship", "PLAYER_NOT_IN_ROUND")
        await self._do(championship_id, self.store.swap(
            championship_id, round_no, str(accounts[0]), str(accounts[1])))
        return await self.get(championship_id)

    async def _do(self, championship_id: str, call: Awaitable[T], *, step: bool = True) -> T:
        """A store call: its refusal as a ServiceError; a change tells the driver (which
        steps the championship at once unless not ``step``)."""
        try:
            result = await call
        except Refused as error:
            raise refusal(error) from None
        self.driver.changed(championship_id, step=step)
        return result


def _when(at: float) -> str:
    """A time as a message says it (UTC, to the second)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))

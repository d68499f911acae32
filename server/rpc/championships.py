"""The ChampionshipService servicer and the operator's championship calls (a mixin of
AdminService): check sizes, decode, call ``Championships``, encode. Who calls comes from the
gateway (``caller()``): a signed-in account by its access token's digest."""

from __future__ import annotations

import asyncio
import contextlib
import operator
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any, Literal

import grpc
from copas.admin.v1 import admin_pb2
from copas.v1 import championships_pb2 as pb
from copas.v1 import championships_pb2_grpc, copas_pb2

from server import games, names
from server.accounts.model import Account
from server.accounts.service import Accounts
from server.bounded import Bounded
from server.championships.format import BoardScore, Scoring, championship_points
from server.championships.model import Championship, Phase, Registration
from server.championships.service import Championships, Correction, NewChampionship
from server.errors import ServiceError
from server.rpc import inputs
from server.rpc.championship_export import export
from server.rpc.gateway import caller, service_handlers
from server.rpc.operators import REASON_MAX
from server.tables import paging
from server.tables.creation import game_module
from server.tokens import pseudonym
from server.wire import field, timestamp

Context = grpc.aio.ServicerContext[Any, Any]
SHARED_KEPT = 256  # championships whose latest shared message this node keeps
# A championship's messages are spaced so that its watchers on a node get at most these many
# messages a second in all (each is a write per watcher, about 50 us), and at most
# SLOWEST_RUNNING / SLOWEST_REGISTERING seconds apart.
FANOUT_RUNNING = 2000  # 1,000 watchers: a message each every 0.5 s at most
FANOUT_REGISTERING = 250  # 1,000 watchers: every 4 s (nobody waits on a registration count)
SLOWEST_RUNNING = 0.5  # a player learns their table within a second
SLOWEST_REGISTERING = 5.0
_PHASES = {Phase.REGISTERING: pb.CHAMPIONSHIP_STATE_REGISTERING,
           Phase.RUNNING: pb.CHAMPIONSHIP_STATE_RUNNING,
           Phase.FINISHED: pb.CHAMPIONSHIP_STATE_FINISHED,
           Phase.CANCELLED: pb.CHAMPIONSHIP_STATE_CANCELLED}
Live = Callable[[str], copas_pb2.TableSummary | None]
CHAMPIONSHIP_NAME_MAX = 60
_SCORING = {pb.CHAMPIONSHIP_SCORING_UNSPECIFIED: Scoring.PLACES,
            pb.CHAMPIONSHIP_SCORING_PLACES: Scoring.PLACES,
            pb.CHAMPIONSHIP_SCORING_MATCHPOINTS: Scoring.MATCHPOINTS}
_SCORING_PB = {Scoring.PLACES: pb.CHAMPIONSHIP_SCORING_PLACES,
               Scoring.MATCHPOINTS: pb.CHAMPIONSHIP_SCORING_MATCHPOINTS}


def _time(message: pb.ChampionshipSettings,
          name: Literal["start_time", "registration_open_time", "registration_close_time"]
          ) -> float | None:
    return getattr(message, name).ToNanoseconds() / 1e9 if message.HasField(name) else None


def settings_of(message: pb.ChampionshipSettings) -> NewChampionship:
    """:raises ServiceError: INVALID_ARGUMENT for a field too long, a game or rules unknown
    (another game's options too, INVALID_RULES) or a scoring this server does not know."""
    scoring = _SCORING.get(message.scoring)
    if scoring is None:
        raise ServiceError.invalid("scoring is places or matchpoints", "INVALID_CHAMPIONSHIP")
    module = game_module(message.game)
    return NewChampionship(
        name=names.clean(message.display_name, CHAMPIONSHIP_NAME_MAX, required=False,
                         is_reserved_checked=False),
        rounds=message.rounds,
        preset=inputs.check_length("preset", message.preset, inputs.PRESET_MAX,
                                   "INVALID_RULES"),
        overrides=module.rules_overrides(message.rules),
        duplicate_deals=message.duplicate_deals,
        max_players=message.max_players, min_players=message.min_players,
        start_at=_time(message, "start_time"),
        start_when_full=message.start_when_full, round_pause=message.round_pause_seconds,
        scoring=scoring, buchholz=message.buchholz, final_table=message.final_table,
        registration_opens=_time(message, "registration_open_time"),
        registration_closes=_time(message, "registration_close_time"),
        late_entry_rounds=message.late_entry_rounds, check_in=message.check_in_seconds,
        drop_absent=message.drop_absent if message.HasField("drop_absent") else True,
        round_time_limit=message.round_time_limit_seconds,
        pairing_notice=message.pairing_notice_seconds, game=message.game)


def championship_pb(c: Championship, you: str = "", *, is_full: bool = False,
                    live: Live | None = None, base: pb.Championship | None = None
                    ) -> pb.Championship:
    """The championship as ``you`` (an account id, or "") sees it; ``is_full``: with its
    players and rounds; ``live``: with the tables still playing as a spectator sees them.
    ``base``: what ``built(c, is_full)`` gave (a node keeps it per version)."""
    message = pb.Championship()
    message.CopyFrom(base if base is not None else built(c, is_full))
    if you:
        _mark(message, c, you, is_full)
    if live is not None and is_full:
        finished = c.counted_ids()
        for shown_round, round_no in zip(message.rounds, sorted(c.rounds), strict=False):
            for shown, table in zip(shown_round.tables, c.tables_of(round_no), strict=True):
                summary = live(table.table_id) if table.table_id not in finished else None
                if summary is not None:
                    shown.live.CopyFrom(summary)
    return message


def _mark(message: pb.Championship, c: Championship, you: str, is_full: bool) -> None:
    """Sets what only ``you`` sees: that they are registered, and their own lines (``is_you``)."""
    index = next((i for i, r in enumerate(c.registrations) if r.account_id == you), None)
    if index is None:
        return
    message.is_registered = True
    if not is_full:
        return
    message.players[index].is_you = True
    player = c.player_id(you)
    for i, line in enumerate(c.published().standings()):
        if line.player == player:
            message.standings[i].is_you = True
    rounds = [[t.players for t in c.tables_of(n)] for n in sorted(c.rounds)]
    rounds += [list(c.announced[n].tables) for n in sorted(c.announced)]
    for shown_round, tables in zip(message.rounds, rounds, strict=True):
        for shown, players in zip(shown_round.tables, tables, strict=True):
            if you in players:
                shown.seats[list(players).index(you)].is_you = True


_PLAYERS: dict[tuple[str, Registration], bytes] = {}
PLAYERS_KEPT = 1 << 16  # then forgotten all at once: a plain dict is the cheapest read
CHAMPIONSHIPS_JOINED = 256  # championships whose joined players are kept, then forgotten
_PLAYERS_FIELD = pb.Championship.DESCRIPTOR.fields_by_name["players"].number


def _player(championship_id: str, r: Registration) -> bytes:
    """A registration as ``Championship.players`` shows it (serialized with its field's
    tag): kept, since a championship's next version shows nearly all of them again."""
    key = (championship_id, r)
    found = _PLAYERS.get(key)
    if found is None:
        found = field(_PLAYERS_FIELD, pb.ChampionshipPlayer(
            display_name=r.display_name, has_withdrawn=r.withdrawn is not None,
            player_id=pseudonym(championship_id, r.account_id),
            is_checked_in=r.checked_in is not None, is_dropped=r.dropped > 0,
            is_disqualified=r.disqualified is not None,
            first_round=r.first_round).SerializeToString(deterministic=True))
        if len(_PLAYERS) >= PLAYERS_KEPT:
            _PLAYERS.clear()
        _PLAYERS[key] = found
    return found


_JOINED: dict[str, tuple[tuple[Registration, ...], bytes]] = {}


def _players(championship_id: str, registrations: Sequence[Registration]) -> bytes:
    """Every registration's ``_player``, joined: the last join of the championship's reused
    when these registrations begin with the same objects (the store hands the same object
    back for a row it read before; a registration adds one at the end)."""
    now = tuple(registrations)
    last = _JOINED.get(championship_id)
    if last is not None and len(last[0]) <= len(now) \
            and all(map(operator.is_, last[0], now)):
        joined = last[1] + b"".join(_player(championship_id, r) for r in now[len(last[0]):])
    else:
        joined = b"".join(_player(championship_id, r) for r in now)
    if len(_JOINED) >= CHAMPIONSHIPS_JOINED and championship_id not in _JOINED:
        _JOINED.clear()
    _JOINED[championship_id] = (now, joined)
    return joined


def built(c: Championship, is_full: bool) -> pb.Championship:
    """The championship as anyone sees it (no ``is_you``, no ``live``): the same for every
    caller of one version, so a node builds it once per version (``championship_pb``)."""
    spec = c.spec
    message = pb.Championship(
        championship_id=c.id, state=_PHASES[c.phase],
        rules=games.get(spec.game_name).rules_to_pb(spec.game),
        create_time=timestamp(spec.created), player_count=len(c.registrations),
        current_round=c.current_round,
        seed=spec.seed if c.phase.is_over else "",
        is_paused=c.paused is not None, version=c.version,
        settings=pb.ChampionshipSettings(
            display_name=spec.name, rounds=spec.rounds, preset=spec.preset,
            duplicate_deals=spec.duplicate_deals, max_players=spec.max_players,
            min_players=spec.min_players, start_when_full=spec.start_when_full,
            round_pause_seconds=spec.round_pause, scoring=_SCORING_PB[spec.scoring],
            buchholz=spec.buchholz, final_table=spec.final_table,
            late_entry_rounds=spec.late_entry_rounds, check_in_seconds=spec.check_in,
            drop_absent=spec.drop_absent, round_time_limit_seconds=spec.round_time_limit,
            pairing_notice_seconds=spec.pairing_notice, game=spec.game_name))
    for name, at in (("start_time", spec.start_at),
                     ("registration_open_time", spec.registration_opens),
                     ("registration_close_time", spec.registration_closes)):
        if at is not None:
            getattr(message.settings, name).CopyFrom(timestamp(at))
    if c.began is not None:
        message.begin_time.CopyFrom(timestamp(c.began))
    if c.ended is not None:
        message.end_time.CopyFrom(timestamp(c.ended))
    if not is_full:
        return message
    names = {r.account_id: r.display_name for r in c.registrations}
    withdrawn = {r.account_id for r in c.registrations if r.withdrawn is not None}
    registered = {r.account_id: r for r in c.registrations}
    finished = c.counted_ids()
    c = c.published()  # with duplicate deals, a round's results once every table of it ended
    standings = c.standings()
    accounts = c.accounts_by_player_id() if standings else {}
    for line in standings:
        account = accounts.get(line.player, "")
        registration = registered.get(account)
        message.standings.append(pb.StandingLine(
            place=line.place, display_name=names.get(account, ""), points=line.points,
            firsts=float(line.firsts), relative_points=float(line.relative_points),
            head_to_head=line.head_to_head, games=line.games,
            decided_by=pb.TieBreak.ValueType(int(line.decided_by) + 1),
            has_withdrawn=account in withdrawn,
            player_id=line.player, matchpoints=float(line.matchpoints),
            percentage=float(line.percentage), buchholz=float(line.buchholz),
            final_place=line.final, is_disqualified=line.disqualified,
            is_dropped=registration is not None and registration.dropped > 0))
    message.MergeFromString(_players(c.id, c.registrations))
    counted = {k.table_id: k for k in c.counted}
    boards: dict[tuple[int, int, int], BoardScore] = {}
    if spec.duplicate_deals and c.counted:
        by_player = c.tally().board_scores()
        boards = {(b.round_no, b.table, b.seat): b for scores in by_player.values()
                  for b in scores}
    final_round = spec.final_round
    for round_no in sorted(c.rounds):
        tables = c.tables_of(round_no)
        seated = pb.ChampionshipRound(round_number=round_no,
                                      seat_time=timestamp(c.rounds[round_no]),
                                      start_time=timestamp(c.rounds[round_no]),
                                      is_finished=all(t.table_id in finished for t in tables),
                                      is_final=round_no == final_round)
        if round_no in c.time_limits:
            seated.time_limit.CopyFrom(timestamp(c.time_limits[round_no]))
        for table in tables:
            found = counted.get(table.table_id)
            result = found.result if found is not None else None
            points = championship_points(result) if result is not None else {}
            shown = pb.ChampionshipTable(table_number=table.table_no, table_id=table.table_id,
                                         is_finished=table.table_id in finished,
                                         is_corrected=bool(found and found.corrected))
            if found is not None and found.end_reason is not None:
                shown.end_reason = games.get(spec.game_name).end_reason_to_pb(
                    found.end_reason)
            for seat, player in enumerate(table.players):
                board = boards.get((round_no, table.table_no, seat))
                shown.seats.append(pb.ChampionshipSeat(
                    seat=seat, display_name=names.get(player, ""), player_id=c.player_id(player),
                    total=result.totals[seat] if result else 0,
                    place=result.places[seat] if result else 0,
                    points=points.get(player, 0),
                    has_left=bool(result) and player in (result.leavers if result else ()),
                    is_no_show=bool(result) and player in (result.no_shows if result else ()),
                    matchpoints=float(board.matchpoints) if board else 0.0,
                    percentage=float(board.percentage) if board else 0.0))
            seated.tables.append(shown)
        message.rounds.append(seated)
    for round_no in sorted(c.announced):
        announced = c.announced[round_no]
        shown_round = pb.ChampionshipRound(round_number=round_no, is_announced=True,
                                           start_time=timestamp(announced.starts),
                                           is_final=round_no == final_round)
        for number, players in enumerate(announced.tables, start=1):
            shown_round.tables.append(pb.ChampionshipTable(table_number=number, seats=[
                pb.ChampionshipSeat(seat=seat, display_name=names.get(player, ""),
                                    player_id=c.player_id(player))
                for seat, player in enumerate(players)]))
        message.rounds.append(shown_round)
    return message




def _writer(context: Context) -> Callable[[Any], Awaitable[None]]:
    """A stream's write, counting what it sent (for the gateway's log line)."""
    found = caller()

    async def write(message: Any) -> None:
        await context.write(message)
        found.sent += 1
    return write


class StreamsPerAddress:
    """At most ``limit`` streams of one kind open from one address (0: no limit); the count
    of an address goes with its last stream."""

    def __init__(self, limit: int, what: str) -> None:
        self.limit = limit
        self._what = what
        self._open: dict[str, int] = {}

    @contextlib.contextmanager
    def one(self, address: str) -> Iterator[None]:
        """:raises ServiceError: RESOURCE_EXHAUSTED TOO_MANY_STREAMS."""
        count = self._open.get(address, 0)
        if self.limit and count >= self.limit:
            raise ServiceError.over_quota(
                f"{self.limit} {self._what} are open from this address, its most: close one",
                "TOO_MANY_STREAMS", f"{self._what} of {address}", 5.0)
        self._open[address] = count + 1
        try:
            yield
        finally:
            left = self._open[address] - 1
            if left:
                self._open[address] = left
            else:
                del self._open[address]

    def __len__(self) -> int:
        return len(self._open)


class Broadcast:
    """One championship's messages to its watchers on this node, as table spectators get a
    table's: a task reads each change once (``Championships.latest``) and publishes the
    shared part, waking every watcher once per message. Messages are spaced to bound the
    fan-out (each costs a write per watcher): at least ``tick`` apart, and with many watchers
    at most ``FANOUT_RUNNING`` / ``FANOUT_REGISTERING`` watcher-messages a second, up to
    ``SLOWEST_RUNNING`` seconds apart while it runs (a player learns their table within a
    second) and ``SLOWEST_REGISTERING`` while it takes registrations (nobody waits on those;
    its start is told at once)."""

    def __init__(self, championship_id: str, championships: Championships,
                 shared: Callable[[Championship], bytes], tick: float, recheck: float) -> None:
        self._id = championship_id
        self._championships = championships
        self._shared = shared
        self._tick = tick
        self._recheck = recheck
        self._watchers = 0
        self._generation = -1
        self._published: tuple[Championship, bytes] | None = None
        self._failed: BaseException | None = None
        self._event = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def join(self) -> None:
        self._watchers += 1
        if self._task is None or self._task.done():
            self._failed = None
            self._task = asyncio.get_running_loop().create_task(self._run())

    def leave(self) -> bool:
        """True when it was the last watcher (the task stops)."""
        self._watchers -= 1
        if self._watchers > 0:
            return False
        if self._task is not None:
            self._task.cancel()
        return True

    async def next(self, after: int) -> tuple[int, Championship, bytes]:
        """The message published after generation ``after``: the latest one at once if it is
        newer, else the next."""
        while self._generation <= after and self._failed is None:
            await self._event.wait()
        if self._failed is not None:
            raise self._failed
        assert self._published is not None
        return (self._generation, *self._published)

    def _publish(self, c: Championship) -> None:
        self._published = (c, self._shared(c))
        self._generation += 1
        self._event.set()
        self._event = asyncio.Event()

    def _spacing(self, c: Championship) -> float:
        if c.phase is Phase.REGISTERING:
            return max(self._tick, min(SLOWEST_REGISTERING, self._watchers / FANOUT_REGISTERING))
        return max(self._tick, min(SLOWEST_RUNNING, self._watchers / FANOUT_RUNNING))

    async def _space(self, c: Championship) -> None:
        """Waits before the next message (a burst of changes: one message); while it takes
        registrations, no longer than until it starts (each change read once for all)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._spacing(c)
        if c.phase is not Phase.REGISTERING:
            await asyncio.sleep(deadline - loop.time())
            return
        driver = self._championships.driver
        while (left := deadline - loop.time()) > 0:
            seen = driver.version(self._id)
            await driver.wait_change(self._id, seen, left)
            if driver.version(self._id) != seen \
                    and (await self._championships.latest(self._id)).phase \
                    is not Phase.REGISTERING:
                return

    async def _run(self) -> None:
        driver = self._championships.driver
        sent = -1
        try:
            while True:
                seen = driver.version(self._id)
                c = await self._championships.latest(self._id)
                if c.version > sent:
                    self._publish(c)
                    sent = c.version
                if c.phase.is_over:
                    return
                await driver.wait_change(self._id, seen, self._recheck)
                await self._space(c)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # the store unreachable: every watcher is told
            self._failed = error
            self._event.set()


class ChampionshipService(championships_pb2_grpc.ChampionshipServiceServicer):
    def __init__(self, championships: Championships, accounts: Accounts, live: Live, *,
                 watchers_per_address: int = 0, tick: float = 0.0,
                 recheck: float = 5.0) -> None:
        self._championships = championships
        self._accounts = accounts
        self._live = live
        self._watchers = StreamsPerAddress(watchers_per_address, "championship watchers")
        self._tick = tick
        self._recheck = recheck  # seconds a watch waits for a change before reading again
        self._shared_bytes: Bounded[str, tuple[int, bytes]] = Bounded(SHARED_KEPT)
        self._built: Bounded[str, tuple[int, pb.Championship]] = Bounded(SHARED_KEPT)
        self._broadcasts: dict[str, Broadcast] = {}  # championships watched on this node

    async def _me(self) -> Account:
        digest = caller().token_hash
        if digest is None or not caller().has_access_token:
            raise ServiceError.unauthenticated(
                "sign in first: send authorization: Bearer <access_token>", "SIGN_IN_REQUIRED")
        return await self._accounts.authenticate_digest(digest)

    async def _viewer(self) -> str:
        """The signed-in caller's account id, or "" (reading is public)."""
        if caller().token_hash is None or not caller().has_access_token:
            return ""
        try:
            return (await self._me()).id
        except ServiceError:
            return ""

    def _base(self, c: Championship) -> pb.Championship:
        """``built(c, is_full=True)``, once per version of each championship."""
        kept = self._built.get(c.id)
        if kept is not None and kept[0] == c.version:
            return kept[1]
        message = built(c, is_full=True)
        self._built[c.id] = (c.version, message)
        return message

    def _pb(self, c: Championship, you: str) -> pb.Championship:
        return championship_pb(c, you, is_full=True, live=self._live, base=self._base(c))

    async def CreateChampionship(self, request: pb.CreateChampionshipRequest, context: Context
                                 ) -> pb.CreateChampionshipResponse:
        self._championships.check_creation(caller().peer)  # before the account is read
        me = await self._me()
        made = await self._championships.create(
            settings_of(request.settings), me,
            _request_key("create", request.request_id, me.id), caller().peer)
        return pb.CreateChampionshipResponse(championship=self._pb(made, me.id))

    async def ListChampionships(self, request: pb.ListChampionshipsRequest, context: Context
                                ) -> pb.ListChampionshipsResponse:
        size = paging.page_size(request.page_size)
        offset = paging.decode_offset(paging.Listing.CHAMPIONSHIPS, request.page_token)
        you = await self._viewer()
        found = await self._championships.page(size, offset, request.include_finished)
        return pb.ListChampionshipsResponse(
            championships=[championship_pb(c, you) for c in found],
            next_page_token=paging.offset_token(paging.Listing.CHAMPIONSHIPS, offset + size)
            if len(found) == size else "")

    async def GetChampionship(self, request: pb.GetChampionshipRequest, context: Context
                              ) -> pb.GetChampionshipResponse:
        c = await self._championships.get(_id(request.championship_id))
        return pb.GetChampionshipResponse(championship=self._pb(c, await self._viewer()))

    async def ExportChampionship(self, request: pb.ExportChampionshipRequest,
                                 context: Context) -> pb.ExportChampionshipResponse:
        """The standings and rounds as a file, as anyone reads them (no caller's marks)."""
        c = await self._championships.get(_id(request.championship_id))
        return export(championship_pb(c, "", is_full=True), request.format)

    async def Register(self, request: pb.RegisterRequest, context: Context
                       ) -> pb.RegisterResponse:
        me = await self._me()
        c = await self._championships.register(_id(request.championship_id), me)
        return pb.RegisterResponse(championship=self._pb(c, me.id))

    async def Unregister(self, request: pb.UnregisterRequest, context: Context
                         ) -> pb.UnregisterResponse:
        me = await self._me()
        c = await self._championships.unregister(_id(request.championship_id), me.id)
        return pb.UnregisterResponse(championship=self._pb(c, me.id))

    async def Withdraw(self, request: pb.WithdrawRequest, context: Context
                       ) -> pb.WithdrawResponse:
        me = await self._me()
        c = await self._championships.withdraw(_id(request.championship_id), me.id)
        return pb.WithdrawResponse(championship=self._pb(c, me.id))

    async def CheckIn(self, request: pb.CheckInRequest, context: Context
                      ) -> pb.CheckInResponse:
        me = await self._me()
        c = await self._championships.check_in(_id(request.championship_id), me.id)
        return pb.CheckInResponse(championship=self._pb(c, me.id))

    async def WatchChampionship(  # type: ignore[override]  # it writes (context.write)
            self, request: pb.WatchChampionshipRequest, context: Context) -> None:
        """The championship's messages as this node's ``Broadcast`` publishes them (its part
        built once per version and shared by every watcher), each with the watcher's own
        table and player id; never an older version than the watcher got."""
        write = _writer(context)
        championship_id = _id(request.championship_id)
        with self._watchers.one(caller().peer):  # before the account is read: refused free
            you = await self._viewer()
            await self._championships.latest(championship_id)  # CHAMPIONSHIP_NOT_FOUND first
            await self._watch(championship_id, you, write)

    async def _watch(self, championship_id: str, you: str,
                     write: Callable[[Any], Awaitable[None]]) -> None:
        with self._joined(championship_id) as broadcast:
            last, generation = b"", -1
            while True:
                generation, c, shared = await broadcast.next(generation)
                shown = shared + self._own(c, you)
                if shown != last:
                    await write(shown)
                    last = shown
                if c.phase.is_over:
                    return

    @contextlib.contextmanager
    def _joined(self, championship_id: str) -> Iterator[Broadcast]:
        broadcast = self._broadcasts.get(championship_id)
        if broadcast is None:
            broadcast = Broadcast(championship_id, self._championships, self._shared,
                                  self._tick, self._recheck)
            self._broadcasts[championship_id] = broadcast
        broadcast.join()
        try:
            yield broadcast
        finally:
            if broadcast.leave() and self._broadcasts.get(championship_id) is broadcast:
                del self._broadcasts[championship_id]

    def _shared(self, c: Championship) -> bytes:
        """WatchChampionshipResponse.championship, serialized, the same for every watcher
        (no ``is_you``, no live tables): built once per version."""
        kept = self._shared_bytes.get(c.id)
        if kept is not None and kept[0] == c.version:
            return kept[1]
        shared = field(1, self._base(c).SerializeToString(deterministic=True))
        self._shared_bytes[c.id] = (c.version, shared)
        return shared

    def _own(self, c: Championship, you: str) -> bytes:
        """The watcher's own fields: its table now and its player id (registered only)."""
        if not you or c.registration(you) is None:
            return b""
        own = pb.WatchChampionshipResponse(your_player_id=c.player_id(you))
        seat = self._championships.seat_of(c, you)
        if seat is not None:
            own.your_table.CopyFrom(pb.YourTable(
                round_number=seat.round_no, table_id=seat.table_id, seat=seat.seat,
                player_token=seat.token))
        return own.SerializeToString(deterministic=True)


def _id(championship_id: str) -> str:
    return inputs.check_length("championship_id", championship_id, inputs.ID_MAX)


def _request_key(scope: str, request_id: str, who: str) -> str:
    inputs.check_length("request_id", request_id, inputs.ID_MAX)
    return f"{scope}/{who}/{request_id}" if request_id else ""


class ChampionshipAdmin:
    """AdminService's championship calls (the gateway checked the operator and the reason
    is written to the audit log)."""

    _championships: Championships | None

    def _ready(self, reason: str) -> Championships:
        inputs.check_length("reason", reason, REASON_MAX)
        if not reason.strip():
            raise ServiceError.invalid("reason is required: say why, for the audit log",
                                       "MISSING_REASON")
        if self._championships is None:
            raise ServiceError.unavailable("this server runs no championships")
        return self._championships

    async def CreateChampionship(self, request: admin_pb2.CreateChampionshipRequest,
                                 context: Context) -> admin_pb2.CreateChampionshipResponse:
        championships = self._ready(request.reason)
        made = await championships.create(settings_of(request.settings), None,
                                          _request_key("admin", request.request_id, ""))
        return admin_pb2.CreateChampionshipResponse(
            championship=championship_pb(made, is_full=True))

    async def StartChampionship(self, request: admin_pb2.StartChampionshipRequest,
                                context: Context) -> admin_pb2.StartChampionshipResponse:
        c = await self._ready(request.reason).start(_id(request.championship_id))
        return admin_pb2.StartChampionshipResponse(championship=championship_pb(c, is_full=True))

    async def CancelChampionship(self, request: admin_pb2.CancelChampionshipRequest,
                                 context: Context) -> admin_pb2.CancelChampionshipResponse:
        c = await self._ready(request.reason).cancel(_id(request.championship_id))
        return admin_pb2.CancelChampionshipResponse(
            championship=championship_pb(c, is_full=True))

    async def RemoveChampionshipPlayer(
            self, request: admin_pb2.RemoveChampionshipPlayerRequest, context: Context
    ) -> admin_pb2.RemoveChampionshipPlayerResponse:
        c = await self._ready(request.reason).remove(
            _id(request.championship_id),
            inputs.check_length("account_id", request.account_id, inputs.ID_MAX))
        return admin_pb2.RemoveChampionshipPlayerResponse(
            championship=championship_pb(c, is_full=True))

    async def PauseChampionship(self, request: admin_pb2.PauseChampionshipRequest,
                                context: Context) -> admin_pb2.PauseChampionshipResponse:
        c = await self._ready(request.reason).pause(_id(request.championship_id),
                                                    request.is_paused)
        return admin_pb2.PauseChampionshipResponse(championship=championship_pb(c, is_full=True))

    async def CorrectChampionshipResult(
            self, request: admin_pb2.CorrectChampionshipResultRequest, context: Context
    ) -> admin_pb2.CorrectChampionshipResultResponse:
        championships = self._ready(request.reason)
        if len(request.totals) > 5 or len(request.leaver_seats) > 5 \
                or len(request.no_show_seats) > 5:
            raise ServiceError.invalid("a table has 3 to 5 seats", "INVALID_RESULT")
        c = await championships.correct(_id(request.championship_id), Correction(
            request.round_number, request.table_number, tuple(request.totals),
            request.set_absences, tuple(request.leaver_seats), tuple(request.no_show_seats),
            request.reason.strip()))
        return admin_pb2.CorrectChampionshipResultResponse(
            championship=championship_pb(c, is_full=True))

    async def DisqualifyChampionshipPlayer(
            self, request: admin_pb2.DisqualifyChampionshipPlayerRequest, context: Context
    ) -> admin_pb2.DisqualifyChampionshipPlayerResponse:
        c = await self._ready(request.reason).disqualify(
            _id(request.championship_id),
            inputs.check_length("player", request.player, inputs.ID_MAX))
        return admin_pb2.DisqualifyChampionshipPlayerResponse(
            championship=championship_pb(c, is_full=True))

    async def ReseatChampionshipRound(
            self, request: admin_pb2.ReseatChampionshipRoundRequest, context: Context
    ) -> admin_pb2.ReseatChampionshipRoundResponse:
        c = await self._ready(request.reason).reseat(
            _id(request.championship_id), request.round_number,
            inputs.check_length("player_a", request.player_a, inputs.ID_MAX),
            inputs.check_length("player_b", request.player_b, inputs.ID_MAX))
        return admin_pb2.ReseatChampionshipRoundResponse(
            championship=championship_pb(c, is_full=True))


SERVICE_NAME = pb.DESCRIPTOR.services_by_name["ChampionshipService"].full_name


def championship_handlers(championships: Championships, accounts: Accounts, live: Live, *,
                          watchers_per_address: int = 0, tick: float = 0.0,
                          recheck: float = 5.0) -> dict[str, dict[str, Any]]:
    """The ChampionshipService's method handlers, by service name (for the gateway)."""
    return service_handlers(championships_pb2_grpc.add_ChampionshipServiceServicer_to_server,
                            ChampionshipService(championships, accounts, live,
                                                watchers_per_address=watchers_per_address,
                                                tick=tick, recheck=recheck))

"""The ChampionshipService servicer and the operator's championship calls (a mixin of
AdminService): check sizes, decode, call ``Championships``, encode. Who calls comes from the
gateway (``caller()``): a signed-in account by its access token's digest."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Literal

import grpc
from copas.admin.v1 import admin_pb2
from copas.v1 import championships_pb2 as pb
from copas.v1 import championships_pb2_grpc, copas_pb2

from engine.championship import BoardScore, Scoring, championship_points
from server import codec, names
from server.accounts.model import Account
from server.accounts.service import Accounts
from server.bounded import Bounded
from server.championships.model import Championship, Phase
from server.championships.service import Championships, Correction, NewChampionship
from server.errors import ServiceError
from server.rpc import inputs
from server.rpc.gateway import caller, service_handlers
from server.rpc.operators import REASON_MAX
from server.tables import paging
from server.wire import field, timestamp

Context = grpc.aio.ServicerContext[Any, Any]
SHARED_KEPT = 256  # championships whose latest shared message this node keeps
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
    """:raises ServiceError: INVALID_ARGUMENT for a field too long, rules unknown or a
    scoring this server does not know."""
    scoring = _SCORING.get(message.scoring)
    if scoring is None:
        raise ServiceError.invalid("scoring is places or matchpoints", "INVALID_CHAMPIONSHIP")
    return NewChampionship(
        name=names.clean(message.display_name, CHAMPIONSHIP_NAME_MAX, required=False,
                         is_reserved_checked=False),
        rounds=message.rounds,
        preset=inputs.check_length("preset", message.preset, inputs.PRESET_MAX,
                                   "INVALID_RULES"),
        overrides=codec.rules_overrides(message.rules), duplicate_deals=message.duplicate_deals,
        max_players=message.max_players, min_players=message.min_players,
        start_at=_time(message, "start_time"),
        start_when_full=message.start_when_full, round_pause=message.round_pause_seconds,
        scoring=scoring, buchholz=message.buchholz, final_table=message.final_table,
        registration_opens=_time(message, "registration_open_time"),
        registration_closes=_time(message, "registration_close_time"),
        late_entry_rounds=message.late_entry_rounds, check_in=message.check_in_seconds,
        drop_absent=message.drop_absent if message.HasField("drop_absent") else True,
        round_time_limit=message.round_time_limit_seconds,
        pairing_notice=message.pairing_notice_seconds)


def championship_pb(c: Championship, you: str = "", *, is_full: bool = False,
                    live: Live | None = None) -> pb.Championship:
    """The championship as ``you`` (an account id, or "") sees it; ``is_full``: with its
    players and rounds."""
    spec = c.spec
    names = {r.account_id: r.display_name for r in c.registrations}
    withdrawn = {r.account_id for r in c.registrations if r.withdrawn is not None}
    accounts = c.accounts_by_player_id()
    message = pb.Championship(
        championship_id=c.id, state=_PHASES[c.phase], rules=codec.rules_to_pb(spec.game),
        create_time=timestamp(spec.created), player_count=len(c.registrations),
        current_round=c.current_round, is_registered=you in names,
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
            pairing_notice_seconds=spec.pairing_notice))
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
    registered = {r.account_id: r for r in c.registrations}
    finished = c.counted_ids()
    c = c.published()  # with duplicate deals, a round's results once every table of it ended
    for line in c.standings():
        account = accounts.get(line.player, "")
        registration = registered.get(account)
        message.standings.append(pb.StandingLine(
            place=line.place, display_name=names.get(account, ""), points=line.points,
            firsts=float(line.firsts), relative_points=float(line.relative_points),
            head_to_head=line.head_to_head, games=line.games,
            decided_by=pb.TieBreak.ValueType(int(line.decided_by) + 1),
            has_withdrawn=account in withdrawn, is_you=bool(you) and account == you,
            player_id=line.player, matchpoints=float(line.matchpoints),
            percentage=float(line.percentage), buchholz=float(line.buchholz),
            final_place=line.final, is_disqualified=line.disqualified,
            is_dropped=registration is not None and registration.dropped > 0))
    for r in c.registrations:
        message.players.append(pb.ChampionshipPlayer(
            display_name=r.display_name, has_withdrawn=r.withdrawn is not None,
            is_you=r.account_id == you, player_id=c.player_id(r.account_id),
            is_checked_in=r.checked_in is not None, is_dropped=r.dropped > 0,
            is_disqualified=r.disqualified is not None, first_round=r.first_round))
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
                shown.end_reason = codec.END_REASON_TO_PB[found.end_reason]
            for seat, player in enumerate(table.players):
                board = boards.get((round_no, table.table_no, seat))
                shown.seats.append(pb.ChampionshipSeat(
                    seat=seat, display_name=names.get(player, ""),
                    is_you=bool(you) and player == you, player_id=c.player_id(player),
                    total=result.totals[seat] if result else 0,
                    place=result.places[seat] if result else 0,
                    points=points.get(player, 0),
                    has_left=bool(result) and player in (result.leavers if result else ()),
                    is_no_show=bool(result) and player in (result.no_shows if result else ()),
                    matchpoints=float(board.matchpoints) if board else 0.0,
                    percentage=float(board.percentage) if board else 0.0))
            summary = live(table.table_id) if live is not None \
                and table.table_id not in finished else None
            if summary is not None:
                shown.live.CopyFrom(summary)
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
                                    is_you=bool(you) and player == you,
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


class _Feed:
    """One championship's watchers on this node: a task of its own waits for each change
    (then the tick), reads it once and wakes them all, so that a watcher only writes."""

    __slots__ = ("changed", "current", "error", "task", "watchers")

    def __init__(self) -> None:
        self.current: Championship | None = None
        self.changed = asyncio.Event()
        self.error: Exception | None = None
        self.watchers = 0
        self.task: asyncio.Task[None] | None = None

    def publish(self, c: Championship | None, error: Exception | None = None) -> None:
        if c is not None:
            self.current = c
        self.error = error
        changed, self.changed = self.changed, asyncio.Event()
        changed.set()

    async def newer(self, version: int) -> Championship:
        """The championship once it is newer than ``version``.

        :raises Exception: what the feed's read raised (CHAMPIONSHIP_NOT_FOUND, the store's
            failure).
        """
        while True:
            if self.error is not None:
                raise self.error
            if self.current is not None and self.current.version > version:
                return self.current
            await self.changed.wait()


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
        self._feeds: dict[str, _Feed] = {}  # the championships watched here

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

    def _pb(self, c: Championship, you: str) -> pb.Championship:
        return championship_pb(c, you, is_full=True, live=self._live)

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
        """The championship now, then one message per change (at most one a ``tick``): the
        championship's part read and built once per version and shared by every watcher of
        this node (``_Feed``), then each watcher's own table and player id; never an older
        version than the watcher got."""
        write = _writer(context)
        championship_id = _id(request.championship_id)
        with self._watchers.one(caller().peer):  # before the account is read: refused free
            you = await self._viewer()
            c = await self._championships.latest(championship_id)
            with self._following(championship_id) as feed:
                last, sent = b"", -1
                while True:
                    if c.version > sent:
                        shown = self._shared(c) + self._own(c, you)
                        if shown != last:
                            await write(shown)
                            last = shown
                        sent = c.version
                    if c.phase.is_over:
                        return
                    c = await feed.newer(sent)

    @contextlib.contextmanager
    def _following(self, championship_id: str) -> Iterator[_Feed]:
        """The championship's feed here (started by its first watcher, stopped after its
        last)."""
        feed = self._feeds.get(championship_id)
        if feed is None:
            feed = self._feeds[championship_id] = _Feed()
            feed.task = asyncio.create_task(self._feed(championship_id, feed))
        feed.watchers += 1
        try:
            yield feed
        finally:
            feed.watchers -= 1
            if not feed.watchers:
                assert feed.task is not None
                feed.task.cancel()
                if self._feeds.get(championship_id) is feed:
                    del self._feeds[championship_id]

    async def _feed(self, championship_id: str, feed: _Feed) -> None:
        """Reads the championship at each change this node hears of (or after ``recheck``
        seconds without one: another node's change whose notice was lost), a ``tick`` after
        it (a burst of changes: one read), and publishes what is newer; until it is over or
        its read fails (then its watchers end with the failure)."""
        driver = self._championships.driver
        try:
            while True:
                seen = driver.version(championship_id)
                c = await self._championships.latest(championship_id)
                if feed.current is None or c.version > feed.current.version:
                    feed.publish(c)
                if c.phase.is_over:
                    return
                await driver.wait_change(championship_id, seen, self._recheck)
                await asyncio.sleep(self._tick)
        except Exception as exc:  # CHAMPIONSHIP_NOT_FOUND, the store's failure
            feed.publish(None, exc)
        finally:
            if self._feeds.get(championship_id) is feed:
                del self._feeds[championship_id]

    def _shared(self, c: Championship) -> bytes:
        """WatchChampionshipResponse.championship, serialized, the same for every watcher
        (no ``is_you``, no live tables): built once per version."""
        kept = self._shared_bytes.get(c.id)
        if kept is not None and kept[0] == c.version:
            return kept[1]
        message = championship_pb(c, "", is_full=True)
        built = field(1, message.SerializeToString(deterministic=True))
        self._shared_bytes[c.id] = (c.version, built)
        return built

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

"""The gRPC servicer: check sizes, decode, call the tables, encode, answer once durable.
Nothing else lives here (the caller, quotas, routing, errors and logs are the gateway's:
``server.rpc.gateway``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import grpc
import structlog
from copas.v1 import copas_pb2, copas_pb2_grpc
from prometheus_client.core import GaugeMetricFamily

from server import names
from server.accounts.service import Accounts
from server.errors import ServiceError
from server.observability import gauges
from server.rpc import inputs
from server.rpc.gateway import StreamRequests, caller
from server.rpc.play import PlayStream
from server.rpc.quotas import Quotas
from server.store.records import record_to_pb
from server.tables import paging, reactions, rematch
from server.tables.creation import game_module
from server.tables.idempotency import JOIN_REQUEST_ID_MIN, fingerprint
from server.tables.lobby import LobbyFilter, LobbySource
from server.tables.records import Records
from server.tables.registry import TableRegistry
from server.tables.rematch import Rematches
from server.wire import field

Context = grpc.aio.ServicerContext[Any, Any]


def _request_id(request: Any, minimum: int = 0, *, is_secret: bool = False) -> str:
    """The request's id; logged unless it is a secret (JoinTable's unlocks the token)."""
    request_id: str = request.request_id
    inputs.check_length("request_id", request_id, inputs.ID_MAX, "INVALID_REQUEST_ID")
    if request_id:
        if len(request_id) < minimum:
            raise ServiceError.invalid(
                f"request_id must be at least {minimum} characters here: it must be "
                "unguessable (use a random UUID)", "INVALID_REQUEST_ID")
        if not is_secret:
            structlog.contextvars.bind_contextvars(request_id=request_id)
    return request_id


def _table_id(request: Any) -> str:
    table_id: str = inputs.check_length("table_id", request.table_id, inputs.ID_MAX)
    structlog.contextvars.bind_contextvars(table_id=table_id)
    return table_id


def _lobby_filter(request: Any) -> LobbyFilter:
    """ListTables' and WatchLobby's filters."""
    preset = inputs.check_length("preset", request.preset, inputs.PRESET_MAX)
    if request.players < 0:
        raise ServiceError.invalid("players must be 0 (any) or 3..5", "INVALID_RULES")
    return LobbyFilter(request.only_joinable, preset, request.players,
                       request.include_finished)


def _page_token(request: Any) -> str:
    token: str = request.page_token
    return inputs.check_length("page_token", token, inputs.PAGE_TOKEN_MAX,
                               "INVALID_PAGE_TOKEN")


def _writer(context: Context) -> Callable[[Any], Awaitable[None]]:
    """A stream's write, counting what it sent (for the gateway's log line)."""
    found = caller()

    async def write(message: Any) -> None:
        await context.write(message)
        found.sent += 1
    return write


Published = Callable[[str, str], Awaitable[bool]]
"""Whether the record of a championship's table may be shown (its round is over)."""


async def _always() -> bool:
    return True


class CopasService(copas_pb2_grpc.CopasServiceServicer):
    def __init__(self, registry: TableRegistry, lobby: LobbySource, records: Records,
                 quotas: Quotas, accounts: Accounts,
                 published: Published = lambda championship, table: _always()) -> None:
        self.registry = registry
        self.accounts = accounts  # who a JoinTable with an access token seats
        self.delivery = registry.delivery  # the barrier: answer once committed
        self.lobby = lobby
        self.records = records
        self.quotas = quotas
        self.play_streams: set[PlayStream] = set()  # open Play streams (for the gauges)
        self.rematches = Rematches(registry, registry.settings.rematch_window)
        self.published = published  # whether a championship table's record is shown yet

    def gauges(self) -> Iterable[GaugeMetricFamily]:
        return gauges(
            ("copas_play_streams", "Play streams open", len(self.play_streams)),
            ("copas_play_results_waiting", "Actions on Play streams whose result is not sent",
             sum(s.results_waiting() for s in self.play_streams)))

    async def CreateTable(self, request: copas_pb2.CreateTableRequest, context: Context
                          ) -> copas_pb2.CreateTableResponse:
        inputs.check_length("preset", request.preset, inputs.PRESET_MAX, "INVALID_RULES")
        inputs.check_length("seed", request.seed, inputs.SEED_MAX)
        inputs.check_length("bot_policy", request.bot_policy, inputs.PRESET_MAX,
                            "INVALID_BOT_POLICY")
        inputs.check_length("rating", request.rating, inputs.PRESET_MAX, "INVALID_RATING_RULE")
        is_seating = request.HasField("player_display_name")
        # A request that seats its caller has a secret id, as a JoinTable's: it gets the token.
        request_id = _request_id(request, JOIN_REQUEST_ID_MIN if is_seating else 0,
                                 is_secret=is_seating)
        name = names.clean(request.display_name, names.TABLE_MAX, required=False,
                           is_reserved_checked=False)
        # The person's name is checked before any table is made: a refusal leaves none.
        person, account_id = await self._person(request.player_display_name) \
            if is_seating else ("", "")
        inputs.check_length("game", request.game, inputs.PRESET_MAX, "INVALID_RULES")
        overrides = game_module(request.game).rules_overrides(request.rules)
        seed = request.seed if request.HasField("seed") else None
        bot_pace = request.rules.bot_pace_seconds \
            if request.rules.HasField("bot_pace_seconds") else None
        table = self.registry.create(
            preset=request.preset, overrides=overrides, bot_seats=request.bot_seats, name=name,
            seed=seed, request_id=request_id, bot_policy=request.bot_policy,
            rating=request.rating, bot_pace=bot_pace,
            creator=caller().peer, game=request.game,
            fingerprint=fingerprint("CreateTable", request.preset or "online", overrides,
                                    request.bot_seats, name, seed, request.bot_policy,
                                    *([request.rating] if request.rating else []),
                                    *([bot_pace] if bot_pace is not None else []),
                                    *(["seat", person, account_id] if is_seating else []),
                                    *([request.game] if request.game else []))
            if request_id else "")
        structlog.contextvars.bind_contextvars(table_id=table.id)
        seat, token = 0, ""
        if is_seating:
            seat, token = self._seat_creator(table.id, person, account_id, request_id)
        await self.delivery.committed(table)  # the table, and its seat, durable first
        return copas_pb2.CreateTableResponse(table=table.summary(), seat=seat,
                                             player_token=token)

    def _seat_creator(self, table_id: str, name: str, account_id: str, request_id: str
                      ) -> tuple[int, str]:
        """The creator's seat at the table just made (a retry: the same seat and token); a
        refusal (the server full of people) takes the table back, so none is left behind."""
        try:
            _, seat, token = self.registry.join(
                table_id, name, None, request_id,
                fingerprint("JoinTable", table_id, "", None, name, None,
                            *([account_id] if account_id else [])) if request_id else "",
                account_id=account_id, address=caller().peer)
        except ServiceError as error:
            self.registry.release(table_id, error)
            raise
        structlog.contextvars.bind_contextvars(seat=seat)
        return seat, token

    async def ListTables(self, request: copas_pb2.ListTablesRequest, context: Context
                         ) -> copas_pb2.ListTablesResponse:
        summaries, token = await self.lobby.page(request.page_size, _page_token(request),
                                                 _lobby_filter(request))
        return copas_pb2.ListTablesResponse(tables=summaries, next_page_token=token)

    async def WatchLobby(  # type: ignore[override]  # it writes its messages (context.write)
            self, request: copas_pb2.WatchLobbyRequest, context: Context) -> None:
        write = _writer(context)
        async for message in self.lobby.watch(_lobby_filter(request)):
            await write(message)

    async def GetTable(self, request: copas_pb2.GetTableRequest, context: Context
                       ) -> copas_pb2.GetTableResponse:
        table = self.registry.get(_table_id(request))
        # The summary as of now, answered once now is committed: bots keep moving during the
        # commit, and a phase shown (GAME_OVER) must already be on disk (its record too).
        summary = table.summary()
        summary.rematch_table_id = self.rematches.rematch_of(table.id)
        await self.delivery.committed(table)
        return copas_pb2.GetTableResponse(table=summary)

    async def _person(self, display_name: str) -> tuple[str, str]:
        """The name and account id a seat is taken under: the signed-in caller's account
        (its name unless ``display_name`` gives one), else ``display_name``, required.

        :raises ServiceError: INVALID_ARGUMENT INVALID_NAME or NAME_RESERVED."""
        found = caller()
        account = await self.accounts.authenticate_digest(found.token_hash) \
            if found.has_access_token and found.token_hash is not None else None
        name = names.person(display_name, required=account is None)
        if account is None:
            return name, ""
        if name and names.name_key(name) != names.name_key(account.display_name):
            raise ServiceError.invalid(
                "a signed-in seat takes its account's name: leave display_name empty, or "
                "rename the account (AccountService.UpdateProfile)", "INVALID_NAME")
        return account.display_name, account.id

    async def JoinTable(self, request: copas_pb2.JoinTableRequest, context: Context
                        ) -> copas_pb2.JoinTableResponse:
        table_id = _table_id(request)
        request_id = _request_id(request, JOIN_REQUEST_ID_MIN, is_secret=True)
        if not table_id and not request.preset:
            raise ServiceError.invalid("table_id (or preset, for a quick match) is required",
                                       "MISSING_TABLE_ID")
        inputs.check_length("preset", request.preset, inputs.PRESET_MAX, "INVALID_RULES")
        name, account_id = await self._person(request.display_name)
        seat_asked = request.seat if request.HasField("seat") else None
        players = request.players if request.HasField("players") else None
        inputs.check_length("game", request.game, inputs.PRESET_MAX, "INVALID_RULES")
        partnerships = request.partnerships if request.HasField("partnerships") else None
        self.rematches.check_joinable(table_id)
        table, seat, token = self.registry.join(
            table_id, name, seat_asked, request_id,
            fingerprint("JoinTable", table_id, request.preset, players, name, seat_asked,
                        *([account_id] if account_id else []),
                        *(["game", request.game, partnerships] if request.game
                          or partnerships is not None else [])) if request_id else "",
            preset=request.preset, players=players, account_id=account_id,
            address=caller().peer, game=request.game, partnerships=partnerships)
        structlog.contextvars.bind_contextvars(seat=seat)
        await self.delivery.committed(table)  # the seat is durable before the token is given
        return copas_pb2.JoinTableResponse(seat=seat, player_token=token, table=table.summary())

    async def Rematch(self, request: copas_pb2.RematchRequest, context: Context
                      ) -> copas_pb2.RematchResponse:
        table_id = _table_id(request)
        request_id = _request_id(request, JOIN_REQUEST_ID_MIN, is_secret=True)
        found = caller()
        # A signed-in person may show their account instead of their old seat's token.
        account = await self.accounts.authenticate_digest(found.token_hash) \
            if found.has_access_token and found.token_hash is not None else None
        if account is None and found.token_hash is not None:
            await self._check_seat_signed_in(found.token_hash)
        was_offered = bool(self.rematches.rematch_of(table_id))
        table, seat, token = self.rematches.accept(
            None if account is not None else found.token_hash,
            account.id if account is not None else "", table_id, request_id, found.peer)
        structlog.contextvars.bind_contextvars(seat=seat, rematch_table_id=table.id)
        await self.delivery.committed(table)  # the seat is durable before the token is given
        if not was_offered and self.registry.holds(table_id):  # the streams there are told
            old = self.registry.get(table_id)
            if old.rematch_id == table.id:
                rematch.offered(old)
                self.delivery.step_ended(old)
        return copas_pb2.RematchResponse(seat=seat, player_token=token, table=table.summary())

    async def _check_seat_signed_in(self, token_hash: str) -> None:
        """A seat token of a signed-in person's seat carries their account into a rematch
        only while the account is signed in somewhere: after "sign out everywhere" (a lost
        phone) the seat tokens its browsers kept do not play rated games as them.

        :raises ServiceError: UNAUTHENTICATED SESSION_REVOKED."""
        entry = self.registry.seating.seat_of(token_hash)
        if entry is None or not self.registry.holds(entry[0]):
            return  # the rematch's own checks answer
        account_id = self.registry.get(entry[0]).seats[entry[1]].account_id
        if account_id and not await self.accounts.is_signed_in(account_id):
            raise ServiceError.unauthenticated(
                "that seat's account signed out everywhere: sign in, then ask for the "
                "rematch with your account's access token", "SESSION_REVOKED")

    async def _act(self, request: Any, method: str) -> int:
        """Authenticate, apply, and answer once the action is durable."""
        game = self.registry.game_module_of(request.table_id)  # the table's game reads it
        make, content = game.decode_action(method, request)
        table_id = _table_id(request)
        request_id = _request_id(request)
        token_hash = caller().token_hash
        try:
            table, seat = self.registry.authenticate(token_hash, table_id)
        except ServiceError:
            if method == "LeaveTable" and request_id and token_hash is not None:
                first = self.registry.seating.first_answer_of_revoked(token_hash, request_id)
                if first is not None:  # a retried LeaveTable that gave the seat up
                    return first
            raise
        structlog.contextvars.bind_contextvars(seat=seat)
        acted = table.act(seat, make(seat), request_id,
                          fingerprint(method, table.id, content) if request_id else "")
        await self.delivery.committed(table)
        return acted.first

    async def PassCards(self, request: copas_pb2.PassCardsRequest, context: Context
                        ) -> copas_pb2.PassCardsResponse:
        return copas_pb2.PassCardsResponse(sequence=await self._act(request, "PassCards"))

    async def PlayCard(self, request: copas_pb2.PlayCardRequest, context: Context
                       ) -> copas_pb2.PlayCardResponse:
        return copas_pb2.PlayCardResponse(sequence=await self._act(request, "PlayCard"))

    async def ChooseMoon(self, request: copas_pb2.ChooseMoonRequest, context: Context
                         ) -> copas_pb2.ChooseMoonResponse:
        return copas_pb2.ChooseMoonResponse(sequence=await self._act(request, "ChooseMoon"))

    async def LeaveTable(self, request: copas_pb2.LeaveTableRequest, context: Context
                         ) -> copas_pb2.LeaveTableResponse:
        return copas_pb2.LeaveTableResponse(sequence=await self._act(request, "LeaveTable"))

    async def React(self, request: copas_pb2.ReactRequest, context: Context
                    ) -> copas_pb2.ReactResponse:
        """A seated person's reaction (issue 30), shown live, never logged: see
        ``server.tables.reactions``."""
        table_id = _table_id(request)
        _request_id(request)
        table, seat = self.registry.authenticate(caller().token_hash, table_id)
        structlog.contextvars.bind_contextvars(seat=seat)
        reactions.check_seated(table, seat)
        reaction = reactions.check(request.reaction)
        self.quotas.admit_reaction(table.id, seat)
        reactions.show(table, seat, reaction)
        self.delivery.step_ended(table)  # shown after what the table staged before it
        return copas_pb2.ReactResponse()

    async def Play(  # type: ignore[override]  # the gateway's requests; it writes its own
            self, requests: StreamRequests, context: Context) -> None:
        first: copas_pb2.PlayRequest | None = requests.first
        if first is None or first.WhichOneof("kind") != "open":
            raise ServiceError.invalid("a Play stream starts with `open` (the table)",
                                       "INVALID_PLAY_STREAM")
        opening = first.open
        table_id = _table_id(opening)
        if opening.after_sequence < 0:
            raise ServiceError.invalid("after_sequence must not be negative",
                                       "INVALID_SEQUENCE")
        found = caller()
        table, seat = self.registry.authenticate(found.token_hash, table_id)
        structlog.contextvars.bind_contextvars(seat=seat)
        stream = PlayStream(self.registry, self.quotas, table, seat, found, context)
        rest, parse = requests.rest, requests.parse
        after, is_batched = opening.after_sequence, opening.is_batched
        del requests, first, opening  # the opening is not held for the stream's life
        self.play_streams.add(stream)
        try:
            await stream.run(rest, parse, after, is_batched)
        finally:
            self.play_streams.discard(stream)

    async def WatchTable(  # type: ignore[override]  # it writes its messages (context.write)
            self, request: copas_pb2.WatchTableRequest, context: Context) -> None:
        table_id = _table_id(request)
        if request.after_sequence < 0:
            raise ServiceError.invalid("after_sequence must not be negative",
                                       "INVALID_SEQUENCE")
        found = caller()
        table, seat = self.registry.seat_for_watch(found.token_hash, table_id)
        if seat is not None:
            structlog.contextvars.bind_contextvars(seat=seat)
        else:  # a spectator's snapshot is charged for the missed events it lists
            self.quotas.charge_snapshot(found.peer, table.fanout.listed(
                table.sequence, request.after_sequence, is_spectator=True))
        watcher = table.add_watcher(seat, found.token_hash if seat is not None else None,
                                    request.is_batched)
        write = _writer(context)
        try:
            # The snapshot as of now, written once now is durable (later steps follow it).
            first = table.snapshot(watcher, request.after_sequence)
            await self.delivery.committed()  # show only what is durable
            if not watcher.is_closed:  # the token may have been revoked meanwhile
                await write(watcher.opening(first))
            while True:
                if watcher.is_closed:
                    if watcher.close_error is not None:
                        raise watcher.close_error
                    return
                await watcher.wakeup.wait()
                watcher.wakeup.clear()
                if watcher.is_closed:
                    continue
                if watcher.needs_snapshot:
                    await write(watcher.opening(table.snapshot(watcher, 0)))
                move_to_view = self.registry.metrics.move_to_view
                while watcher.queue and not watcher.is_closed:
                    await write(watcher.pop()[1])  # a serialized WatchTableResponse
                    move_to_view.observe(time.monotonic() - watcher.last_staged)
        finally:
            table.remove_watcher(watcher)

    async def GetView(self, request: copas_pb2.GetViewRequest, context: Context
                      ) -> copas_pb2.GetViewResponse:
        table, seat = self.registry.seat_for_watch(caller().token_hash, _table_id(request))
        view, sequence = table.view(seat), table.sequence  # as of now, answered once durable
        await self.delivery.committed(table)
        return copas_pb2.GetViewResponse(view=view, sequence=sequence)

    async def GetGameRecord(  # type: ignore[override]  # the stored answer, serialized
            self, request: copas_pb2.GetGameRecordRequest, context: Context) -> bytes:
        if not request.record_id:
            raise ServiceError.invalid("record_id is required", "MISSING_RECORD_ID")
        inputs.check_length("record_id", request.record_id, inputs.ID_MAX)
        record = await asyncio.to_thread(self.records.get, request.record_id)
        championship = copas_pb2.GameRecord.FromString(record).championship_id
        if championship and not await self.published(championship, request.record_id):
            raise ServiceError.precondition(
                "this game's championship round is still being played: its record is "
                "published when the round ends", "RECORD_WITHHELD")
        moved = await self.accounts.game_ratings(request.record_id)
        ratings = copas_pb2.GameRecord(ratings=[
            copas_pb2.SeatRating(
                seat=u.seat, mu_before=u.before.mu, sigma_before=u.before.sigma,
                games_before=u.before.games, mu_after=u.after.mu, sigma_after=u.after.sigma,
                games_after=u.after.games, rating_before=u.before.shown,
                rating_after=u.after.shown, opponents=u.opponents)
            for u in moved])
        # GetGameRecordResponse.record: the stored record, its ratings appended (a message's
        # fields may come in any order; repeated ones concatenate).
        return field(1, record + ratings.SerializeToString())

    async def ListGameRecords(self, request: copas_pb2.ListGameRecordsRequest,
                              context: Context) -> copas_pb2.ListGameRecordsResponse:
        if request.account_id:
            me = caller()
            account = await self.accounts.authenticate_digest(me.token_hash) \
                if me.has_access_token and me.token_hash is not None else None
            if account is None or account.id != request.account_id:
                raise ServiceError.denied("an account's games are listed for that account "
                                          "only, signed in", "NOT_YOUR_ACCOUNT")
            return await self._records_of(request)
        rows, token = await asyncio.to_thread(self.records.page, request.page_size,
                                              _page_token(request))
        shown = [r for r in rows if not r.championship
                 or await self.published(r.championship, r.record_id)]  # (a page may be short)
        return copas_pb2.ListGameRecordsResponse(records=[record_to_pb(r) for r in shown],
                                                 next_page_token=token)

    async def _records_of(self, request: copas_pb2.ListGameRecordsRequest
                          ) -> copas_pb2.ListGameRecordsResponse:
        """One account's records, newest first, through its history."""
        account_id = inputs.check_length("account_id", request.account_id, inputs.ID_MAX)
        size = paging.page_size(request.page_size)
        games = await self.accounts.games_of_id(account_id, size,
                                                paging.decode(paging.Listing.MY_GAMES,
                                                              _page_token(request)))
        records = []
        for game in games:
            found = await asyncio.to_thread(self.records.find, game.record_id)
            if found is not None:  # (a record retention removed is skipped)
                record = copas_pb2.GameRecord.FromString(found)
                if record.championship_id and not await self.published(
                        record.championship_id, record.record_id):
                    continue  # its round is still being played
                record.ClearField("record_json")
                records.append(record)
        last = games[-1] if len(games) == size else None
        return copas_pb2.ListGameRecordsResponse(
            records=records,
            next_page_token=paging.encode(paging.Listing.MY_GAMES, (last.finished, last.record_id))
            if last else "")

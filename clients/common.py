"""What every Copas client needs: a channel, a player's credentials, cards as text, and a
seat's stream that reconnects by itself: by default one Play stream (actions in, events and
results out), or, with ``--transport unary``, WatchTable for the events and a unary call per
action. Imports only grpc, the generated copas.v1 code and the google.rpc messages a refusal
carries."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import uuid
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, overload

import grpc
from copas.v1 import cards_pb2, copas_pb2, copas_pb2_grpc
from google.protobuf.message import DecodeError
from google.rpc import error_details_pb2, status_pb2

DEFAULT_SERVER = "localhost:50051"
SUIT_SYMBOL = {cards_pb2.SUIT_CLUBS: "♣", cards_pb2.SUIT_DIAMONDS: "♦",
               cards_pb2.SUIT_SPADES: "♠", cards_pb2.SUIT_HEARTS: "♥"}
DIRECTION_TEXT = {copas_pb2.PASS_DIRECTION_LEFT: "left", copas_pb2.PASS_DIRECTION_RIGHT: "right",
                  copas_pb2.PASS_DIRECTION_ACROSS: "across",
                  copas_pb2.PASS_DIRECTION_HOLD: "none (hold)"}
RETRYABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}
_RANKS = {"2": cards_pb2.RANK_TWO, "3": cards_pb2.RANK_THREE, "4": cards_pb2.RANK_FOUR,
          "5": cards_pb2.RANK_FIVE, "6": cards_pb2.RANK_SIX, "7": cards_pb2.RANK_SEVEN,
          "8": cards_pb2.RANK_EIGHT, "9": cards_pb2.RANK_NINE, "10": cards_pb2.RANK_TEN,
          "T": cards_pb2.RANK_TEN, "J": cards_pb2.RANK_JACK, "Q": cards_pb2.RANK_QUEEN,
          "K": cards_pb2.RANK_KING, "A": cards_pb2.RANK_ACE}
_SUITS = {"C": cards_pb2.SUIT_CLUBS, "D": cards_pb2.SUIT_DIAMONDS, "S": cards_pb2.SUIT_SPADES,
          "H": cards_pb2.SUIT_HEARTS, "♣": cards_pb2.SUIT_CLUBS, "♦": cards_pb2.SUIT_DIAMONDS,
          "♠": cards_pb2.SUIT_SPADES, "♥": cards_pb2.SUIT_HEARTS, "♧": cards_pb2.SUIT_CLUBS,
          "♢": cards_pb2.SUIT_DIAMONDS, "♤": cards_pb2.SUIT_SPADES, "♡": cards_pb2.SUIT_HEARTS}


def parse_card(text: str) -> cards_pb2.Card | None:
    """'qs', '10h', 'Th', 'A♠' -> a Card; None when it is not a card."""
    t = text.strip().upper().replace("\ufe0f", "")  # emoji presentation of ♠ ♥ ♦ ♣
    if len(t) < 2 or t[:-1] not in _RANKS or t[-1] not in _SUITS:
        return None
    return cards_pb2.Card(suit=_SUITS[t[-1]], rank=_RANKS[t[:-1]])


def pretty(card: cards_pb2.Card) -> str:
    """'Q♠' for QS."""
    return card.text[:-1] + SUIT_SYMBOL.get(card.suit, "?")


def card_key(card: cards_pb2.Card) -> tuple[int, int]:
    return card.suit, card.rank


def rich_status(error: grpc.aio.AioRpcError) -> status_pb2.Status | None:
    """The ``google.rpc.Status`` a refusal carries (its ``grpc-status-details-bin`` trailer),
    or None: no trailer, one that does not parse, or one whose code is not the call's."""
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin" and isinstance(value, bytes):
            try:
                status = status_pb2.Status.FromString(value)
            except DecodeError:
                return None
            return status if status.code == error.code().value[0] else None
    return None


def error_reason(error: grpc.aio.AioRpcError) -> str:
    """The reason a refused request names (from the ErrorInfo detail), or the status code."""
    status = rich_status(error)
    if status is not None:
        for detail in status.details:
            info = error_details_pb2.ErrorInfo()
            if detail.Unpack(info):
                return info.reason
    return error.code().name


OWNER_KEY = "x-copas-owner"  # initial metadata: the public host:port of the table's owner
SHUN_SECONDS = 10.0  # an owner's address that could not be reached is not followed again


def moved_to(error: grpc.aio.AioRpcError) -> str:
    """The owner a TABLE_MOVED refusal names (its ErrorInfo's ``metadata["owner"]``), or ''."""
    status = rich_status(error)
    if status is not None:
        for detail in status.details:
            info = error_details_pb2.ErrorInfo()
            if detail.Unpack(info) and info.reason == "TABLE_MOVED":
                return info.metadata.get("owner", "")
    return ""


def owner_in(metadata: Iterable[tuple[str, str | bytes]] | None) -> str:
    """The owner an answer's initial metadata names (``x-copas-owner``), or ''."""
    for key, value in metadata or ():
        if key == OWNER_KEY and isinstance(value, str):
            return value
    return ""


def _is_cut_off(error: grpc.aio.AioRpcError) -> bool:
    """The call's connection broke under it (gRPC core's INTERNAL or UNKNOWN, no refusal
    details): the server went away mid-call, as after a kill -9."""
    return error.code() in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN) \
        and rich_status(error) is None


class TableRoute:
    """Where one table's calls go: straight to the node that owns it, as the server said
    (``x-copas-owner`` on the answers that name a table, or the owner a TABLE_MOVED names),
    on a channel of its own with the entry's TLS settings; else, or while that node cannot
    be reached, through the address the client started from (which relays)."""

    def __init__(self, entry: copas_pb2_grpc.CopasServiceStub, where: Connection | str,
                 follow: bool = True) -> None:
        self.entry = entry
        self.where = where if isinstance(where, Connection) else Connection(where)
        self.follow = follow  # False: an old client, every call through the entry
        self.owner = ""  # the address followed now ('' : the entry)
        self._stub: copas_pb2_grpc.CopasServiceStub | None = None
        self._channels: list[grpc.aio.Channel] = []  # every channel opened (closed at the end)
        self._shunned: dict[str, float] = {}  # owners that could not be reached, until when
        self.followed = 0  # times it switched to an owner's address

    @property
    def stub(self) -> copas_pb2_grpc.CopasServiceStub:
        return self._stub if self._stub is not None else self.entry

    def told(self, metadata: Iterable[tuple[str, str | bytes]] | None) -> bool:
        """An answer's initial metadata: follow the owner it names; whether calls go
        elsewhere now (a stream open at the old address should be opened again)."""
        return self._go(owner_in(metadata))

    def after_error(self, error: grpc.aio.AioRpcError) -> bool:
        """A failed call: follow the owner a TABLE_MOVED names, or, when the owner followed
        did not answer, go back to the entry; whether calls go elsewhere now (retry at once)."""
        owner = moved_to(error)
        if owner and self._go(owner):
            return True
        if self._stub is not None and not owner and (
                error.code() in RETRYABLE or _is_cut_off(error)):
            if error_reason(error) != "TABLE_MOVED":  # it did not answer: not again soon
                self._shunned[self.owner] = asyncio.get_running_loop().time() + SHUN_SECONDS
            self._stub, self.owner = None, ""
            return True
        return False

    def _go(self, owner: str) -> bool:
        if not self.follow or not owner or owner == self.owner:
            return False
        if self._shunned.get(owner, 0.0) > asyncio.get_running_loop().time():
            return False
        if owner == self.where.server:  # the entry is the owner
            changed = self._stub is not None
            self._stub, self.owner = None, ""
            return changed
        opened = channel(Connection(owner, self.where.tls, self.where.ca))
        self._channels.append(opened)
        if len(self._channels) > 2:  # the one before the last: its calls had a grace
            asyncio.get_running_loop().create_task(self._channels.pop(0).close(5))
        self._stub, self.owner = copas_pb2_grpc.CopasServiceStub(opened), owner
        self.followed += 1
        return True

    async def close(self) -> None:
        for opened in self._channels:
            await opened.close()
        self._channels.clear()


ActionRequest = (copas_pb2.PlayCardRequest | copas_pb2.PassCardsRequest
                 | copas_pb2.ChooseMoonRequest | copas_pb2.LeaveTableRequest)
ActionResponse = (copas_pb2.PlayCardResponse | copas_pb2.PassCardsResponse
                  | copas_pb2.ChooseMoonResponse | copas_pb2.LeaveTableResponse)


# play: a batched Play stream (one message per commit); play-events: a Play stream with one
# message per event and per result (the default form, for comparison); unary: calls and
# WatchTable.
Transport = Literal["play", "play-events", "unary"]
TRANSPORTS: tuple[Transport, ...] = ("play", "play-events", "unary")


def play_request(request: ActionRequest) -> copas_pb2.PlayRequest:
    """An action's request as a message of a Play stream."""
    message = copas_pb2.PlayRequest()
    if isinstance(request, copas_pb2.PlayCardRequest):
        message.play_card.CopyFrom(request)
    elif isinstance(request, copas_pb2.PassCardsRequest):
        message.pass_cards.CopyFrom(request)
    elif isinstance(request, copas_pb2.ChooseMoonRequest):
        message.choose_moon.CopyFrom(request)
    else:
        message.leave_table.CopyFrom(request)
    return message


def refusal(status: status_pb2.Status) -> grpc.aio.AioRpcError:
    """A refused action on a Play stream as the error its unary call would raise (the same
    code, message and google.rpc details), so callers handle both alike."""
    code = next((c for c in grpc.StatusCode if c.value[0] == status.code),
                grpc.StatusCode.UNKNOWN)
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(
        ("grpc-status-details-bin", status.SerializeToString())), status.message)


def play_failure(error: grpc.aio.AioRpcError) -> grpc.aio.AioRpcError:
    """A Play stream's failure as the contract reads it: INTERNAL on a Play stream is how
    grpcio may report the stream cut under it (its node drained or went away: "Internal error
    from Core"), so it counts as UNAVAILABLE (reconnect and resume)."""
    if error.code() != grpc.StatusCode.INTERNAL:
        return error
    return grpc.aio.AioRpcError(grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(),
                                grpc.aio.Metadata(), f"the Play stream broke: {error.details()}")


class PlaySession:
    """A seated player's Play stream: ``events()`` yields the seat's events; ``act`` sends an
    action and returns its result (a refusal raises as the unary call would). When the
    connection drops (UNAVAILABLE, or INTERNAL: ``play_failure``) it opens a new stream from
    the last sequence seen; actions waiting for their result then fail with UNAVAILABLE, and
    a retry with the same request_id is applied once (``Player._call`` retries)."""

    def __init__(self, stub: copas_pb2_grpc.CopasServiceStub, table_id: str, token: str,
                 retries: int = 20, route: TableRoute | None = None, is_batched: bool = True
                 ) -> None:
        self.stub = stub
        self.is_batched = is_batched  # one message per commit (else one per event, result)
        self.route = route  # the table's owner, followed (None: always ``stub``)
        self.table_id = table_id
        self.token = token
        self.retries = retries
        self.after = 0  # the last sequence seen: a new stream resumes after it
        self.results = 0  # results received
        self._events: asyncio.Queue[copas_pb2.TableEvent | BaseException | None] = \
            asyncio.Queue()
        self._pending: deque[asyncio.Future[copas_pb2.PlayResult]] = deque()
        self._ready = asyncio.Event()  # a stream is open: actions may go
        self._sending = asyncio.Lock()
        self._call: grpc.aio.StreamStreamCall[copas_pb2.PlayRequest,
                                              copas_pb2.PlayResponse] | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    def _fail_pending(self, error: BaseException) -> None:
        while self._pending:
            waiting = self._pending.popleft()
            if not waiting.done():
                waiting.set_exception(error)

    async def _run(self) -> None:
        failures = 0
        metadata = (("authorization", f"Bearer {self.token}"),)
        try:
            while True:
                route = self.route
                stub = route.stub if route is not None else self.stub
                call = self._call = stub.Play(metadata=metadata)
                try:
                    await call.write(copas_pb2.PlayRequest(open=copas_pb2.WatchTableRequest(
                        table_id=self.table_id, after_sequence=self.after,
                        is_batched=self.is_batched)))
                    if route is not None and route.told(await call.initial_metadata()):
                        continue  # another node owns the table: open the stream there
                    self._ready.set()
                    async for response in call:
                        failures = 0
                        kind = response.WhichOneof("kind")
                        if kind == "batch":  # one commit: its events, then its results
                            for event in response.batch.events:
                                self.after = event.sequence
                                self._events.put_nowait(event)
                            for result in response.batch.results:
                                self._answer(result)
                        elif kind == "event":
                            self.after = response.event.sequence
                            self._events.put_nowait(response.event)
                        else:
                            self._answer(response.result)
                    self._events.put_nowait(None)  # the stream ended: the table is gone
                    return
                except grpc.aio.AioRpcError as failed:
                    error = play_failure(failed)
                    self._ready.clear()
                    if failures < self.retries and route is not None \
                            and route.after_error(error):
                        # The owner moved, or is away: at once where it is now; actions
                        # waiting for a result are retried there (the same request_id).
                        self._fail_pending(grpc.aio.AioRpcError(
                            grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(),
                            grpc.aio.Metadata(), "the Play stream moved"))
                        failures += 1
                        continue
                    self._fail_pending(error)
                    if error.code() not in RETRYABLE or failures >= self.retries:
                        self._events.put_nowait(error)
                        return
                    failures += 1
                    await asyncio.sleep(min(0.2 * 2 ** failures, 3.0))
                finally:
                    call.cancel()
        finally:
            self._ready.clear()
            self._fail_pending(grpc.aio.AioRpcError(
                grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(),
                "the Play stream closed"))

    def _answer(self, result: copas_pb2.PlayResult) -> None:
        if self._pending:
            self.results += 1
            waiting = self._pending.popleft()
            if not waiting.done():
                waiting.set_result(result)

    async def events(self) -> AsyncIterator[copas_pb2.TableEvent]:
        """The seat's events in order. Batched (one message per commit, the default), only
        the last event of each commit carries ``view`` (``has_view``)."""
        while True:
            item = await self._events.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    async def act(self, method: str, request: ActionRequest) -> copas_pb2.PlayResult:
        """Send one action (``method``: its unary call's name) and wait for its result."""
        if not self._ready.is_set():  # (asyncio.timeout: wait_for may swallow a cancel)
            async with asyncio.timeout(30):
                await self._ready.wait()
        loop = asyncio.get_running_loop()
        async with self._sending:  # results come in the order the actions went
            waiting: asyncio.Future[copas_pb2.PlayResult] = loop.create_future()
            self._pending.append(waiting)
            assert self._call is not None
            try:
                await self._call.write(play_request(request))
            except (grpc.aio.AioRpcError, asyncio.InvalidStateError, grpc.aio.UsageError):
                with contextlib.suppress(ValueError):
                    self._pending.remove(waiting)
                raise grpc.aio.AioRpcError(grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(),
                                           grpc.aio.Metadata(), "the Play stream dropped"
                                           ) from None
        result = await waiting
        if result.HasField("error"):
            raise refusal(result.error)
        return result

    async def close(self) -> None:
        if self._call is not None:
            self._call.cancel()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


@dataclass
class Player:
    """A seat at a table: its token authenticates every action. With a ``session`` (a Play
    stream) its actions go on that stream; without one, each is a unary call."""

    stub: copas_pb2_grpc.CopasServiceStub
    table_id: str
    seat: int
    token: str
    session: PlaySession | None = None
    route: TableRoute | None = None  # the table's owner, followed (None: always ``stub``)

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.token}"),)

    @property
    def current(self) -> copas_pb2_grpc.CopasServiceStub:
        """The stub this table's calls go to now (its owner's, when followed)."""
        return self.route.stub if self.route is not None else self.stub

    @overload
    async def _call(self, method: Literal["PlayCard"], request: copas_pb2.PlayCardRequest
                    ) -> copas_pb2.PlayCardResponse: ...
    @overload
    async def _call(self, method: Literal["PassCards"], request: copas_pb2.PassCardsRequest
                    ) -> copas_pb2.PassCardsResponse: ...
    @overload
    async def _call(self, method: Literal["ChooseMoon"], request: copas_pb2.ChooseMoonRequest
                    ) -> copas_pb2.ChooseMoonResponse: ...
    @overload
    async def _call(self, method: Literal["LeaveTable"], request: copas_pb2.LeaveTableRequest
                    ) -> copas_pb2.LeaveTableResponse: ...

    async def _call(self, method: str, request: ActionRequest) -> ActionResponse:
        """Act (on the Play stream, or by the unary call); on UNAVAILABLE retry with the same
        request_id (applied once)."""
        request.request_id = uuid.uuid4().hex
        delay = 0.2
        for attempt in range(8):
            try:
                if self.session is not None:
                    result = await self.session.act(method, request)
                    answer: ActionResponse = _RESPONSES[method](sequence=result.sequence)
                    return answer
                # The overloads tie each method name to its request and response types.
                rpc: Callable[..., Awaitable[ActionResponse]] = getattr(self.current, method)
                return await rpc(request, metadata=self.metadata)
            except grpc.aio.AioRpcError as error:
                if self.session is None and self.route is not None \
                        and self.route.after_error(error) and attempt < 7:
                    continue  # the owner moved, or is away: at once where it is now
                asked = retry_delay(error)  # over a quota: wait as the server says
                if (error.code() not in RETRYABLE and asked is None) or attempt == 7:
                    raise
                await asyncio.sleep(asked if asked is not None else delay)
                delay = min(delay * 2, 3.0)
        raise AssertionError("unreachable")

    async def play(self, card: cards_pb2.Card) -> copas_pb2.PlayCardResponse:
        return await self._call("PlayCard", copas_pb2.PlayCardRequest(
            table_id=self.table_id, card=card))

    async def pass_cards(self, cards: Sequence[cards_pb2.Card]) -> copas_pb2.PassCardsResponse:
        return await self._call("PassCards", copas_pb2.PassCardsRequest(
            table_id=self.table_id, cards=list(cards)))

    async def choose_moon(self, choice: copas_pb2.MoonChoice.ValueType
                          ) -> copas_pb2.ChooseMoonResponse:
        return await self._call("ChooseMoon", copas_pb2.ChooseMoonRequest(
            table_id=self.table_id, choice=choice))

    async def leave(self) -> copas_pb2.LeaveTableResponse:
        return await self._call("LeaveTable", copas_pb2.LeaveTableRequest(
            table_id=self.table_id))


_RESPONSES: dict[str, Callable[..., ActionResponse]] = {
    "PlayCard": copas_pb2.PlayCardResponse, "PassCards": copas_pb2.PassCardsResponse,
    "ChooseMoon": copas_pb2.ChooseMoonResponse, "LeaveTable": copas_pb2.LeaveTableResponse}


@contextlib.asynccontextmanager
async def seat_stream(player: Player, transport: Transport = "play"
                      ) -> AsyncIterator[AsyncIterator[copas_pb2.TableEvent]]:
    """The seat's events, for as long as the block runs: on a Play stream that also carries
    the player's actions (``play``), or on WatchTable (``unary``: actions are calls)."""
    if transport == "unary":
        yield watch(player.stub, player.table_id, player.token, route=player.route)
        return
    session = PlaySession(player.stub, player.table_id, player.token, route=player.route,
                          is_batched=transport != "play-events")
    session.start()
    player.session = session
    try:
        yield session.events()
    finally:
        player.session = None
        await session.close()


def add_transport_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--transport", choices=TRANSPORTS, default="play",
                        help="play: one Play stream per seat (actions in, events out, one "
                             "message per commit); play-events: the same, one message per "
                             "event and per result; unary: WatchTable and a call per action")


@dataclass(frozen=True)
class Connection:
    """Where the server is and how to reach it: plaintext, or TLS (``ca``: a PEM file of the
    certificate authority to trust; empty: the system's)."""

    server: str = DEFAULT_SERVER
    tls: bool = False
    ca: str = ""


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--server", default=DEFAULT_SERVER, help="host:port of the server")
    parser.add_argument("--tls", action="store_true", help="connect with TLS")
    parser.add_argument("--ca", default="", help="PEM file of the CA to trust (implies --tls)")


def connection(args: argparse.Namespace) -> Connection:
    return Connection(args.server, bool(args.tls or args.ca), args.ca)


def channel(target: Connection | str) -> grpc.aio.Channel:
    """A channel of its own (its own connection, like a separate device)."""
    where = target if isinstance(target, Connection) else Connection(target)
    options = [("grpc.enable_retries", 1), ("grpc.use_local_subchannel_pool", 1)]
    if not where.tls:
        return grpc.aio.insecure_channel(where.server, options=options)
    root = Path(where.ca).read_bytes() if where.ca else None
    return grpc.aio.secure_channel(where.server, grpc.ssl_channel_credentials(root),
                                   options=options)


def retry_delay(error: grpc.aio.AioRpcError) -> float | None:
    """How long a RESOURCE_EXHAUSTED answer asks to wait (its RetryInfo), else None."""
    status = rich_status(error) if error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED else None
    if status is not None:
        for detail in status.details:
            info = error_details_pb2.RetryInfo()
            if detail.Unpack(info):
                return info.retry_delay.ToTimedelta().total_seconds()
    return None


async def join(stub: copas_pb2_grpc.CopasServiceStub, table_id: str, name: str,
               where: Connection | str | None = None, follow: bool = True,
               access_token: str = "") -> Player:
    """Take a seat through ``stub`` (as the account of ``access_token``, if given: ``name``
    may then be empty, the account's); with ``where`` (the address ``stub`` reaches), the
    player then follows the table's owner (``TableRoute``) unless ``follow`` is False."""
    call = stub.JoinTable(copas_pb2.JoinTableRequest(table_id=table_id, display_name=name),
                          metadata=(("authorization", f"Bearer {access_token}"),)
                          if access_token else None)
    answer = await call
    route = None
    if where is not None:
        route = TableRoute(stub, where, follow)
        route.told(await call.initial_metadata())
    return Player(stub, table_id, answer.seat, answer.player_token, route=route)


def zero_timing() -> copas_pb2.RulesOverrides:
    """No pauses, no time limits, bots at once: for bot-only tables and load tests."""
    return copas_pb2.RulesOverrides(trick_pause_seconds=0, hand_pause_seconds=0,
                                    play_timeout_seconds=0, pass_timeout_seconds=0,
                                    moon_timeout_seconds=0, bot_pace_seconds=0)


async def watch(stub: copas_pb2_grpc.CopasServiceStub, table_id: str,
                token: str | None = None, retries: int = 20, route: TableRoute | None = None
                ) -> AsyncIterator[copas_pb2.TableEvent]:
    """A table's events; when the connection drops, reconnect from the last sequence seen
    (the server's snapshot then lists what was missed). Ends when the stream ends. With a
    ``route``, the stream goes to the table's owner (and follows it when it moves)."""
    after = 0
    failures = 0
    metadata = (("authorization", f"Bearer {token}"),) if token else None
    while True:
        current = route.stub if route is not None else stub
        call = current.WatchTable(copas_pb2.WatchTableRequest(
            table_id=table_id, after_sequence=after, is_batched=True), metadata=metadata)
        try:
            if route is not None and route.told(await call.initial_metadata()):
                continue  # another node owns the table: watch it there
            async for response in call:
                failures = 0
                for event in (response.batch.events if response.HasField("batch")
                              else [response.event]):
                    after = event.sequence
                    yield event
            return
        except grpc.aio.AioRpcError as error:
            if failures < retries and route is not None and route.after_error(error):
                failures += 1
                continue  # the owner moved, or is away: at once where it is now
            if error.code() not in RETRYABLE or failures >= retries:
                raise
            failures += 1
            await asyncio.sleep(min(0.2 * 2 ** failures, 3.0))
        finally:
            call.cancel()


def has_view(event: copas_pb2.TableEvent) -> bool:
    """The event carries the view: the last of its commit on a batched stream (each one on a
    stream that is not), a snapshot always."""
    return event.HasField("view")


def must_act(view: copas_pb2.TableView) -> bool:
    return view.HasField("seat") and view.seat in view.to_act and not view.HasField("paused_until")


def is_game_over(event: copas_pb2.TableEvent) -> bool:
    """The event that ends a game (its standings are in it; nothing follows it), or a
    snapshot of a game already over (a client that came late or came back)."""
    kind = event.WhichOneof("kind")
    return kind == "game_over" or (kind == "snapshot" and is_over(event.view))


def pass_target(view: copas_pb2.TableView, seat: int) -> int | None:
    """The seat ``seat`` passes to this hand (None: no passing)."""
    n = len(view.players)
    offset = {copas_pb2.PASS_DIRECTION_LEFT: 1, copas_pb2.PASS_DIRECTION_RIGHT: -1,
              copas_pb2.PASS_DIRECTION_ACROSS: 2}.get(view.pass_direction)
    return None if offset is None or not n else (seat + offset) % n


def is_over(view: copas_pb2.TableView) -> bool:
    return view.phase == copas_pb2.PHASE_GAME_OVER

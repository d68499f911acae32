"""What every Copas client needs: a channel, a player's credentials, cards as text, and a
table stream that reconnects by itself. Imports only grpc, the generated copas.v1 code and
the google.rpc messages a refusal carries."""

from __future__ import annotations

import argparse
import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
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


ActionRequest = (copas_pb2.PlayCardRequest | copas_pb2.PassCardsRequest
                 | copas_pb2.ChooseMoonRequest | copas_pb2.LeaveTableRequest)
ActionResponse = (copas_pb2.PlayCardResponse | copas_pb2.PassCardsResponse
                  | copas_pb2.ChooseMoonResponse | copas_pb2.LeaveTableResponse)


@dataclass
class Player:
    """A seat at a table: its token authenticates every action."""

    stub: copas_pb2_grpc.CopasServiceStub
    table_id: str
    seat: int
    token: str

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.token}"),)

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
        """Call an action RPC; on UNAVAILABLE retry with the same request_id (applied once)."""
        # The overloads tie each method name to its request and response types.
        rpc: Callable[..., Awaitable[ActionResponse]] = getattr(self.stub, method)
        request.request_id = uuid.uuid4().hex
        delay = 0.2
        for attempt in range(8):
            try:
                return await rpc(request, metadata=self.metadata)
            except grpc.aio.AioRpcError as error:
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


async def join(stub: copas_pb2_grpc.CopasServiceStub, table_id: str, name: str) -> Player:
    answer = await stub.JoinTable(copas_pb2.JoinTableRequest(table_id=table_id,
                                                             display_name=name))
    return Player(stub, table_id, answer.seat, answer.player_token)


def zero_timing() -> copas_pb2.RulesOverrides:
    """No pauses and no time limits: for bot-only tables and load tests."""
    return copas_pb2.RulesOverrides(trick_pause_seconds=0, hand_pause_seconds=0,
                                    play_timeout_seconds=0, pass_timeout_seconds=0,
                                    moon_timeout_seconds=0)


async def watch(stub: copas_pb2_grpc.CopasServiceStub, table_id: str,
                token: str | None = None, retries: int = 20
                ) -> AsyncIterator[copas_pb2.TableEvent]:
    """A table's events; when the connection drops, reconnect from the last sequence seen
    (the server's snapshot then lists what was missed). Ends when the stream ends."""
    after = 0
    failures = 0
    metadata = (("authorization", f"Bearer {token}"),) if token else None
    while True:
        call = stub.WatchTable(copas_pb2.WatchTableRequest(table_id=table_id,
                                                           after_sequence=after),
                               metadata=metadata)
        try:
            async for response in call:
                failures = 0
                after = response.event.sequence
                yield response.event
            return
        except grpc.aio.AioRpcError as error:
            if error.code() not in RETRYABLE or failures >= retries:
                raise
            failures += 1
            await asyncio.sleep(min(0.2 * 2 ** failures, 3.0))
        finally:
            call.cancel()


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

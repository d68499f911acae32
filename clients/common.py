"""What every Copas client needs: a channel, a player's credentials, cards as text, and a
table stream that reconnects by itself. Imports only grpc and the generated copas.v1 code."""

from __future__ import annotations

import argparse
import asyncio
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
from copas.v1 import cards_pb2, copas_pb2, copas_pb2_grpc

DEFAULT_SERVER = "localhost:50051"
SUIT_SYMBOL = {cards_pb2.SUIT_CLUBS: "♣", cards_pb2.SUIT_DIAMONDS: "♦",
               cards_pb2.SUIT_SPADES: "♠", cards_pb2.SUIT_HEARTS: "♥"}
DIRECTION_TEXT = {copas_pb2.PASS_DIRECTION_LEFT: "left", copas_pb2.PASS_DIRECTION_RIGHT: "right",
                  copas_pb2.PASS_DIRECTION_ACROSS: "across",
                  copas_pb2.PASS_DIRECTION_HOLD: "none (hold)"}
RETRYABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}
_RANKS = {"2": 2, "3": 3, "4": 4, "5": 5, "6": 6, "7": 7, "8": 8, "9": 9, "10": 10, "T": 10,
          "J": 11, "Q": 12, "K": 13, "A": 14}
_SUITS = {"C": cards_pb2.SUIT_CLUBS, "D": cards_pb2.SUIT_DIAMONDS, "S": cards_pb2.SUIT_SPADES,
          "H": cards_pb2.SUIT_HEARTS, "♣": cards_pb2.SUIT_CLUBS, "♦": cards_pb2.SUIT_DIAMONDS,
          "♠": cards_pb2.SUIT_SPADES, "♥": cards_pb2.SUIT_HEARTS, "♧": cards_pb2.SUIT_CLUBS,
          "♢": cards_pb2.SUIT_DIAMONDS, "♤": cards_pb2.SUIT_SPADES, "♡": cards_pb2.SUIT_HEARTS}


def parse_card(text: str) -> cards_pb2.Card | None:
    """'qs', '10h', 'Th', 'A♠' -> a Card; None when it is not a card."""
    t = text.strip().upper().replace("\ufe0f", "")  # emoji presentation of ♠ ♥ ♦ ♣
    if len(t) < 2 or t[:-1] not in _RANKS or t[-1] not in _SUITS:
        return None
    return cards_pb2.Card(suit=_SUITS[t[-1]], rank=_RANKS[t[:-1]])  # type: ignore[arg-type]


def pretty(card: cards_pb2.Card) -> str:
    """'Q♠' for QS."""
    return card.text[:-1] + SUIT_SYMBOL.get(card.suit, "?")


def card_key(card: cards_pb2.Card) -> tuple[int, int]:
    return card.suit, card.rank


def error_reason(error: grpc.aio.AioRpcError) -> str:
    """The reason a refused request names (from the ErrorInfo detail), or the status code."""
    try:
        from google.rpc import error_details_pb2
        from grpc_status import rpc_status

        status = rpc_status.from_call(error)  # type: ignore[arg-type]
        if status is not None:
            for detail in status.details:
                info = error_details_pb2.ErrorInfo()
                if detail.Unpack(info):
                    return info.reason
    except (ImportError, ValueError):
        pass
    return error.code().name


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

    async def _call(self, method: str, request: object) -> object:
        """Call an action RPC; on UNAVAILABLE retry with the same request_id (applied once)."""
        request.request_id = uuid.uuid4().hex  # type: ignore[attr-defined]
        delay = 0.2
        for attempt in range(8):
            try:
                return await getattr(self.stub, method)(request, metadata=self.metadata)
            except grpc.aio.AioRpcError as error:
                asked = retry_delay(error)  # over a quota: wait as the server says
                if (error.code() not in RETRYABLE and asked is None) or attempt == 7:
                    raise
                await asyncio.sleep(asked if asked is not None else delay)
                delay = min(delay * 2, 3.0)
        raise AssertionError("unreachable")

    async def play(self, card: cards_pb2.Card) -> copas_pb2.PlayCardResponse:
        return await self._call("PlayCard", copas_pb2.PlayCardRequest(  # type: ignore[return-value]
            table_id=self.table_id, card=card))

    async def pass_cards(self, cards: Sequence[cards_pb2.Card]) -> copas_pb2.PassCardsResponse:
        return await self._call("PassCards", copas_pb2.PassCardsRequest(  # type: ignore[return-value]
            table_id=self.table_id, cards=list(cards)))

    async def choose_moon(self, choice: int) -> copas_pb2.ChooseMoonResponse:
        return await self._call("ChooseMoon", copas_pb2.ChooseMoonRequest(  # type: ignore[return-value]
            table_id=self.table_id, choice=choice))  # type: ignore[arg-type]

    async def leave(self) -> copas_pb2.LeaveTableResponse:
        return await self._call("LeaveTable", copas_pb2.LeaveTableRequest(  # type: ignore[return-value]
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
    if error.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
        return None
    try:
        from google.rpc import error_details_pb2
        from grpc_status import rpc_status

        status = rpc_status.from_call(error)  # type: ignore[arg-type]
        for detail in status.details if status is not None else ():
            info = error_details_pb2.RetryInfo()
            if detail.Unpack(info):
                return float(info.retry_delay.ToTimedelta().total_seconds())
    except (ImportError, ValueError):
        pass
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

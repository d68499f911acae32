"""`copas play`: a person at a table, in the terminal.

Creates a table with bots on the server (or joins ``--table``), then draws each change and
asks for your move when it is your turn. ``--game`` plays another game (``--preset`` one of
its own, its first by default; ``--players`` for a kind the preset does not say), drawn with
what that game shows (e.g. a trump card, the stock's count, each side's points). Cards are
typed as text (``QS``, ``10h``, ``2c``) or by their number in your hand; a pass takes three at
once (``QS AS 3h`` or ``1 2 3``). Ctrl-C asks whether to leave the table.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
import threading

import grpc
from copas.v1 import accounts_pb2_grpc, cards_pb2, copas_pb2, copas_pb2_grpc
from rich.console import Console

from clients import games
from clients.account import access_token
from clients.common import (
    Player,
    Transport,
    add_server_arguments,
    add_transport_argument,
    card_key,
    channel,
    connection,
    error_reason,
    has_view,
    is_game_over,
    join,
    must_act,
    parse_card,
    pass_target,
    pretty,
    seat_stream,
)
from clients.render import event_line, name_of, render, seconds_left, sorted_hand

INTERRUPT = "\x03"
REMINDERS = (10.0, 5.0, 2.0)  # seconds left at which the countdown speaks up


class Lines:
    """Lines typed on stdin, read by a thread so the table keeps updating meanwhile.
    Ctrl-C arrives as INTERRUPT; end of input as None."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[str | None] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        def read() -> None:
            for line in sys.stdin:
                loop.call_soon_threadsafe(self.queue.put_nowait, line.rstrip("\n"))
            loop.call_soon_threadsafe(self.queue.put_nowait, None)

        threading.Thread(target=read, daemon=True).start()
        loop.add_signal_handler(signal.SIGINT, self.queue.put_nowait, INTERRUPT)


class Session:
    def __init__(self, console: Console, player: Player, lines: Lines,
                 transport: Transport = "play") -> None:
        self.console = console
        self.player = player
        self.lines = lines
        self.transport = transport
        self.view = copas_pb2.TableView()
        self.changed = asyncio.Event()
        self.done = False
        self.finished = asyncio.Event()  # the session is over: the stream may close

    async def follow(self) -> None:
        """Print what happens; keep the newest view (the seat's actions go on the same stream
        with the default transport)."""
        async with seat_stream(self.player, self.transport) as events:
            async for event in events:
                if has_view(event):  # batched: the commit's view is on its last event
                    self.view = event.view
                line = event_line(event, self.view)
                if line is not None:
                    self.console.print(line)
                if has_view(event):
                    self.changed.set()
                if is_game_over(event):
                    break
            self.done = True
            self.changed.set()
            await self.finished.wait()  # the stream stays open while the last words go

    def decision(self) -> tuple[int, ...]:
        v = self.view
        return (v.hand_number, v.phase, v.trick_number, len(v.trick.cards))

    async def next_line(self, decision: tuple[int, ...] | None) -> str | bool | None:
        """A typed line, or False when the decision went away (timed out, game over)."""
        getter = asyncio.ensure_future(self.lines.queue.get())
        try:
            while True:
                self.changed.clear()
                if decision is not None and (self.done or not must_act(self.view)
                                             or self.decision() != decision):
                    return False
                waiter = asyncio.ensure_future(self.changed.wait())
                reminder = self.next_reminder() if decision is not None else None
                done, _ = await asyncio.wait({getter, waiter}, timeout=reminder,
                                             return_when=asyncio.FIRST_COMPLETED)
                waiter.cancel()
                if getter in done:
                    return getter.result()
                if not done:  # the countdown: say how long is left, and ask again
                    left = seconds_left(self.view)
                    self.console.print(f"\n⏳ {left:.0f}s left", style="yellow")
                    self.console.print(self.prompt(), end="", markup=False, highlight=False)
        finally:
            if not getter.done():
                getter.cancel()

    async def run(self) -> int:
        follower = asyncio.create_task(self.follow())
        answered: set[tuple[int, ...]] = set()
        try:
            while not self.done:
                if not must_act(self.view) or self.decision() in answered:
                    self.changed.clear()
                    if not must_act(self.view) or self.decision() in answered:
                        await self.changed.wait()
                    continue
                decision = self.decision()
                self.console.print(render(self.view, f"table {self.player.table_id}"))
                outcome = await self.ask(decision)
                if outcome == "left":
                    return 0
                if outcome == "eof":
                    self.console.print("input closed: leaving you connected to the timeouts")
                    return 0
                answered.add(decision)
        finally:
            self.finished.set()
            if not self.done:  # left, or input closed: the stream goes with the session
                follower.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await follower
        self.console.print(render(self.view, f"table {self.player.table_id}"))
        return 0

    async def ask(self, decision: tuple[int, ...]) -> str:
        """Ask until a move is accepted; 'moved', 'gone' (timed out), 'left' or 'eof'."""
        while True:
            self.console.print(self.prompt(), end="", markup=False, highlight=False)
            line = await self.next_line(decision)
            if line is False:
                self.console.print("\n(too late: the turn moved on)")
                return "gone"
            if line is None:
                return "eof"
            assert isinstance(line, str)
            if line == INTERRUPT or line.strip().lower() in ("q", "quit", "leave"):
                if await self.confirm_leave():
                    return "left"
                continue
            error = await self.submit(line)
            if error is None:
                return "moved"
            self.console.print(f"✗ {error}", markup=False, highlight=False)

    def next_reminder(self) -> float | None:
        """Seconds until the next countdown mark (10, 5 and 2 seconds left), if any."""
        left = seconds_left(self.view)
        if left is None:
            return None
        marks = [left - mark for mark in REMINDERS if left - mark > 0.05]
        return min(marks) if marks else None

    def prompt(self) -> str:
        v = self.view
        legal = " ".join(pretty(c) for c in sorted(v.legal_cards, key=card_key))
        left = seconds_left(v)
        clock = f" [{left:.0f}s]" if left is not None else ""
        if v.phase == copas_pb2.PHASE_PASSING:
            target = pass_target(v, v.seat)
            to = f" to {name_of(v, target)}" if target is not None else ""
            return f"\nChoose 3 cards to pass{to}{clock} (e.g. QS A♠ 3H, or 1 2 3): "
        if v.phase == copas_pb2.PHASE_MOON_CHOICE:
            return f"\nYou shot the moon!{clock} (a) add 26 to the others, (s) subtract 26: "
        return f"\nYour turn{clock} — legal: {legal}. Card (text or number): "

    def cards_from(self, line: str) -> list[cards_pb2.Card] | str:
        hand = sorted_hand(self.view)
        cards = []
        for token in line.replace(",", " ").split():
            if token.isdigit():
                index = int(token)
                if not 1 <= index <= len(hand):
                    return f"there is no card number {index} (1..{len(hand)})"
                cards.append(hand[index - 1])
            else:
                card = parse_card(token)
                if card is None:
                    return f"{token!r} is not a card: type e.g. QS, 10H, 2C or its number"
                cards.append(card)
        return cards

    async def submit(self, line: str) -> str | None:
        """Send the move; None when accepted, else what to tell the player."""
        v = self.view
        try:
            if v.phase == copas_pb2.PHASE_MOON_CHOICE:
                answer = line.strip().lower()[:1]
                if answer not in ("a", "s"):
                    return "type a (add 26 to the others) or s (subtract 26 from you)"
                await self.player.choose_moon(copas_pb2.MOON_CHOICE_ADD_TO_OTHERS if answer == "a"
                                              else copas_pb2.MOON_CHOICE_SUBTRACT_FROM_SELF)
                return None
            cards = self.cards_from(line)
            if isinstance(cards, str):
                return cards
            if v.phase == copas_pb2.PHASE_PASSING:
                if len(cards) != 3:
                    return "a pass is exactly three cards"
                await self.player.pass_cards(cards)
            else:
                if len(cards) != 1:
                    return "play one card"
                await self.player.play(cards[0])
        except grpc.aio.AioRpcError as error:
            return f"{error_reason(error)}: {error.details()}"
        return None

    async def confirm_leave(self) -> bool:
        self.console.print("\nLeave the table for good? Bots play your seat and you are "
                           "ranked last. [y/N] ", end="", markup=False, highlight=False)
        line = await self.next_line(None)
        if isinstance(line, str) and line.strip().lower().startswith("y"):
            try:
                await self.player.leave()
            except grpc.aio.AioRpcError as error:  # e.g. the game ended meanwhile
                self.console.print(f"✗ could not leave: {error_reason(error)}: "
                                   f"{error.details()}", markup=False, highlight=False)
                return False
            self.console.print("You left the table.")
            return True
        return False


async def play_main(args: argparse.Namespace) -> int:
    console = Console(highlight=False)
    lines = Lines()
    async with channel(connection(args)) as ch:
        stub = copas_pb2_grpc.CopasServiceStub(ch)
        table_id = args.table
        try:
            if not table_id:
                table_id = (await stub.CreateTable(table_request(args))).table.table_id
            token = None if args.anonymous else await access_token(
                accounts_pb2_grpc.AccountServiceStub(ch), args.server)
            name = args.name or ("" if token else "You")
            player = await join(stub, table_id, name, connection(args), access_token=token or "")
        except grpc.aio.AioRpcError as error:
            console.print(f"copas play: {error.code().name}: {error.details()}")
            return 1
        console.print(f"You are {name or 'signed in'}, seat {player.seat} at table {table_id}. "
                      "Ctrl-C to leave.")
        try:
            return await Session(console, player, lines, args.transport).run()
        finally:
            if player.route is not None:
                await player.route.close()


def table_request(args: argparse.Namespace) -> copas_pb2.CreateTableRequest:
    """The table ``copas play`` makes: you and bots in every other seat. The default game's is
    as it always was (its preset's four seats, three bots, the game unnamed); another game's
    seats are ``--players``, else its preset's (``clients/games/``)."""
    name = f"{args.name}'s table" if args.name else ""
    game = games.get(args.game)
    if game.is_default and not args.players:
        return copas_pb2.CreateTableRequest(preset=args.preset or game.first_preset,
                                            bot_seats=game.players - 1, display_name=name)
    players = args.players or game.preset_players.get(args.preset, game.players)
    request = copas_pb2.CreateTableRequest(preset=args.preset, bot_seats=players - 1,
                                           display_name=name, game=args.game)
    request.rules.players = players
    return request


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_server_arguments(parser)
    parser.add_argument("--table", help="join this table instead of creating one with bots")
    parser.add_argument("--name", default="", help="your name at the table (default: your "
                                                   "account's after copas login, else You)")
    parser.add_argument("--anonymous", action="store_true",
                        help="play without your account even when signed in")
    games.add_arguments(parser)
    parser.add_argument("--players", type=int, default=0,
                        help="seats at a created table, you and bots (default: the preset's)")
    add_transport_argument(parser)

"""Bot players: each plays from its own stream, choosing only among the view's legal cards.

Policies (each chooses among the view's legal cards, so any of them plays any game):
- ``random``: any legal card, any three cards to pass.
- ``greedy`` and the other plain functions of the view that a game's module offers
  (``clients/games/``: ``greedy`` is the first game's, which ducks its points).
- ``duck``, ``mc`` (the strong one) and any other policy registered with
  ``register_policy`` by a program that has them (``copas`` registers the engine's bots).

A policy is an object that observes every event of its seat's stream and chooses from the
view (``Policy``); ``random`` and ``greedy`` are plain functions of the view.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import hashlib
import random
from collections.abc import AsyncIterator, Callable, Sequence

import grpc
from copas.v1 import accounts_pb2, accounts_pb2_grpc, cards_pb2, copas_pb2, copas_pb2_grpc

from clients import games
from clients.common import (
    Player,
    Transport,
    add_server_arguments,
    add_transport_argument,
    channel,
    connection,
    error_reason,
    has_view,
    is_game_over,
    is_over,
    join,
    must_act,
    seat_stream,
    zero_timing,
)


def choose_random(view: copas_pb2.TableView, rng: random.Random) -> list[cards_pb2.Card]:
    legal = list(view.legal_cards)
    if view.phase == copas_pb2.PHASE_PASSING:
        return rng.sample(legal, 3)
    return [rng.choice(legal)]


Choose = Callable[[copas_pb2.TableView, random.Random], list[cards_pb2.Card]]


class Policy:
    """One seat's bot: sees every event of the seat's stream (``observe``), then chooses
    from the view when the seat must act. The base class plays ``choose_view``."""

    def __init__(self, choose_view: Choose, seed: int | None = None) -> None:
        self.choose_view = choose_view
        self.rng = random.Random(seed)
        self.last_view = copas_pb2.TableView()  # the latest view the stream showed

    def observe(self, event: copas_pb2.TableEvent) -> None:
        """Every event of the stream, in order (snapshots included)."""

    async def choose(self, view: copas_pb2.TableView) -> list[cards_pb2.Card]:
        """Three cards while passing, else one card; only from ``view.legal_cards``."""
        return self.choose_view(view, self.rng)

    async def choose_moon(self, view: copas_pb2.TableView) -> copas_pb2.MoonChoice.ValueType:
        """The shooter's choice."""
        return copas_pb2.MOON_CHOICE_ADD_TO_OTHERS

    def close(self) -> None:
        """The seat's game is over (or the bot stops)."""


PolicyFactory = Callable[[int | None], Policy]
# name -> factory of a seat's policy, given the seat's seed.
POLICIES: dict[str, PolicyFactory] = {"random": lambda seed: Policy(choose_random, seed)}


def _plain(choose: Choose) -> PolicyFactory:
    return lambda seed: Policy(choose, seed)


POLICIES.update((name, _plain(choose)) for game in games.every()
                for name, choose in game.view_policies.items())


# Module-level functions that register policies, run again in every process that
# ``copas loadtest`` starts (a spawned process has only the policies above).
POLICY_SETUP: list[Callable[[], None]] = []


def register_policy(name: str, factory: PolicyFactory,
                    setup: Callable[[], None] | None = None) -> None:
    """Make a policy available to ``copas bot`` and ``copas loadtest`` (``--policy NAME``);
    ``setup`` is the module-level function that registers it (for other processes)."""
    POLICIES[name] = factory
    if setup is not None and setup not in POLICY_SETUP:
        POLICY_SETUP.append(setup)


async def run_bot(player: Player, policy: str = "greedy", seed: int | None = None,
                  on_event: Callable[[copas_pb2.TableEvent], None] | None = None,
                  transport: Transport = "play") -> copas_pb2.TableView:
    """Play one seat until the game is over; return the last view."""
    bot = POLICIES[policy](seed)
    acted: set[tuple[int, ...]] = set()
    view = copas_pb2.TableView()
    try:
        async with seat_stream(player, transport) as events:
            await _play(player, bot, events, acted, on_event)
            view = bot.last_view
    finally:
        bot.close()
    return view


async def _play(player: Player, bot: Policy, events: AsyncIterator[copas_pb2.TableEvent],
                acted: set[tuple[int, ...]],
                on_event: Callable[[copas_pb2.TableEvent], None] | None) -> None:
    """Follow the seat's events, acting once per decision, until the game is over (the
    stream is batched: a commit's view is on its last event)."""
    async for event in events:
        if has_view(event):
            bot.last_view = event.view
        view = bot.last_view
        bot.observe(event)
        if on_event:
            on_event(event)
        if is_game_over(event):
            break
        if not has_view(event):
            continue  # more of the same commit follow: its view is on the last
        if is_over(view):
            continue  # the game's last events are on their way: wait for game_over
        # Act once per decision: the stream may still hold older views of the same one.
        key = decision_key(view)
        if not must_act(view) or key in acted:
            continue
        acted.add(key)
        try:
            await take_turn(player, view, bot)
        except grpc.aio.AioRpcError as error:
            # A stale view (the turn moved on, a pause began): the next view decides.
            if error.code() != grpc.StatusCode.FAILED_PRECONDITION:
                raise
            if error_reason(error) not in {"NOT_YOUR_TURN", "TABLE_PAUSED", "WRONG_PHASE",
                                           "ALREADY_PASSED", "NOT_THE_SHOOTER"}:
                raise


async def take_turn(player: Player, view: copas_pb2.TableView, bot: Policy) -> None:
    """Make the seat's move for this view: a moon choice, a pass or a card."""
    if view.phase == copas_pb2.PHASE_MOON_CHOICE:
        await player.choose_moon(await bot.choose_moon(view))
    elif view.phase == copas_pb2.PHASE_PASSING:
        await player.pass_cards(await bot.choose(view))
    else:
        await player.play((await bot.choose(view))[0])


def decision_key(view: copas_pb2.TableView) -> tuple[int, ...]:
    """Identifies one decision of a seat: a hand's pass, one card of one trick, a moon."""
    return (view.hand_number, view.phase, view.trick_number, len(view.trick.cards))


async def bots_main(args: argparse.Namespace) -> int:
    async with contextlib.AsyncExitStack() as channels:  # closes every channel opened here
        stub = copas_pb2_grpc.CopasServiceStub(
            await channels.enter_async_context(channel(connection(args))))
        table_id = args.table
        if args.create:
            game = games.get(args.game)
            rules = zero_timing()
            for timeout in game.unused_timeouts:  # a decision the game has not: its clock too
                rules.ClearField(timeout)  # type: ignore[arg-type]
            request = copas_pb2.CreateTableRequest(
                preset=args.preset, display_name="bots", rules=rules,
                bot_seats=max(0, args.players - args.seats),
                game="" if game.is_default else game.name)
            request.rules.players = args.players
            table_id = (await stub.CreateTable(request)).table.table_id
            print(f"created table {table_id}", flush=True)
        if not table_id:
            print("copas bot: give --table ID or --create")
            return 2
        if args.accounts and len(args.accounts.split(",")) != args.seats:
            print("copas bot: --accounts names one account per seat (--seats)")
            return 2
        players = []
        for i in range(args.seats):
            # Each bot gets its own channel, like a separate device.
            bot_stub_channel = await channels.enter_async_context(channel(connection(args)))
            bot_stub = copas_pb2_grpc.CopasServiceStub(bot_stub_channel)
            name = f"{args.policy}-bot-{i + 1}"
            token = ""
            if args.accounts:  # each bot signs in as its own account (a guest of its own)
                name = args.accounts.split(",")[i]
                token = (await accounts_pb2_grpc.AccountServiceStub(bot_stub_channel)
                         .SignInDevice(accounts_pb2.SignInDeviceRequest(
                             device_secret=account_secret(args.account_seed, name),
                             display_name=name))).session.access_token
            player = await join(bot_stub, table_id, "" if token else name, connection(args),
                                access_token=token)
            if player.route is not None:  # its channel to the table's owner, closed too
                channels.push_async_callback(player.route.close)
            players.append(player)
        print(f"{len(players)} {args.policy} bots joined table {table_id} "
              f"(seats {', '.join(str(p.seat) for p in players)})", flush=True)
        views = await asyncio.gather(*(run_bot(p, args.policy, seed=args.seed + i,
                                               transport=args.transport)
                                       for i, p in enumerate(players)))
        print_standings(views[0])
    return 0


def account_secret(seed: str, name: str) -> str:
    """The device secret of a bot's account: the same seed and name, the same account."""
    digest = hashlib.sha256(f"copas-bot:{seed}:{name}".encode()).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def print_standings(view: copas_pb2.TableView) -> None:
    names = {p.seat: p.display_name for p in view.players}
    print("final standings:")
    for row in view.standings:
        left = " (left)" if row.has_left else ""
        print(f"  {row.place}. {names.get(row.seat, row.seat)}{left}: {row.total} points")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_server_arguments(parser)
    parser.add_argument("--table", help="join this table")
    parser.add_argument("--create", action="store_true",
                        help="create a table (no pauses or time limits) and fill it")
    parser.add_argument("--seats", type=int, default=4, help="bot players to join")
    parser.add_argument("--players", type=int, default=4, help="players at a created table")
    games.add_arguments(parser)
    parser.add_argument("--policy", choices=sorted(POLICIES), default="greedy",
                        help="how the bots play (mc: the strong one)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the bots' random choices")
    parser.add_argument("--accounts", default="", help="comma-separated names, one per seat: "
                                                       "each bot signs in as that account")
    parser.add_argument("--account-seed", default="bots", help="the bots' accounts' device "
                                                               "secrets derive from it")
    add_transport_argument(parser)


def legal_only(view: copas_pb2.TableView, chosen: Sequence[cards_pb2.Card]) -> bool:
    """True when every chosen card is one of the view's legal cards (a policy self-check)."""
    legal = {(c.suit, c.rank) for c in view.legal_cards}
    return all((c.suit, c.rank) in legal for c in chosen)

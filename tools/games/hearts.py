"""The engine's Hearts bots (``ai``: ``duck``, ``mc``) as policies of the reference clients.

``clients/`` never imports the engine, so ``copas`` registers these from here (``register``,
found by ``tools.games.register``).
Each bot keeps its seat's information set from what its stream shows: the cards played this
hand, seat by seat, from the ``card_played`` events (and a snapshot's missed events), and
everything else from the view, its own cards included. Decisions run in a worker thread so
the bot's stream keeps being read while it thinks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from copas.v1 import cards_pb2, copas_pb2

from ai import Budget, InfoSet, decide
from clients import bots
from clients.games.hearts import choose_greedy
from engine import (
    CARDS,
    Action,
    Card,
    ChooseMoon,
    MoonChoice,
    MoonRule,
    PassCards,
    PassDirection,
    Phase,
    PlayCard,
    Rules,
)

CLIENT_BUDGET = Budget(playouts=64)
_THINKERS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="copas-bot")
_PHASES = {copas_pb2.PHASE_PASSING: Phase.PASSING, copas_pb2.PHASE_PLAYING: Phase.PLAYING,
           copas_pb2.PHASE_MOON_CHOICE: Phase.MOON_CHOICE,
           copas_pb2.PHASE_GAME_OVER: Phase.GAME_OVER}
_DIRECTIONS = {copas_pb2.PASS_DIRECTION_LEFT: PassDirection.LEFT,
               copas_pb2.PASS_DIRECTION_RIGHT: PassDirection.RIGHT,
               copas_pb2.PASS_DIRECTION_ACROSS: PassDirection.ACROSS,
               copas_pb2.PASS_DIRECTION_HOLD: PassDirection.HOLD}
_MOONS = {copas_pb2.MOON_RULE_OTHERS_PLUS_26: MoonRule.OTHERS_PLUS_26,
          copas_pb2.MOON_RULE_SHOOTER_CHOICE: MoonRule.SHOOTER_CHOICE,
          copas_pb2.MOON_RULE_DISABLED: MoonRule.DISABLED}
_SUITS = {cards_pb2.SUIT_CLUBS: 0, cards_pb2.SUIT_DIAMONDS: 1, cards_pb2.SUIT_SPADES: 2,
          cards_pb2.SUIT_HEARTS: 3}
_SUITS_PB = {v: k for k, v in _SUITS.items()}
_RANKS_PB = (cards_pb2.RANK_TWO, cards_pb2.RANK_THREE, cards_pb2.RANK_FOUR, cards_pb2.RANK_FIVE,
             cards_pb2.RANK_SIX, cards_pb2.RANK_SEVEN, cards_pb2.RANK_EIGHT, cards_pb2.RANK_NINE,
             cards_pb2.RANK_TEN, cards_pb2.RANK_JACK, cards_pb2.RANK_QUEEN, cards_pb2.RANK_KING,
             cards_pb2.RANK_ACE)  # by the engine's index of a card within its suit


def card_index(card: cards_pb2.Card) -> int:
    if card.suit in _SUITS and 2 <= card.rank <= 14:
        return _SUITS[card.suit] * 13 + card.rank - 2
    return int(Card.parse(card.text))


def card_pb(index: int) -> cards_pb2.Card:
    c = CARDS[index]
    return cards_pb2.Card(suit=_SUITS_PB[index // 13], rank=_RANKS_PB[index % 13], text=str(c))


def mask(cards: Iterable[cards_pb2.Card]) -> int:
    out = 0
    for c in cards:
        out |= 1 << card_index(c)
    return out


class EnginePolicy(bots.Policy):
    """An ``ai`` policy playing one seat of a networked table."""

    def __init__(self, policy: str, seed: int | None, budget: Budget = CLIENT_BUDGET) -> None:
        super().__init__(choose_greedy, seed)
        self.policy = policy
        self.seed = seed or 0
        self.budget = budget
        self.plays: list[tuple[int, int]] = []  # the cards played in hand ``plays_hand``
        self.plays_hand = -1
        self.left_order: list[int] = []
        self.decisions = 0
        self.fallbacks = 0  # decisions made from the view alone (the stream missed plays)

    def observe(self, event: copas_pb2.TableEvent) -> None:
        kind = event.WhichOneof("kind")
        if kind == "snapshot":
            for missed in event.snapshot.missed_events:
                self.observe(missed)
            view = event.view
            if view.hand_number != self.plays_hand and view.trick_number == 0 \
                    and not view.trick.cards:  # nothing played yet this hand: nothing missed
                self.plays, self.plays_hand = [], view.hand_number
            return
        if kind == "hand_started":
            self.plays = []
            self.plays_hand = event.hand_started.hand_number
        elif kind == "card_played":
            played = (event.card_played.seat, card_index(event.card_played.card))
            if played not in self.plays:
                self.plays.append(played)
        elif kind == "player_left" and event.player_left.seat not in self.left_order:
            self.left_order.append(event.player_left.seat)

    def info(self, view: copas_pb2.TableView) -> InfoSet | None:
        """The seat's information set, or None when the stream missed part of this hand."""
        n = view.rules.players
        trick = [(t.seat, card_index(t.card)) for t in view.trick.cards]
        # A view can show the next hand before its hand_started event (the engine deals it
        # as soon as the last card is played): then nothing of it has been played yet.
        plays = self.plays if self.plays_hand == view.hand_number else []
        if len(plays) != view.trick_number * n + len(trick) or (
                trick and plays[-len(trick):] != trick):
            return None
        rules = Rules(players=n, max_hands=view.rules.max_hands,
                      point_limit=max(1, view.rules.point_limit),
                      moon=_MOONS.get(view.rules.moon, MoonRule.OTHERS_PLUS_26),
                      points_on_first_trick=view.rules.points_on_first_trick,
                      queen_breaks_hearts=view.rules.queen_breaks_hearts)
        players = sorted(view.players, key=lambda p: p.seat)
        return InfoSet(
            seat=view.seat, rules=rules, phase=_PHASES[view.phase], hand_number=view.hand_number,
            pass_direction=_DIRECTIONS[view.pass_direction], hand=mask(view.hand),
            passed=mask(view.pass_choice), received=mask(view.received),
            plays=tuple(plays), trick_number=view.trick_number,
            hearts_broken=view.hearts_broken, taken=tuple(p.hand_points for p in players),
            totals=tuple(p.total for p in players),
            has_passed=tuple(p.has_passed for p in players),
            left_order=tuple(self.left_order),
            moon_shooter=view.moon_shooter if view.HasField("moon_shooter") else None,
            to_act=tuple(view.to_act))

    async def _decide(self, view: copas_pb2.TableView) -> Action | None:
        info = self.info(view)
        if info is None:
            return None
        self.decisions += 1
        return await asyncio.get_running_loop().run_in_executor(
            _THINKERS, decide, info, self.policy, self.seed * 1000 + self.decisions, self.budget)

    async def choose(self, view: copas_pb2.TableView) -> list[cards_pb2.Card]:
        action = await self._decide(view)
        if isinstance(action, PassCards):
            return [card_pb(c) for c in action.cards]
        if isinstance(action, PlayCard):
            return [card_pb(action.card)]
        # History missed (joined mid-hand), or no cards to choose: play from the view alone.
        self.fallbacks += 1
        return await super().choose(view)

    async def choose_moon(self, view: copas_pb2.TableView) -> copas_pb2.MoonChoice.ValueType:
        action = await self._decide(view)
        if isinstance(action, ChooseMoon) and action.choice is MoonChoice.SUBTRACT_FROM_SELF:
            return copas_pb2.MOON_CHOICE_SUBTRACT_FROM_SELF
        return copas_pb2.MOON_CHOICE_ADD_TO_OTHERS


def register() -> None:
    """Make ``duck`` and ``mc`` available to ``copas bot`` and ``copas loadtest``."""
    for name in ("duck", "mc"):
        bots.register_policy(name, _factory(name), setup=register)


def _factory(name: str) -> bots.PolicyFactory:
    def make(seed: int | None) -> bots.Policy:
        return EnginePolicy(name, seed)
    return make

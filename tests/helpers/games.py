"""Games through the engine: rig a deal, play it out, fingerprint a state, read a table's
rules back from its summary."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from copas.v1 import copas_pb2

from engine import Game, MoonRule, Phase, Rules, card
from engine.cards import mask_of

ROOT = Path(__file__).resolve().parent.parent.parent


def cards(text: str) -> list[Any]:
    """'2C QS 10H' -> cards."""
    return [card(t) for t in text.split()]


def rig(game: Game, hands: list[str]) -> Game:
    """Replace the hands of the hand in progress, at the start of its play: passes (if any)
    are made automatically first, then each seat gets the given cards, as if dealt."""
    while game.phase is Phase.PASSING:
        seat = game.to_act()[0]
        game.apply(game.auto_action(seat))
    assert game.phase is Phase.PLAYING and game.trick_number == 0 and not game.trick_cards
    masks = [mask_of(cards(h)) for h in hands]
    assert len(masks) == game.players
    union = 0
    for m in masks:
        assert not union & m, "a card is dealt twice"
        union |= m
    game.hands = masks
    game.dealt = list(masks)
    game._begin_play()
    return game


def fingerprint(game: Game) -> tuple[Any, ...]:
    """Everything that makes up the state, to check that a refused action changed nothing."""
    return (game.phase, game.hand_number, tuple(game.hands), tuple(game.passes),
            tuple(game.received), tuple(game.taken), tuple(game.trick_cards),
            tuple(game.trick_seats), game.trick_number, game.hearts_broken, game.turn,
            tuple(game.totals), tuple(game.has_left), len(game.actions), game.moon_shooter,
            game.last_trick, len(game.hands_played), game.standings)


def play_auto(game: Game, until: Any = None) -> list[Any]:
    """Play automatic choices for everyone until the game ends (or ``until(game)``)."""
    events: list[Any] = []
    while not game.is_over and not (until and until(game)):
        seat = game.to_act()[0]
        events += game.apply(game.auto_action(seat))
    return events


def play_random(game: Game, rng: random.Random, max_actions: int = 10**6) -> list[Any]:
    """Random legal actions until the game ends."""
    events: list[Any] = []
    for _ in range(max_actions):
        if game.is_over:
            break
        events += game.apply(random_action(game, rng))
    return events


def random_action(game: Game, rng: random.Random) -> Any:
    from engine import ChooseMoon, MoonChoice, PassCards, PlayCard

    seats = game.to_act()
    seat = rng.choice(seats)
    if game.phase is Phase.PASSING:
        return PassCards(seat, tuple(rng.sample(game.legal_cards(seat), 3)))
    if game.phase is Phase.PLAYING:
        return PlayCard(seat, rng.choice(game.legal_cards(seat)))
    return ChooseMoon(seat, rng.choice(list(MoonChoice)))


def rules_of(table: copas_pb2.TableSummary) -> Rules:
    """The engine's rules for a table, from what its summary shows."""
    r = table.rules
    moon = {1: MoonRule.OTHERS_PLUS_26, 2: MoonRule.SHOOTER_CHOICE, 3: MoonRule.DISABLED}[r.moon]
    return Rules(players=r.players, max_hands=r.max_hands, point_limit=r.point_limit, moon=moon,
                 points_on_first_trick=r.points_on_first_trick,
                 queen_breaks_hearts=r.queen_breaks_hearts, play_timeout=r.play_timeout_seconds,
                 pass_timeout=r.pass_timeout_seconds, moon_timeout=r.moon_timeout_seconds,
                 trick_pause=r.trick_pause_seconds, hand_pause=r.hand_pause_seconds)

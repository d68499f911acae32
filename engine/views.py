"""What one seat, or a spectator, may see: the only way hidden information leaves the engine.

Everything here is public except three things, which go only to their own seat: the hand,
the pass choice and the cards received. ``legal_cards`` is derived from the seat's own hand.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.actions import MoonChoice, PassDirection, Phase, Standing, TrickWon
from engine.cards import Card, cards_of
from engine.game import Game


@dataclass(frozen=True, slots=True)
class View:
    seat: int | None  # None for a spectator
    phase: Phase
    players: int
    hand_number: int
    pass_direction: PassDirection
    hearts_broken: bool
    trick_number: int
    trick: tuple[tuple[int, Card], ...]  # (seat, card) in play order
    last_trick: TrickWon | None
    to_act: tuple[int, ...]
    card_counts: tuple[int, ...]
    hand_points: tuple[int, ...]
    totals: tuple[int, ...]
    has_passed: tuple[bool, ...]
    has_left: tuple[bool, ...]
    moon_shooter: int | None
    moon_choices: tuple[MoonChoice, ...]  # offered to this seat when it is the shooter
    standings: tuple[Standing, ...]
    # Private to ``seat``; empty for a spectator.
    hand: tuple[Card, ...]
    pass_choice: tuple[Card, ...]
    received: tuple[Card, ...]
    legal_cards: tuple[Card, ...]  # non-empty only when this seat must act with cards

    @property
    def must_act(self) -> bool:
        return self.seat is not None and self.seat in self.to_act


@dataclass(frozen=True, slots=True)
class PrivateView:
    """What only ``seat`` may see."""

    hand: tuple[Card, ...]
    pass_choice: tuple[Card, ...]
    received: tuple[Card, ...]
    legal_cards: tuple[Card, ...]
    moon_choices: tuple[MoonChoice, ...]


NOTHING_PRIVATE = PrivateView((), (), (), (), ())


def private_view(game: Game, seat: int) -> PrivateView:
    """The seat's own hand, pass choice, received cards, legal cards and moon choices."""
    if not 0 <= seat < game.players:
        raise ValueError(f"seat must be 0..{game.players - 1}")
    chosen = game.passes[seat]
    return PrivateView(
        hand=cards_of(game.hands[seat]),
        pass_choice=cards_of(chosen) if chosen is not None
        and game.pass_direction is not PassDirection.HOLD else (),
        received=cards_of(game.received[seat]),
        legal_cards=cards_of(game.legal_mask(seat)),
        moon_choices=tuple(MoonChoice) if game.phase is Phase.MOON_CHOICE
        and seat == game.moon_shooter else ())


def _view(game: Game, seat: int | None) -> View:
    n = game.players
    mine = private_view(game, seat) if seat is not None else NOTHING_PRIVATE
    return View(
        seat=seat,
        phase=game.phase,
        players=n,
        hand_number=game.hand_number,
        pass_direction=game.pass_direction,
        hearts_broken=game.hearts_broken,
        trick_number=game.trick_number,
        trick=tuple((s, Card(c)) for s, c in zip(game.trick_seats, game.trick_cards)),
        last_trick=game.last_trick,
        to_act=game.to_act(),
        card_counts=tuple(h.bit_count() for h in game.hands),
        hand_points=tuple(game.taken),
        totals=tuple(game.totals),
        has_passed=tuple(p is not None for p in game.passes),
        has_left=tuple(game.has_left),
        moon_shooter=game.moon_shooter,
        moon_choices=mine.moon_choices,
        standings=game.standings,
        hand=mine.hand,
        pass_choice=mine.pass_choice,
        received=mine.received,
        legal_cards=mine.legal_cards,
    )


def player_view(game: Game, seat: int) -> View:
    """Everything ``seat`` may see: the public view plus its own hand, pass and received
    cards, and its legal cards when it must act."""
    if not 0 <= seat < game.players:
        raise ValueError(f"seat must be 0..{game.players - 1}")
    return _view(game, seat)


def public_view(game: Game) -> View:
    """What a spectator may see: no hand, no pass choice, no received cards."""
    return _view(game, None)

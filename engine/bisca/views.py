"""What one seat, or a spectator, may see of a Bisca game: the only way hidden information
leaves the engine (docs/RULES.md, "Bisca", "What each player may see").

Everything here is public except the seat's own hand, the card it drew last and its legal
cards. The stock's order and the other hands are never in a view; the trump card is public
(under the stock, then in the hand of the seat that drew it, ``trump_drawn_by``).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.bisca.actions import Phase, Standing, TrickWon
from engine.bisca.cards import Card, cards_of
from engine.bisca.game import Game
from engine.bisca.rules import BiscaRules


@dataclass(frozen=True, slots=True)
class View:
    seat: int | None  # None for a spectator
    rules: BiscaRules
    phase: Phase
    sides: tuple[int, ...]  # the side (team, or the player) of each seat
    hand_number: int
    dealer: int
    trump_card: Card
    trump_drawn_by: int | None  # the seat that drew the trump card, once drawn
    stock_size: int  # cards left to draw, the trump card included
    must_follow: bool  # following suit is compulsory now
    trick_number: int
    trick: tuple[tuple[int, Card], ...]  # (seat, card) in play order
    last_trick: TrickWon | None
    played: tuple[Card, ...]  # the cards of this hand's finished tricks, in play order
    tricks: tuple[TrickWon, ...]  # this hand's finished tricks (who led, won, what was played)
    to_act: tuple[int, ...]
    card_counts: tuple[int, ...]
    points: tuple[int, ...]  # card points taken this hand, per seat
    side_points: tuple[int, ...]
    totals: tuple[int, ...]  # game points, per side
    tied_hands_carried: int
    has_left: tuple[bool, ...]
    standings: tuple[Standing, ...]
    # Private to ``seat``; empty (None) for a spectator.
    hand: tuple[Card, ...]
    last_drawn: Card | None
    legal_cards: tuple[Card, ...]  # non-empty only when this seat must play

    @property
    def players(self) -> int:
        return self.rules.players

    @property
    def trump_suit(self) -> int:
        return self.trump_card // 10

    @property
    def must_act(self) -> bool:
        return self.seat is not None and self.seat in self.to_act


def _view(game: Game, seat: int | None) -> View:
    hand: tuple[Card, ...] = ()
    last_drawn: Card | None = None
    legal: tuple[Card, ...] = ()
    if seat is not None:
        hand = cards_of(game.hands[seat])
        last_drawn = game.last_drawn[seat]
        legal = game.legal_cards(seat)
    return View(
        seat=seat,
        rules=game.rules,
        phase=game.phase,
        sides=tuple(game.rules.side_of(s) for s in range(game.players)),
        hand_number=game.hand_number,
        dealer=game.dealer,
        trump_card=game.trump_card,
        trump_drawn_by=game.trump_drawn_by,
        stock_size=len(game.stock),
        must_follow=game.must_follow,
        trick_number=game.trick_number,
        trick=tuple(zip(game.trick_seats, game.trick_cards, strict=True)),
        last_trick=game.last_trick,
        played=tuple(c for t in game.tricks for c in t.cards),
        tricks=tuple(game.tricks),
        to_act=game.to_act(),
        card_counts=tuple(h.bit_count() for h in game.hands),
        points=tuple(game.taken),
        side_points=game.side_points(),
        totals=tuple(game.totals),
        tied_hands_carried=game.tied_hands_carried,
        has_left=tuple(game.has_left),
        standings=game.standings,
        hand=hand,
        last_drawn=last_drawn,
        legal_cards=legal,
    )


def player_view(game: Game, seat: int) -> View:
    """Everything ``seat`` may see: the public view plus its own hand, the card it drew last
    and its legal cards when it must play."""
    if not 0 <= seat < game.players:
        raise ValueError(f"seat must be 0..{game.players - 1}")
    return _view(game, seat)


def public_view(game: Game) -> View:
    """What a spectator may see: no hand, no drawn card, no stock order."""
    return _view(game, None)

"""A Bisca game: a mutable state that accepts actions and reports what happened as events.

One legality authority: ``legal_mask`` is exactly what ``play`` accepts; anything else raises a
typed error naming the rule and leaves the state untouched. Hands are int bitmasks over the
40 cards (``engine.bisca.cards``). Beside the typed methods, the OpenSpiel-shaped ones
(``current_player``, ``legal_actions``, ``apply_action``, ``is_terminal``, ``returns``) let a
game-agnostic caller drive it with card indexes.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import NamedTuple

from engine.actions import GameEndReason
from engine.bisca.actions import (
    Abandon,
    Action,
    CardPlayed,
    CardsDrawn,
    Close,
    Event,
    GameOver,
    HandScored,
    HandStarted,
    Leave,
    Phase,
    PlayCard,
    PlayerLeft,
    Standing,
    TimeUp,
    TrickWon,
)
from engine.bisca.cards import (
    CARD_POINTS,
    CARDS,
    SUIT_MASKS,
    TOTAL_POINTS,
    Card,
    cards_of,
    pack_for,
)
from engine.bisca.rules import BiscaRules, FollowSuit, TieRule
from engine.errors import IllegalActionError, InvalidActionError, Reason


def legal_mask(hand: int, led_suit: int, must_follow: bool) -> int:
    """The cards of ``hand`` that may be played (``led_suit`` -1 when leading): any card,
    except that with ``must_follow`` a player holding the suit led must play one."""
    if must_follow and led_suit >= 0:
        return hand & SUIT_MASKS[led_suit] or hand
    return hand


def trick_winner(cards: Sequence[int], trump_suit: int) -> int:
    """The index in ``cards`` (play order) of the winning card: the highest trump, or the
    highest card of the suit led."""
    best = 0
    for i in range(1, len(cards)):
        c, b = cards[i], cards[best]
        if c // 10 == b // 10:
            if c % 10 > b % 10:
                best = i
        elif c // 10 == trump_suit:
            best = i
    return best


def auto_card(legal: int, trump_suit: int) -> Card:
    """The timeout card: fewest card points, then not a trump, then the lowest rank, then the
    suit (♣ ♦ ♠ ♥)."""
    return min(cards_of(legal),
               key=lambda c: (CARD_POINTS[c], c // 10 == trump_suit, c % 10, c // 10))


def game_points_for(side_points: int, margin_bonus: bool) -> int:
    """What winning a hand with ``side_points`` card points is worth (before carried ties)."""
    if margin_bonus and side_points >= TOTAL_POINTS:
        return 4
    if margin_bonus and side_points >= 91:
        return 2
    return 1


def compute_standings(rules: BiscaRules, totals: list[int] | tuple[int, ...],
                      left_order: list[int] | tuple[int, ...]) -> tuple[Standing, ...]:
    """Most game points first, equal totals share a place; a side with a leaver behind every
    side without one, the side whose player left first last. Seats share their side's place."""
    sides = rules.sides
    leaver_sides: list[int] = []
    for seat in left_order:
        side = rules.side_of(seat)
        if side not in leaver_sides:
            leaver_sides.append(side)
    stayers = [s for s in range(sides) if s not in leaver_sides]
    place = {s: 1 + sum(totals[o] > totals[s] for o in stayers) for s in stayers}
    for i, side in enumerate(leaver_sides):
        place[side] = sides - i
    left = set(left_order)
    rows = [Standing(seat, place[rules.side_of(seat)], rules.side_of(seat),
                     totals[rules.side_of(seat)], seat in left)
            for seat in range(rules.players)]
    return tuple(sorted(rows, key=lambda r: (r.place, r.seat)))


class HandResult(NamedTuple):
    hand_number: int
    trump_card: Card
    points: tuple[int, ...]  # per seat
    side_points: tuple[int, ...]
    winner: int | None
    game_points: tuple[int, ...]
    totals: tuple[int, ...]


class LeaverRecord(NamedTuple):
    seat: int
    hand_number: int
    trick_number: int


class Game:
    """A whole Bisca game from ``(rules, seed)``. Attributes are readable; change the state
    only through ``apply`` (or ``play``, ``leave``, ``abandon``, ``close``, ``time_up``)."""

    def __init__(self, rules: BiscaRules | None = None, seed: int | str = 0) -> None:
        self.rules = rules if rules is not None else BiscaRules()
        self.seed = seed
        self._rng = random.Random(seed)
        self.players = n = self.rules.players
        self.sides = self.rules.sides
        self.totals = [0] * self.sides
        self.has_left = [False] * n
        self.left: list[LeaverRecord] = []
        self.hands_played: list[HandResult] = []
        self.actions: list[Action] = []
        self.phase = Phase.PLAYING
        self.end_reason: GameEndReason | None = None
        self.standings: tuple[Standing, ...] = ()
        self.tied_hands_carried = 0
        self.hand_number = -1
        # Per hand, set by _start_hand.
        self.dealer = -1
        self.trump_card: Card = CARDS[0]
        self.trump_suit = 0
        self.hands: list[int] = [0] * n
        self.dealt: list[int] = [0] * n
        self.stock: list[Card] = []  # next card to draw first; the trump card last
        self.dealt_stock: tuple[Card, ...] = ()  # the stock as dealt this hand
        self.trump_drawn_by: int | None = None
        self.last_drawn: list[Card | None] = [None] * n
        self.taken = [0] * n  # card points taken this hand
        self.played = 0  # mask of the cards of this hand's finished tricks
        self.trick_cards: list[Card] = []
        self.trick_seats: list[int] = []
        self.last_trick: TrickWon | None = None
        self.tricks: list[TrickWon] = []
        self.trick_number = 0
        self.turn = -1
        self.started_events: list[Event] = []
        self._start_hand(self.started_events)

    # ------------------------------------------------------------ queries

    @property
    def is_over(self) -> bool:
        return self.phase is Phase.GAME_OVER

    @property
    def must_follow(self) -> bool:
        """Whether a player holding the suit led must play it now."""
        return self.rules.follow_suit is FollowSuit.STOCK_EMPTY and not self.stock

    @property
    def led_suit(self) -> int:
        return self.trick_cards[0] // 10 if self.trick_cards else -1

    def to_act(self) -> tuple[int, ...]:
        return (self.turn,) if self.phase is Phase.PLAYING else ()

    def legal_mask(self, seat: int) -> int:
        """Bitmask of the cards ``seat`` may play now (0 unless it is their turn)."""
        if self.phase is not Phase.PLAYING or seat != self.turn:
            return 0
        return legal_mask(self.hands[seat], self.led_suit, self.must_follow)

    def legal_cards(self, seat: int) -> tuple[Card, ...]:
        return cards_of(self.legal_mask(seat))

    def hand(self, seat: int) -> tuple[Card, ...]:
        return cards_of(self.hands[seat])

    def side_points(self) -> tuple[int, ...]:
        """Card points taken this hand, per side."""
        points = [0] * self.sides
        for seat, p in enumerate(self.taken):
            points[self.rules.side_of(seat)] += p
        return tuple(points)

    # ------------------------------------------------------------ OpenSpiel-shaped API

    def current_player(self) -> int:
        """The seat to play, or -1 when the game is over."""
        return self.turn if self.phase is Phase.PLAYING else -1

    def legal_actions(self) -> list[int]:
        """The card indexes the current player may play, in order."""
        return [int(c) for c in self.legal_cards(self.turn)] if self.turn >= 0 else []

    def apply_action(self, card_index: int) -> list[Event]:
        """Play card ``card_index`` for the current player."""
        return self.play(self.turn, card_index)

    def is_terminal(self) -> bool:
        return self.is_over

    def returns(self) -> list[int]:
        """Each seat's side's game points (final once the game is over)."""
        return [self.totals[self.rules.side_of(s)] for s in range(self.players)]

    # ------------------------------------------------------------ actions

    def apply(self, action: Action, *, is_automatic: bool = False) -> list[Event]:
        """Apply one action; return the events it caused (automatic play for seats that have
        left included). Raises InvalidActionError or IllegalActionError, changing nothing."""
        if isinstance(action, PlayCard):
            return self.play(action.seat, action.card, is_automatic=is_automatic)
        if isinstance(action, Leave):
            return self.leave(action.seat)
        if isinstance(action, Abandon):
            return self._end_now(Abandon(), GameEndReason.ABANDONED)
        if isinstance(action, Close):
            return self._end_now(Close(), GameEndReason.CLOSED)
        if isinstance(action, TimeUp):
            return self._end_now(TimeUp(), GameEndReason.TIME_LIMIT)
        raise InvalidActionError(f"not a Bisca action: {action!r}")

    def play(self, seat: int, card: object, *, is_automatic: bool = False) -> list[Event]:
        """Play ``card`` (a Card, its index or its text) for ``seat``.

        :raises InvalidActionError: not a seat or not a card of the pack.
        :raises IllegalActionError: not now, not this seat's turn, not in the hand, or the
            suit led must be followed (``MUST_FOLLOW_SUIT``).
        """
        self._check_seat(seat)
        played = _as_card(card)
        if self.phase is not Phase.PLAYING:
            raise IllegalActionError("the game is over", Reason.WRONG_PHASE)
        if seat != self.turn:
            raise IllegalActionError(f"it is seat {self.turn}'s turn, not seat {seat}'s",
                                     Reason.NOT_YOUR_TURN)
        if not self.hands[seat] >> played & 1:
            raise IllegalActionError(f"{played} is not in your hand", Reason.CARD_NOT_IN_HAND)
        if not self.legal_mask(seat) >> played & 1:
            led = self.led_suit
            raise IllegalActionError(
                f"the stock is empty: you must follow suit ({'♣♦♠♥'[led]})",
                Reason.MUST_FOLLOW_SUIT)
        self.actions.append(PlayCard(seat, played))
        events: list[Event] = [CardPlayed(seat, played, is_automatic)]
        self._play(seat, played, events)
        self._play_for_leavers(events)
        return events

    def leave(self, seat: int) -> list[Event]:
        """The seat leaves: it plays on automatically, placed behind everyone who stayed."""
        self._check_seat(seat)
        if self.phase is Phase.GAME_OVER:
            raise IllegalActionError("the game is over", Reason.WRONG_PHASE)
        if self.has_left[seat]:
            raise IllegalActionError("this seat has already left", Reason.SEAT_HAS_LEFT)
        self.actions.append(Leave(seat))
        self.has_left[seat] = True
        self.left.append(LeaverRecord(seat, self.hand_number, self.trick_number))
        events: list[Event] = [PlayerLeft(seat, self.hand_number, self.trick_number)]
        staying_sides = {self.rules.side_of(s) for s in range(self.players)
                         if not self.has_left[s]}
        if len(staying_sides) <= 1:
            self._end_game(GameEndReason.LAST_PLAYER, events)
        else:
            self._play_for_leavers(events)
        return events

    def abandon(self) -> list[Event]:
        return self.apply(Abandon())

    def close(self) -> list[Event]:
        return self.apply(Close())

    def time_up(self) -> list[Event]:
        return self.apply(TimeUp())

    def auto_action(self, seat: int) -> PlayCard:
        """What RULES.md plays for ``seat`` on a timeout (or after leaving)."""
        legal = self.legal_mask(seat)
        if not legal:
            raise IllegalActionError(f"seat {seat} has nothing to do now", Reason.NOT_YOUR_TURN)
        return PlayCard(seat, auto_card(legal, self.trump_suit))

    # ------------------------------------------------------------ internals

    def _check_seat(self, seat: object) -> None:
        if type(seat) is not int or not 0 <= seat < self.players:
            raise InvalidActionError(f"seat must be 0..{self.players - 1}, got {seat!r}",
                                     Reason.INVALID_SEAT)

    def _end_now(self, action: Action, reason: GameEndReason) -> list[Event]:
        if self.phase is Phase.GAME_OVER:
            raise IllegalActionError("the game is over", Reason.WRONG_PHASE)
        self.actions.append(action)
        events: list[Event] = []
        self._end_game(reason, events)
        return events

    def _start_hand(self, events: list[Event]) -> None:
        n, k = self.players, self.rules.hand_size
        self.hand_number += 1
        self.dealer = (self.hand_number - 1) % n
        leader = self.hand_number % n
        deck = list(pack_for(n))
        self._rng.shuffle(deck)
        hands = [0] * n
        for i in range(n * k):  # one card at a time, from the leader round in play order
            hands[(leader + i) % n] |= 1 << deck[i]
        self.hands = hands
        self.dealt = list(hands)
        self.trump_card = deck[n * k]
        self.trump_suit = self.trump_card // 10
        self.stock = [*deck[n * k + 1:], self.trump_card]
        self.dealt_stock = tuple(self.stock)
        self.trump_drawn_by = None
        self.last_drawn = [None] * n
        self.taken = [0] * n
        self.played = 0
        self.trick_cards = []
        self.trick_seats = []
        self.last_trick = None
        self.tricks = []
        self.trick_number = 0
        self.turn = leader
        events.append(HandStarted(self.hand_number, self.dealer, leader, self.trump_card,
                                  len(self.stock)))

    def _play(self, seat: int, card: Card, events: list[Event]) -> None:
        self.hands[seat] ^= 1 << card
        self.trick_cards.append(card)
        self.trick_seats.append(seat)
        if len(self.trick_cards) < self.players:
            self.turn = (seat + 1) % self.players
            return
        cards = tuple(self.trick_cards)
        winner = self.trick_seats[trick_winner(cards, self.trump_suit)]
        points = sum(CARD_POINTS[c] for c in cards)
        self.taken[winner] += points
        for c in cards:
            self.played |= 1 << c
        won = TrickWon(self.trick_number, winner, self.trick_seats[0], cards, points)
        events.append(won)
        self.last_trick = won
        self.tricks.append(won)
        self.trick_cards = []
        self.trick_seats = []
        self.trick_number += 1
        self.turn = winner
        if self.stock:
            order = tuple((winner + i) % self.players for i in range(self.players))
            trump_to = None
            for s in order:
                drawn = self.stock.pop(0)
                self.hands[s] |= 1 << drawn
                self.last_drawn[s] = drawn
                if not self.stock:
                    trump_to = self.trump_drawn_by = s
            events.append(CardsDrawn(order, len(self.stock), trump_to))
        if not any(self.hands):
            self._end_hand(events)

    def _end_hand(self, events: list[Event]) -> None:
        side_points = self.side_points()
        best = max(side_points)
        winners = [s for s, p in enumerate(side_points) if p == best]
        scored = [0] * self.sides
        winner: int | None = None
        if len(winners) == 1:
            winner = winners[0]
            scored[winner] = (game_points_for(best, self.rules.margin_bonus)
                              + self.tied_hands_carried)
            self.tied_hands_carried = 0
        elif self.rules.tie is TieRule.CARRIED_OVER:
            self.tied_hands_carried += 1
        for s, p in enumerate(scored):
            self.totals[s] += p
        totals = tuple(self.totals)
        self.hands_played.append(HandResult(self.hand_number, self.trump_card, tuple(self.taken),
                                            side_points, winner, tuple(scored), totals))
        events.append(HandScored(self.hand_number, tuple(self.taken), side_points, winner,
                                 tuple(scored), totals, self.tied_hands_carried))
        if max(totals) >= self.rules.target:
            self._end_game(GameEndReason.POINT_LIMIT, events)
        elif self.rules.max_hands and len(self.hands_played) >= self.rules.max_hands:
            self._end_game(GameEndReason.HAND_LIMIT, events)
        else:
            self._start_hand(events)

    def _end_game(self, reason: GameEndReason, events: list[Event]) -> None:
        self.phase = Phase.GAME_OVER
        self.turn = -1
        self.end_reason = reason
        self.standings = compute_standings(self.rules, self.totals,
                                           [lv.seat for lv in self.left])
        events.append(GameOver(reason, self.standings))

    def _play_for_leavers(self, events: list[Event]) -> None:
        """Seats that have left are played for at once, with the timeout card."""
        while self.phase is Phase.PLAYING and self.has_left[self.turn]:
            seat = self.turn
            chosen = auto_card(self.legal_mask(seat), self.trump_suit)
            events.append(CardPlayed(seat, chosen, True))
            self._play(seat, chosen, events)


def _as_card(value: object) -> Card:
    if type(value) is Card:
        return value
    if isinstance(value, str):
        return Card.parse(value)
    if type(value) is int and 0 <= value < 40:  # not a bool, nor another game's card
        return CARDS[value]
    raise InvalidActionError(f"{value!r} is not a card of the 40-card pack", Reason.INVALID_CARD)

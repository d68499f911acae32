"""Bisca's values on the wire (copas.v1): its cards (the 40-card pack in the contract's
``Card``: suit, rank and text), its rules (``Rules`` with ``Rules.bisca``), its phases and
its events as ``TableEvent``'s members."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from copas.v1 import cards_pb2, copas_pb2
from google.protobuf.message import Message

from engine.actions import GameEndReason
from engine.bisca import (
    CARDS,
    BiscaRules,
    Card,
    CardPlayed,
    CardsDrawn,
    Event,
    FollowSuit,
    GameOver,
    HandScored,
    HandStarted,
    Phase,
    PlayerLeft,
    Standing,
    TieRule,
    TrickWon,
)
from server.errors import ServiceError
from server.games.cards import card_from_message

_SUITS = (cards_pb2.SUIT_CLUBS, cards_pb2.SUIT_DIAMONDS, cards_pb2.SUIT_SPADES,
          cards_pb2.SUIT_HEARTS)
# Bisca's strengths 0..9 (2 3 4 5 6 Q J K 7 A) as the contract's ranks.
_RANKS = (cards_pb2.RANK_TWO, cards_pb2.RANK_THREE, cards_pb2.RANK_FOUR, cards_pb2.RANK_FIVE,
          cards_pb2.RANK_SIX, cards_pb2.RANK_QUEEN, cards_pb2.RANK_JACK, cards_pb2.RANK_KING,
          cards_pb2.RANK_SEVEN, cards_pb2.RANK_ACE)
_FROM_ENUMS = {(_SUITS[c // 10], _RANKS[c % 10]): c for c in CARDS}
# Shared, never mutated: one message per card.
CARD_PB: tuple[cards_pb2.Card, ...] = tuple(
    cards_pb2.Card(suit=_SUITS[c // 10], rank=_RANKS[c % 10], text=str(c)) for c in CARDS)

PHASE_TO_PB = {Phase.PLAYING: copas_pb2.PHASE_PLAYING, Phase.GAME_OVER: copas_pb2.PHASE_GAME_OVER}
END_REASON_TO_PB = {GameEndReason.HAND_LIMIT: copas_pb2.GAME_END_REASON_HAND_LIMIT,
                    GameEndReason.POINT_LIMIT: copas_pb2.GAME_END_REASON_POINT_LIMIT,
                    GameEndReason.LAST_PLAYER: copas_pb2.GAME_END_REASON_LAST_PLAYER,
                    GameEndReason.ABANDONED: copas_pb2.GAME_END_REASON_ABANDONED,
                    GameEndReason.CLOSED: copas_pb2.GAME_END_REASON_CLOSED,
                    GameEndReason.TIME_LIMIT: copas_pb2.GAME_END_REASON_TIME_LIMIT}
FOLLOW_TO_PB = {FollowSuit.NEVER: copas_pb2.BISCA_FOLLOW_SUIT_NEVER,
                FollowSuit.STOCK_EMPTY: copas_pb2.BISCA_FOLLOW_SUIT_STOCK_EMPTY}
FOLLOW_FROM_PB = {v: k for k, v in FOLLOW_TO_PB.items()}
TIE_TO_PB = {TieRule.NOBODY_SCORES: copas_pb2.BISCA_TIE_NOBODY_SCORES,
             TieRule.CARRIED_OVER: copas_pb2.BISCA_TIE_CARRIED_OVER}
TIE_FROM_PB = {v: k for k, v in TIE_TO_PB.items()}

# Rules fields a Bisca table shares with Hearts's (proto field -> BiscaRules attribute).
SHARED_FIELDS = {"players": "players", "max_hands": "max_hands",
                 "play_timeout_seconds": "play_timeout",
                 "trick_pause_seconds": "trick_pause", "hand_pause_seconds": "hand_pause"}
# RulesOverrides fields a Bisca table has no use for: Hearts's own options.
NOT_BISCAS = ("point_limit", "moon", "points_on_first_trick", "queen_breaks_hearts",
              "pass_timeout_seconds", "moon_timeout_seconds")
_BISCA_FIELDS = ("partnerships", "hand_size", "margin_bonus", "target")


def card_from_pb(message: cards_pb2.Card) -> Card:
    """A card of the 40-card pack from the wire: the enums, or the text form; both set must
    agree.

    :raises ServiceError: INVALID_ARGUMENT (INVALID_CARD)."""
    by_enum = None
    if message.suit or message.rank:
        found = _FROM_ENUMS.get((message.suit, message.rank))
        if found is None:
            raise ServiceError.invalid(
                "not a card of Bisca's 40-card pack (no 8, 9 or 10): ranks 2-7, Q, J, K, A",
                "INVALID_CARD")
        by_enum = CARDS[found]
    return card_from_message(message, by_enum, Card.parse, "AS, 7H, QD")


def rules_to_pb(rules: BiscaRules) -> copas_pb2.Rules:
    message = copas_pb2.Rules(game="bisca", bisca=copas_pb2.BiscaRules(
        partnerships=rules.partnerships, hand_size=rules.hand_size,
        follow_suit=FOLLOW_TO_PB[rules.follow_suit], margin_bonus=rules.margin_bonus,
        tie=TIE_TO_PB[rules.tie], target=rules.target))
    for field, attr in SHARED_FIELDS.items():
        setattr(message, field, getattr(rules, attr))
    return message


def rules_overrides(message: copas_pb2.RulesOverrides) -> dict[str, Any]:
    """The options a request sets explicitly, as BiscaRules keyword arguments.

    :raises ServiceError: INVALID_ARGUMENT (INVALID_RULES) for one of Hearts's options, or
        an enum value Bisca has not."""
    given = {field.name for field, _ in message.ListFields()}
    others = [name for name in NOT_BISCAS if name in given]
    if others:
        raise ServiceError.invalid(
            f"{', '.join(others)}: {'a Hearts option' if len(others) == 1 else 'Hearts options'}"
            ", not Bisca's: a Bisca table takes players, max_hands, the play timeout, the "
            "pauses, the bot pace and rules.bisca (partnerships, hand_size, follow_suit, "
            "margin_bonus, tie, target)", "INVALID_RULES")
    changes: dict[str, Any] = {SHARED_FIELDS[field.name]: value
                               for field, value in message.ListFields()
                               if field.name in SHARED_FIELDS}
    own = message.bisca
    changes |= {field.name: value for field, value in own.ListFields()
                if field.name in _BISCA_FIELDS}
    if own.follow_suit:
        if own.follow_suit not in FOLLOW_FROM_PB:
            raise ServiceError.invalid(
                "follow_suit must be BISCA_FOLLOW_SUIT_NEVER or BISCA_FOLLOW_SUIT_STOCK_EMPTY",
                "INVALID_RULES")
        changes["follow_suit"] = FOLLOW_FROM_PB[own.follow_suit]
    if own.tie:
        if own.tie not in TIE_FROM_PB:
            raise ServiceError.invalid(
                "tie must be BISCA_TIE_NOBODY_SCORES or BISCA_TIE_CARRIED_OVER", "INVALID_RULES")
        changes["tie"] = TIE_FROM_PB[own.tie]
    return changes


def standing_to_pb(row: Standing) -> copas_pb2.Standing:
    return copas_pb2.Standing(seat=row.seat, place=row.place, total=row.total,
                              has_left=row.has_left)


def trick_to_pb(leader: int, seats: tuple[int, ...] | list[int],
                cards: tuple[int, ...] | list[int]) -> copas_pb2.Trick:
    return copas_pb2.Trick(leader=leader, cards=[copas_pb2.TrickCard(seat=s, card=CARD_PB[c])
                                                 for s, c in zip(seats, cards, strict=True)])


def won_trick_to_pb(won: TrickWon, players: int) -> copas_pb2.Trick:
    seats = [(won.leader + i) % players for i in range(len(won.cards))]
    return trick_to_pb(won.leader, seats, won.cards)


def per_seat(values: tuple[int, ...], sides: Mapping[int, int] | list[int]) -> list[int]:
    """A value per side, as each seat's (its side's)."""
    return [values[side] for side in sides]


def event_to_pb(event: Event, players: int, sides: list[int]) -> tuple[str, Message]:
    """An engine event as TableEvent's oneof field: its name and its message (``sides``: each
    seat's side, for a hand's game points per seat)."""
    match event:
        case CardPlayed(seat, card, is_automatic):
            return ("card_played", copas_pb2.CardPlayed(seat=seat, card=CARD_PB[card],
                                                         is_automatic=is_automatic))
        case TrickWon():
            return ("trick_won", copas_pb2.TrickWon(
                trick_number=event.trick_number, winner=event.winner,
                trick=won_trick_to_pb(event, players), points=event.points))
        case CardsDrawn(order, stock_size, trump_card_to):
            drawn = copas_pb2.CardsDrawn(seats=order, stock_size=stock_size)
            if trump_card_to is not None:
                drawn.trump_drawn_by = trump_card_to
            return ("cards_drawn", drawn)
        case HandStarted(hand_number, dealer, _leader, trump_card, _stock):
            return ("hand_started", copas_pb2.HandStarted(
                hand_number=hand_number, trump_card=CARD_PB[trump_card], dealer=dealer))
        case HandScored():
            return ("hand_scored", copas_pb2.HandScored(
                hand_number=event.hand_number, taken=event.points,
                points=per_seat(event.game_points, sides),
                totals=per_seat(event.totals, sides)))
        case PlayerLeft(seat, hand_number, trick_number):
            return ("player_left", copas_pb2.PlayerLeft(seat=seat, hand_number=hand_number,
                                                        trick_number=trick_number))
        case GameOver(reason, standings):
            return ("game_over", copas_pb2.GameOver(
                reason=END_REASON_TO_PB[reason],
                standings=[standing_to_pb(r) for r in standings]))
    raise TypeError(f"no wire form for {event!r}")

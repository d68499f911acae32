"""Hearts on the wire: conversions between its engine values and copas.v1 messages, in one
place (cards, rules, moon, phases, end reasons, events). Only Hearts's module reads it; the
generic machine reaches it through ``server.games.get("hearts")``."""

from __future__ import annotations

from copas.v1 import cards_pb2, copas_pb2
from google.protobuf.message import Message

from engine import (
    CARDS,
    Card,
    GameEndReason,
    MoonChoice,
    MoonRule,
    PassDirection,
    Phase,
    Rules,
    Standing,
    TrickWon,
)
from engine import actions as ev
from server.errors import ServiceError
from server.games.cards import card_from_message

_SUIT_TO_PB = {0: cards_pb2.SUIT_CLUBS, 1: cards_pb2.SUIT_DIAMONDS, 2: cards_pb2.SUIT_SPADES,
               3: cards_pb2.SUIT_HEARTS}
_SUIT_FROM_PB = {v: k for k, v in _SUIT_TO_PB.items()}
_RANKS = tuple(r for r in cards_pb2.Rank.values() if r)  # the 2 .. the ace
# Shared, never mutated: one message per card.
CARD_PB: tuple[cards_pb2.Card, ...] = tuple(
    cards_pb2.Card(suit=_SUIT_TO_PB[c.suit], rank=_RANKS[c.rank], text=str(c)) for c in CARDS)

MOON_RULE_TO_PB = {MoonRule.OTHERS_PLUS_26: copas_pb2.MOON_RULE_OTHERS_PLUS_26,
                   MoonRule.SHOOTER_CHOICE: copas_pb2.MOON_RULE_SHOOTER_CHOICE,
                   MoonRule.DISABLED: copas_pb2.MOON_RULE_DISABLED}
MOON_RULE_FROM_PB = {v: k for k, v in MOON_RULE_TO_PB.items()}
MOON_CHOICE_TO_PB = {MoonChoice.SUBTRACT_FROM_SELF: copas_pb2.MOON_CHOICE_SUBTRACT_FROM_SELF,
                     MoonChoice.ADD_TO_OTHERS: copas_pb2.MOON_CHOICE_ADD_TO_OTHERS}
MOON_CHOICE_FROM_PB = {v: k for k, v in MOON_CHOICE_TO_PB.items()}
PHASE_TO_PB = {Phase.PASSING: copas_pb2.PHASE_PASSING, Phase.PLAYING: copas_pb2.PHASE_PLAYING,
               Phase.MOON_CHOICE: copas_pb2.PHASE_MOON_CHOICE,
               Phase.GAME_OVER: copas_pb2.PHASE_GAME_OVER}
DIRECTION_TO_PB = {PassDirection.LEFT: copas_pb2.PASS_DIRECTION_LEFT,
                   PassDirection.RIGHT: copas_pb2.PASS_DIRECTION_RIGHT,
                   PassDirection.ACROSS: copas_pb2.PASS_DIRECTION_ACROSS,
                   PassDirection.HOLD: copas_pb2.PASS_DIRECTION_HOLD}
END_REASON_TO_PB = {GameEndReason.HAND_LIMIT: copas_pb2.GAME_END_REASON_HAND_LIMIT,
                    GameEndReason.POINT_LIMIT: copas_pb2.GAME_END_REASON_POINT_LIMIT,
                    GameEndReason.LAST_PLAYER: copas_pb2.GAME_END_REASON_LAST_PLAYER,
                    GameEndReason.ABANDONED: copas_pb2.GAME_END_REASON_ABANDONED,
                    GameEndReason.CLOSED: copas_pb2.GAME_END_REASON_CLOSED,
                    GameEndReason.TIME_LIMIT: copas_pb2.GAME_END_REASON_TIME_LIMIT}

_RULE_FIELDS = {  # proto field -> Rules attribute
    "players": "players", "max_hands": "max_hands", "point_limit": "point_limit",
    "points_on_first_trick": "points_on_first_trick",
    "queen_breaks_hearts": "queen_breaks_hearts",
    "play_timeout_seconds": "play_timeout", "pass_timeout_seconds": "pass_timeout",
    "moon_timeout_seconds": "moon_timeout", "trick_pause_seconds": "trick_pause",
    "hand_pause_seconds": "hand_pause",
}


def card_from_pb(message: cards_pb2.Card) -> Card:
    """A card from the wire: the enums, or the text form; both set must agree."""
    by_enum = None
    if message.suit or message.rank:
        if message.suit not in _SUIT_FROM_PB or not 2 <= message.rank <= 14:
            raise ServiceError.invalid("card has an unknown suit or rank", "INVALID_CARD")
        by_enum = CARDS[_SUIT_FROM_PB[message.suit] * 13 + message.rank - 2]
    return card_from_message(message, by_enum, Card.parse, "QS, 10H, 2C")


def rules_to_pb(rules: Rules) -> copas_pb2.Rules:
    message = copas_pb2.Rules(moon=MOON_RULE_TO_PB[rules.moon], game="hearts")
    for field, attr in _RULE_FIELDS.items():
        setattr(message, field, getattr(rules, attr))
    return message


RuleOverrides = dict[str, int | float | bool | MoonRule]  # Rules' keyword arguments


def rules_overrides(message: copas_pb2.RulesOverrides) -> RuleOverrides:
    """The options a request sets explicitly, as Rules keyword arguments."""
    changes: RuleOverrides = {_RULE_FIELDS[field.name]: value
                              for field, value in message.ListFields()
                              if field.name in _RULE_FIELDS}
    if message.moon:
        if message.moon not in MOON_RULE_FROM_PB:
            raise ServiceError.invalid(f"unknown moon rule {message.moon}", "INVALID_RULES")
        changes["moon"] = MOON_RULE_FROM_PB[message.moon]
    return changes


def standing_to_pb(row: Standing) -> copas_pb2.Standing:
    return copas_pb2.Standing(seat=row.seat, place=row.place, total=row.total,
                              has_left=row.has_left)


def trick_to_pb(leader: int, cards: list[tuple[int, int]] | tuple[tuple[int, int], ...]
                ) -> copas_pb2.Trick:
    return copas_pb2.Trick(leader=leader, cards=[copas_pb2.TrickCard(seat=s, card=CARD_PB[c])
                                                 for s, c in cards])


def won_trick_to_pb(won: TrickWon, players: int) -> copas_pb2.Trick:
    seats = [(won.leader + i) % players for i in range(len(won.cards))]
    return trick_to_pb(won.leader, list(zip(seats, won.cards, strict=True)))


def event_to_pb(event: ev.Event, players: int) -> tuple[str, Message]:
    """An engine event as TableEvent's oneof field: its name and its message."""
    match event:
        case ev.CardPlayed(seat, card, is_automatic):
            return ("card_played", copas_pb2.CardPlayed(seat=seat, card=CARD_PB[card],
                                                         is_automatic=is_automatic))
        case ev.TrickWon():
            return ("trick_won", copas_pb2.TrickWon(
                trick_number=event.trick_number, winner=event.winner,
                trick=won_trick_to_pb(event, players), points=event.points))
        case ev.PassChosen(seat, is_automatic):
            return ("pass_chosen", copas_pb2.PassChosen(seat=seat, is_automatic=is_automatic))
        case ev.CardsExchanged(hand_number, direction):
            return ("cards_exchanged", copas_pb2.CardsExchanged(
                hand_number=hand_number, pass_direction=DIRECTION_TO_PB[direction]))
        case ev.HandStarted(hand_number, direction):
            return ("hand_started", copas_pb2.HandStarted(
                hand_number=hand_number, pass_direction=DIRECTION_TO_PB[direction]))
        case ev.MoonShot(seat, hand_number, awaits_choice):
            return ("moon_shot", copas_pb2.MoonShot(seat=seat, hand_number=hand_number,
                                                    awaits_choice=awaits_choice))
        case ev.MoonChosen(seat, choice, is_automatic):
            return ("moon_chosen", copas_pb2.MoonChosen(
                seat=seat, choice=MOON_CHOICE_TO_PB[choice], is_automatic=is_automatic))
        case ev.HandScored():
            scored = copas_pb2.HandScored(
                hand_number=event.hand_number, taken=event.taken, points=event.points,
                totals=event.totals,
                moon_choice=MOON_CHOICE_TO_PB.get(event.moon_choice, 0)  # type: ignore[arg-type]
                if event.moon_choice else 0)
            if event.moon_shooter is not None:
                scored.moon_shooter = event.moon_shooter
            return ("hand_scored", scored)
        case ev.PlayerLeft(seat, hand_number, trick_number):
            return ("player_left", copas_pb2.PlayerLeft(seat=seat, hand_number=hand_number,
                                                        trick_number=trick_number))
        case ev.GameOver(reason, standings):
            return ("game_over", copas_pb2.GameOver(
                reason=END_REASON_TO_PB[reason],
                standings=[standing_to_pb(r) for r in standings]))
    raise TypeError(f"no wire form for {event!r}")

"""What Bisca players do (actions) and what happens (events), as small immutable values.

Events carry only public information: what any spectator may know. A seat's hand and the
card it drew leave the engine only through ``engine.bisca.views``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, NamedTuple

from engine.actions import GameEndReason
from engine.bisca.cards import Card
from engine.errors import InvalidActionError, InvalidCardError, Reason


class Phase(StrEnum):
    PLAYING = "PLAYING"
    GAME_OVER = "GAME_OVER"


# ---------------------------------------------------------------- actions


class PlayCard(NamedTuple):
    seat: int
    card: Card


class Leave(NamedTuple):
    """The seat leaves: it plays on automatically and is placed last."""

    seat: int


class Abandon(NamedTuple):
    """The table ends the game (reason ABANDONED)."""


class Close(NamedTuple):
    """An operator ends the game (reason CLOSED)."""


class TimeUp(NamedTuple):
    """A championship round's time limit ends the game (reason TIME_LIMIT)."""


Action = PlayCard | Leave | Abandon | Close | TimeUp


def action_to_json(action: Action) -> dict[str, Any]:
    if isinstance(action, PlayCard):
        return {"type": "play", "seat": action.seat, "card": str(action.card)}
    if isinstance(action, Leave):
        return {"type": "leave", "seat": action.seat}
    if isinstance(action, Abandon):
        return {"type": "abandon"}
    if isinstance(action, Close):
        return {"type": "close"}
    return {"type": "time_up"}


def action_from_json(data: dict[str, Any]) -> Action:
    """The action a JSON record holds; InvalidActionError for anything else."""
    try:
        kind = data["type"]
        if kind == "play":
            return PlayCard(int(data["seat"]), Card.parse(data["card"]))
        if kind == "leave":
            return Leave(int(data["seat"]))
        simple: dict[str, Action] = {"abandon": Abandon(), "close": Close(),
                                     "time_up": TimeUp()}
        return simple[kind]
    except InvalidCardError:
        raise
    except (KeyError, TypeError, ValueError):
        raise InvalidActionError(f"not a Bisca action: {data!r}", Reason.INVALID_ACTION) from None


# ---------------------------------------------------------------- events


class HandStarted(NamedTuple):
    hand_number: int
    dealer: int
    leader: int
    trump_card: Card  # turned up under the stock; its suit is trumps
    stock_size: int  # cards left to draw, the trump card included


class CardPlayed(NamedTuple):
    seat: int
    card: Card
    is_automatic: bool  # a timeout's or a leaver's card


class TrickWon(NamedTuple):
    trick_number: int
    winner: int
    leader: int
    cards: tuple[Card, ...]  # in play order, from the leader
    points: int


class CardsDrawn(NamedTuple):
    """After a trick every seat drew one card, in ``order`` (which cards is private, but the
    trump card's taker, ``trump_card_to``, is public)."""

    order: tuple[int, ...]
    stock_size: int  # left after the draw
    trump_card_to: int | None


class HandScored(NamedTuple):
    hand_number: int
    points: tuple[int, ...]  # card points taken, per seat
    side_points: tuple[int, ...]  # per side (a team, or a player)
    winner: int | None  # the side with the most card points; None on a tie
    game_points: tuple[int, ...]  # scored this hand, per side
    totals: tuple[int, ...]  # game points so far, per side
    tied_hands_carried: int  # tied hands whose point goes to the next winner (CARRIED_OVER)


class PlayerLeft(NamedTuple):
    seat: int
    hand_number: int
    trick_number: int


class Standing(NamedTuple):
    seat: int
    place: int  # 1 = first; a side's seats share its place
    side: int
    total: int  # the side's game points
    has_left: bool


class GameOver(NamedTuple):
    reason: GameEndReason
    standings: tuple[Standing, ...]


Event = (HandStarted | CardPlayed | TrickWon | CardsDrawn | HandScored | PlayerLeft
         | GameOver)

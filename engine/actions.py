"""What players do (actions) and what happens (events), as small immutable values.

Events carry only public information: what any spectator may know. Private parts (a hand,
a pass choice, the cards received) leave the engine only through ``engine.views``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, NamedTuple

from engine.cards import Card
from engine.errors import InvalidActionError, Reason


class Phase(StrEnum):
    PASSING = "PASSING"
    PLAYING = "PLAYING"
    MOON_CHOICE = "MOON_CHOICE"
    GAME_OVER = "GAME_OVER"


class PassDirection(StrEnum):
    LEFT = "LEFT"  # to seat i+1
    RIGHT = "RIGHT"  # to seat i-1
    ACROSS = "ACROSS"  # to seat i+2 (4 players only)
    HOLD = "HOLD"  # no passing this hand

    @property
    def offset(self) -> int:
        return _OFFSETS[self]


_OFFSETS = {PassDirection.LEFT: 1, PassDirection.RIGHT: -1, PassDirection.ACROSS: 2,
            PassDirection.HOLD: 0}


class MoonChoice(StrEnum):
    """The shooter's choice under ``MoonRule.SHOOTER_CHOICE``."""

    SUBTRACT_FROM_SELF = "SUBTRACT_FROM_SELF"  # shooter's total -26, never below 0
    ADD_TO_OTHERS = "ADD_TO_OTHERS"  # every other player +26


class GameEndReason(StrEnum):
    HAND_LIMIT = "HAND_LIMIT"
    POINT_LIMIT = "POINT_LIMIT"
    LAST_PLAYER = "LAST_PLAYER"
    # The table ended the game: no player who stayed is a person, or none has acted for too
    # long (the server decides when; see docs/RULES.md). Scored like LAST_PLAYER.
    ABANDONED = "ABANDONED"
    # An operator ended the game (the server's admin service). Scored like ABANDONED.
    CLOSED = "CLOSED"
    # A championship round's time limit ended the game (docs/RULES.md, "Championships").
    # Scored like ABANDONED.
    TIME_LIMIT = "TIME_LIMIT"


# ---------------------------------------------------------------- actions


class PassCards(NamedTuple):
    seat: int
    cards: tuple[Card, ...]


class PlayCard(NamedTuple):
    seat: int
    card: Card


class ChooseMoon(NamedTuple):
    seat: int
    choice: MoonChoice


class Leave(NamedTuple):
    seat: int


class Abandon(NamedTuple):
    """The table ends the game at once (reason ABANDONED); ``seat`` is always -1."""

    seat: int = -1


class Close(NamedTuple):
    """An operator ends the game at once (reason CLOSED); ``seat`` is always -1."""

    seat: int = -1


class TimeUp(NamedTuple):
    """A championship round's time limit ends the game at once (reason TIME_LIMIT); ``seat``
    is always -1."""

    seat: int = -1


Action = PassCards | PlayCard | ChooseMoon | Leave | Abandon | Close | TimeUp


def action_to_json(action: Action) -> dict[str, Any]:
    """A JSON-ready dict; :func:`action_from_json` reads it back."""
    if isinstance(action, PlayCard):
        return {"type": "play", "seat": action.seat, "card": str(action.card)}
    if isinstance(action, PassCards):
        return {"type": "pass", "seat": action.seat, "cards": [str(c) for c in action.cards]}
    if isinstance(action, ChooseMoon):
        return {"type": "moon", "seat": action.seat, "choice": str(action.choice)}
    if isinstance(action, Abandon):
        return {"type": "abandon", "seat": -1}
    if isinstance(action, Close):
        return {"type": "close", "seat": -1}
    if isinstance(action, TimeUp):
        return {"type": "time_limit", "seat": -1}
    return {"type": "leave", "seat": action.seat}


def action_from_json(data: dict[str, Any]) -> Action:
    try:
        kind, seat = data["type"], data["seat"]
        if kind == "play":
            return PlayCard(seat, Card.parse(data["card"]))
        if kind == "pass":
            return PassCards(seat, tuple(Card.parse(c) for c in data["cards"]))
        if kind == "moon":
            return ChooseMoon(seat, MoonChoice(data["choice"]))
        if kind == "leave":
            return Leave(seat)
        if kind == "abandon":
            return Abandon()
        if kind == "close":
            return Close()
        if kind == "time_limit":
            return TimeUp()
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidActionError(f"unreadable action {data!r}: {exc}") from None
    raise InvalidActionError(f"unknown action type {kind!r}", Reason.INVALID_ACTION)


# ---------------------------------------------------------------- events


class Standing(NamedTuple):
    seat: int
    place: int
    total: int
    has_left: bool


class HandStarted(NamedTuple):
    hand_number: int
    pass_direction: PassDirection


class PassChosen(NamedTuple):
    seat: int
    is_automatic: bool


class CardsExchanged(NamedTuple):
    hand_number: int
    pass_direction: PassDirection


class CardPlayed(NamedTuple):
    seat: int
    card: Card
    is_automatic: bool


class TrickWon(NamedTuple):
    trick_number: int
    winner: int
    leader: int
    cards: tuple[Card, ...]  # in play order, starting with the leader's
    points: int


class MoonShot(NamedTuple):
    seat: int
    hand_number: int
    awaits_choice: bool


class MoonChosen(NamedTuple):
    seat: int
    choice: MoonChoice
    is_automatic: bool


class HandScored(NamedTuple):
    hand_number: int
    taken: tuple[int, ...]  # penalty points taken in tricks, per seat
    points: tuple[int, ...]  # what was added to each total (moon applied, floor at 0)
    totals: tuple[int, ...]
    moon_shooter: int | None
    moon_choice: MoonChoice | None


class PlayerLeft(NamedTuple):
    seat: int
    hand_number: int
    trick_number: int


class GameOver(NamedTuple):
    reason: GameEndReason
    standings: tuple[Standing, ...]


Event = (HandStarted | PassChosen | CardsExchanged | CardPlayed | TrickWon | MoonShot
         | MoonChosen | HandScored | PlayerLeft | GameOver)

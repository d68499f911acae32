"""Domain errors. They know nothing of gRPC; the server maps them to status codes."""

from __future__ import annotations

from enum import StrEnum


class Reason(StrEnum):
    """Why an action was refused: the rule it breaks, in a form a client can act on."""

    # Illegal now (the action is well formed, but the rules forbid it in this state).
    WRONG_PHASE = "WRONG_PHASE"
    NOT_YOUR_TURN = "NOT_YOUR_TURN"
    SEAT_HAS_LEFT = "SEAT_HAS_LEFT"
    CARD_NOT_IN_HAND = "CARD_NOT_IN_HAND"
    MUST_FOLLOW_SUIT = "MUST_FOLLOW_SUIT"
    HEARTS_NOT_BROKEN = "HEARTS_NOT_BROKEN"
    NO_POINTS_ON_FIRST_TRICK = "NO_POINTS_ON_FIRST_TRICK"
    MUST_LEAD_OPENING_CARD = "MUST_LEAD_OPENING_CARD"
    ALREADY_PASSED = "ALREADY_PASSED"
    NOT_THE_SHOOTER = "NOT_THE_SHOOTER"
    # Malformed (wrong no matter the state).
    PASS_NEEDS_THREE_CARDS = "PASS_NEEDS_THREE_CARDS"
    INVALID_SEAT = "INVALID_SEAT"
    INVALID_CARD = "INVALID_CARD"
    INVALID_ACTION = "INVALID_ACTION"
    INVALID_RULES = "INVALID_RULES"
    INVALID_RECORD = "INVALID_RECORD"


class EngineError(Exception):
    """Base of every error the engine raises. ``reason`` names the rule."""

    reason: Reason = Reason.INVALID_ACTION

    def __init__(self, message: str, reason: Reason | None = None) -> None:
        super().__init__(message)
        if reason is not None:
            self.reason = reason

    @property
    def message(self) -> str:
        return str(self.args[0])


class InvalidActionError(EngineError, ValueError):
    """The action is malformed: no state of any game would accept it."""


class InvalidCardError(InvalidActionError):
    """Text or a number that is not a card."""

    reason = Reason.INVALID_CARD


class IllegalActionError(EngineError):
    """The action is well formed but the rules forbid it now; the state is unchanged."""


class RulesError(EngineError, ValueError):
    """A table option out of range or unknown."""

    reason = Reason.INVALID_RULES


class RecordError(EngineError, ValueError):
    """A game record that cannot be read or does not replay."""

    reason = Reason.INVALID_RECORD

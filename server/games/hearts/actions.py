"""Hearts's actions as the requests carry them (PassCards, PlayCard, ChooseMoon, LeaveTable),
read alike on the unary calls and on a Play stream. Moved from ``server/rpc/actions.py``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine import Action, ChooseMoon, Leave, PassCards, PlayCard
from server.errors import ServiceError
from server.games.hearts import codec


def decode_action(method: str, request: Any) -> tuple[Callable[[int], Action], object]:
    """An action request as the engine's action for a seat, and what it means (for its
    request_id's fingerprint); the unary calls and Play read actions alike.

    :raises ServiceError: INVALID_ARGUMENT for a malformed card, pass or choice.
    """
    if method == "PassCards":
        if len(request.cards) > 13:
            raise ServiceError.invalid("a pass is exactly three different cards",
                                       "PASS_NEEDS_THREE_CARDS")
        cards = tuple(codec.card_from_pb(c) for c in request.cards)
        return (lambda seat: PassCards(seat, cards)), sorted(int(c) for c in cards)
    if method == "PlayCard":
        card = codec.card_from_pb(request.card)
        return (lambda seat: PlayCard(seat, card)), int(card)
    if method == "ChooseMoon":
        choice = codec.MOON_CHOICE_FROM_PB.get(request.choice)
        if choice is None:
            raise ServiceError.invalid("choice must be MOON_CHOICE_SUBTRACT_FROM_SELF or "
                                       "MOON_CHOICE_ADD_TO_OTHERS", "INVALID_MOON_CHOICE")
        return (lambda seat: ChooseMoon(seat, choice)), str(choice)
    return Leave, None

"""What every game reads alike of a card on the wire (``copas.v1.Card``): its text form,
checked against the suit and rank the game read from the enums."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from copas.v1 import cards_pb2

from server.errors import ServiceError

C = TypeVar("C")


def card_from_message(message: cards_pb2.Card, by_enum: C | None, parse: Callable[[str], C],
                      examples: str) -> C:
    """The card ``message`` names: ``by_enum`` (the game's card of its suit and rank, None when
    neither is set) or its text read by ``parse``; both set must agree. ``examples``: texts of
    the game's cards, for the refusal of a text too long.

    :raises ServiceError: INVALID_ARGUMENT (INVALID_CARD)."""
    if message.text:
        if len(message.text) > 4:
            raise ServiceError.invalid(f"card text is at most 4 characters ({examples})",
                                       "INVALID_CARD")
        try:
            by_text = parse(message.text)
        except ValueError as exc:
            raise ServiceError.invalid(str(exc), "INVALID_CARD") from None
        if by_enum is not None and by_enum != by_text:
            raise ServiceError.invalid(f"card text {message.text!r} does not match its suit and "
                                       "rank", "INVALID_CARD")
        return by_text
    if by_enum is None:
        raise ServiceError.invalid("a card is required (suit and rank, or text)", "INVALID_CARD")
    return by_enum

"""Bisca's 40-card pack: a card is a small int, ``suit * 10 + strength``.

Strength 0 is the 2 and 9 the ace, in Bisca's order 2 3 4 5 6 Q J K 7 A; suits in the order
♣ ♦ ♠ ♥ (``engine.cards.Suit``). A set of cards is an int bitmask over the 40 indexes, one
10-bit block per suit. The text form is rank then suit, as Hearts's: ``"AS"``, ``"7H"``.
"""

from __future__ import annotations

from collections.abc import Iterable

from engine.cards import Suit
from engine.errors import InvalidCardError

RANK_TEXT = ("2", "3", "4", "5", "6", "Q", "J", "K", "7", "A")
POINTS_BY_STRENGTH = (0, 0, 0, 0, 0, 2, 3, 4, 10, 11)
_RANK_PARSE = {text: strength for strength, text in enumerate(RANK_TEXT)}
_SUIT_PARSE = {"C": Suit.CLUBS, "D": Suit.DIAMONDS, "S": Suit.SPADES, "H": Suit.HEARTS,
               "♣": Suit.CLUBS, "♦": Suit.DIAMONDS, "♠": Suit.SPADES, "♥": Suit.HEARTS}
PACK_SIZE = 40


class Card(int):
    """One card of the 40: an int 0..39 (``suit * 10 + strength``) with a text form such as
    ``"7H"``. Use the shared instances in :data:`CARDS`, :meth:`Card.parse` or :func:`card`."""

    __slots__ = ()

    def __new__(cls, index: int) -> Card:
        if not 0 <= index < PACK_SIZE:
            raise InvalidCardError(f"card index {index} is not in 0..39")
        return super().__new__(cls, index)

    @property
    def strength(self) -> int:
        """0 for the 2 up to 9 for the ace (2 3 4 5 6 Q J K 7 A)."""
        return int(self) % 10

    @property
    def suit(self) -> Suit:
        return Suit(int(self) // 10)

    @property
    def points(self) -> int:
        return CARD_POINTS[self]

    @property
    def text(self) -> str:
        return _TEXT[self]

    def __str__(self) -> str:
        return _TEXT[self]

    def __repr__(self) -> str:
        return f"Card({_TEXT[self]!r})"

    @classmethod
    def parse(cls, text: str) -> Card:
        """Parse ``"AS"``, ``"7h"`` or ``"Q♦"``; raise InvalidCardError otherwise (no 8, 9
        or 10 in this pack)."""
        if not isinstance(text, str):
            raise InvalidCardError(f"a card is text such as '7H', not {type(text).__name__}")
        cleaned = text.strip().upper()
        if len(cleaned) != 2 or cleaned[0] not in _RANK_PARSE or cleaned[1] not in _SUIT_PARSE:
            raise InvalidCardError(
                f"{text!r} is not a card of the 40-card pack: write rank then suit, e.g. "
                "'AS', '7H', 'QD' (ranks A 7 K J Q 6 5 4 3 2)")
        return CARDS[_SUIT_PARSE[cleaned[1]] * 10 + _RANK_PARSE[cleaned[0]]]


def card(text: str) -> Card:
    """Shorthand for :meth:`Card.parse`."""
    return Card.parse(text)


_TEXT = tuple(RANK_TEXT[i % 10] + "CDSH"[i // 10] for i in range(PACK_SIZE))
CARDS: tuple[Card, ...] = tuple(int.__new__(Card, i) for i in range(PACK_SIZE))
CARD_POINTS: tuple[int, ...] = tuple(POINTS_BY_STRENGTH[i % 10] for i in range(PACK_SIZE))
SUIT_MASKS: tuple[int, ...] = tuple(0x3FF << (10 * s) for s in range(4))
TOTAL_POINTS = 120


def pack_for(players: int) -> tuple[Card, ...]:
    """The cards dealt with ``players`` players: all 40, less the 2♦ with 3 players and the
    four 2s with 6, so that every trick is whole."""
    if players == 3:
        return tuple(c for c in CARDS if c != 10)
    if players == 6:
        return tuple(c for c in CARDS if c.strength != 0)
    return CARDS


def mask_of(cards: Iterable[int]) -> int:
    mask = 0
    for c in cards:
        mask |= 1 << c
    return mask


def cards_of(mask: int) -> tuple[Card, ...]:
    """The cards of a bitmask, in index order (♣ ♦ ♠ ♥, each from the 2 up to the ace)."""
    found = []
    while mask:
        low = mask & -mask
        found.append(CARDS[low.bit_length() - 1])
        mask ^= low
    return tuple(found)


def points_of(mask: int) -> int:
    return sum(CARD_POINTS[c] for c in cards_of(mask))

"""Cards and card sets.

A card is a small int, ``suit * 13 + rank`` (rank 0 is the 2, 12 the ace; suits in the
order ♣ ♦ ♠ ♥), so cards sort by suit and then rank, the way a hand is shown. A set of
cards is an int bitmask over those 52 indexes; each suit is one 13-bit block.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum

from engine.errors import InvalidCardError


class Suit(IntEnum):
    """The four suits, in the play-timeout tie order (and display order)."""

    CLUBS = 0
    DIAMONDS = 1
    SPADES = 2
    HEARTS = 3

    @property
    def letter(self) -> str:
        return "CDSH"[self]

    @property
    def symbol(self) -> str:
        return "♣♦♠♥"[self]


RANK_TEXT = ("2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K", "A")
_RANK_PARSE = {text: rank for rank, text in enumerate(RANK_TEXT)} | {"T": 8}
_SUIT_PARSE = {"C": Suit.CLUBS, "D": Suit.DIAMONDS, "S": Suit.SPADES, "H": Suit.HEARTS,
               "♣": Suit.CLUBS, "♦": Suit.DIAMONDS, "♠": Suit.SPADES, "♥": Suit.HEARTS}


class Card(int):
    """One card: an int 0..51 (``suit * 13 + rank``) with a text form such as ``"QS"``.

    Use the 52 shared instances in :data:`CARDS`, :meth:`Card.parse` or :func:`card`.
    """

    __slots__ = ()

    def __new__(cls, index: int) -> Card:
        if not 0 <= index < 52:
            raise InvalidCardError(f"card index {index} is not in 0..51")
        return super().__new__(cls, index)

    @property
    def rank(self) -> int:
        """0 for the 2 up to 12 for the ace."""
        return int(self) % 13

    @property
    def suit(self) -> Suit:
        return Suit(int(self) // 13)

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
        """Parse ``"QS"``, ``"10h"``, ``"Th"`` or ``"Q♠"``; raise InvalidCardError otherwise."""
        if not isinstance(text, str):
            raise InvalidCardError(f"a card is text such as 'QS', not {type(text).__name__}")
        cleaned = text.strip().upper()
        if len(cleaned) < 2 or cleaned[:-1] not in _RANK_PARSE or cleaned[-1] not in _SUIT_PARSE:
            raise InvalidCardError(
                f"{text!r} is not a card: write rank then suit, e.g. 'QS', '10H', '2C'")
        return CARDS[_SUIT_PARSE[cleaned[-1]] * 13 + _RANK_PARSE[cleaned[:-1]]]


def card(text: str) -> Card:
    """Shorthand for :meth:`Card.parse`."""
    return Card.parse(text)


_TEXT = tuple(RANK_TEXT[i % 13] + "CDSH"[i // 13] for i in range(52))
CARDS: tuple[Card, ...] = tuple(int.__new__(Card, i) for i in range(52))
SUIT_OF: tuple[int, ...] = tuple(i // 13 for i in range(52))


def _card(suit: Suit, rank: int) -> Card:
    return CARDS[suit * 13 + rank]


TWO_CLUBS = _card(Suit.CLUBS, 0)
THREE_CLUBS = _card(Suit.CLUBS, 1)
TWO_DIAMONDS = _card(Suit.DIAMONDS, 0)
QUEEN_SPADES = _card(Suit.SPADES, 10)
KING_SPADES = _card(Suit.SPADES, 11)
ACE_SPADES = _card(Suit.SPADES, 12)

# Bitmasks.
FULL_DECK = (1 << 52) - 1
SUIT_MASKS: tuple[int, ...] = tuple(0x1FFF << (13 * s) for s in range(4))
HEARTS_MASK = SUIT_MASKS[Suit.HEARTS]
QUEEN_SPADES_BIT = 1 << QUEEN_SPADES
POINTS_MASK = HEARTS_MASK | QUEEN_SPADES_BIT
CARD_POINTS: tuple[int, ...] = tuple(
    13 if i == QUEEN_SPADES else 1 if i >= 39 else 0 for i in range(52))

# For each suit, the cards of every 13-bit pattern: turns a mask into cards in four lookups.
def _suit_blocks(suit: int) -> tuple[tuple[Card, ...], ...]:
    """The cards of every 13-bit pattern of one suit, lowest first: each pattern is a smaller
    one and its highest card (8,192 tuples in one pass; the import stays quick)."""
    blocks: list[tuple[Card, ...]] = [()]
    for bits in range(1, 8192):
        high = bits.bit_length() - 1
        blocks.append(blocks[bits ^ (1 << high)] + (CARDS[suit * 13 + high],))
    return tuple(blocks)


SUIT_BLOCKS: tuple[tuple[tuple[Card, ...], ...], ...] = tuple(_suit_blocks(s) for s in range(4))
_CLUBS, _DIAMONDS, _SPADES, _HEARTS = SUIT_BLOCKS


def mask_of(cards: Iterable[int]) -> int:
    """The bitmask of some cards."""
    mask = 0
    for c in cards:
        mask |= 1 << c
    return mask


def cards_of(mask: int) -> tuple[Card, ...]:
    """The cards of a bitmask, in order (♣ ♦ ♠ ♥, each from the 2 up)."""
    return (_CLUBS[mask & 0x1FFF] + _DIAMONDS[mask >> 13 & 0x1FFF]
            + _SPADES[mask >> 26 & 0x1FFF] + _HEARTS[mask >> 39])


def points_of(mask: int) -> int:
    """Penalty points in a set of cards."""
    return (mask & HEARTS_MASK).bit_count() + (13 if mask & QUEEN_SPADES_BIT else 0)


def lowest_by_rank(mask: int) -> Card:
    """The lowest-ranked card of a non-empty mask; rank ties go ♣, ♦, ♠, ♥."""
    best = 99
    for s in range(4):
        block = mask >> (13 * s) & 0x1FFF
        if block:
            key = ((block & -block).bit_length() - 1) * 4 + s
            best = min(best, key)
    return CARDS[(best & 3) * 13 + (best >> 2)]

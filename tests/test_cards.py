import pytest

from engine import CARDS, Card, InvalidCardError, Suit, card
from engine.cards import POINTS_MASK, cards_of, mask_of, points_of


def test_text_round_trips_for_all_52_cards() -> None:
    assert len({str(c) for c in CARDS}) == 52
    for c in CARDS:
        assert Card.parse(str(c)) is c


@pytest.mark.parametrize(("text", "expected"), [
    ("QS", "QS"), ("10H", "10H"), ("TH", "10H"), ("th", "10H"), ("2c", "2C"), ("aS", "AS"),
    ("Q♠", "QS"), (" 3d ", "3D"), ("10♥", "10H"),
])
def test_parse_accepts_common_forms(text: str, expected: str) -> None:
    assert str(card(text)) == expected


@pytest.mark.parametrize("text", ["", "Q", "1H", "11S", "QX", "10", "QSS", "S Q", "0C"])
def test_parse_rejects_what_is_not_a_card(text: str) -> None:
    with pytest.raises(InvalidCardError, match="not a card"):
        Card.parse(text)


def test_non_text_is_rejected() -> None:
    with pytest.raises(InvalidCardError):
        Card.parse(12)  # type: ignore[arg-type]
    with pytest.raises(InvalidCardError):
        Card(52)


def test_rank_and_suit() -> None:
    qs = card("QS")
    assert qs.suit is Suit.SPADES and qs.rank == 10 and qs.points == 13
    assert card("AH").points == 1 and card("AC").points == 0
    assert card("AS").rank == 12 and card("2D").rank == 0


def test_cards_are_ordered_hashable_and_compact() -> None:
    assert card("2C") < card("AC") < card("2D")
    assert len({card("QS"), Card.parse("qs")}) == 1
    assert isinstance(card("QS"), int)


def test_masks_round_trip() -> None:
    some = [card(t) for t in ("AH", "2C", "QS", "10D")]
    assert cards_of(mask_of(some)) == tuple(sorted(some))
    assert points_of(mask_of(some)) == 14
    assert points_of(POINTS_MASK) == 26

import pytest

from engine import (
    CardsExchanged,
    Game,
    IllegalActionError,
    InvalidActionError,
    PassCards,
    PassChosen,
    PassDirection,
    Phase,
    Reason,
    Rules,
    card,
    pass_direction_for,
    player_view,
    public_view,
)
from engine.cards import CARDS, mask_of
from tests.helpers.games import fingerprint

L, R, A, H = PassDirection.LEFT, PassDirection.RIGHT, PassDirection.ACROSS, PassDirection.HOLD


@pytest.mark.parametrize(("players", "size", "removed"), [
    (3, 17, {"2D"}), (4, 13, set()), (5, 10, {"2D", "2C"})])
def test_deal_sizes_and_removed_cards(players: int, size: int, removed: set[str]) -> None:
    for seed in range(20):
        game = Game(Rules(players=players), seed)
        assert [h.bit_count() for h in game.hands] == [size] * players
        union = 0
        for h in game.hands:
            assert not union & h
            union |= h
        assert {str(c) for c in CARDS if not union >> c & 1} == removed


def test_deal_is_reproducible_from_the_seed() -> None:
    assert Game(Rules(), 7).hands == Game(Rules(), 7).hands
    assert Game(Rules(), "table-1").hands == Game(Rules(), "table-1").hands
    assert Game(Rules(), 7).hands != Game(Rules(), 8).hands


@pytest.mark.parametrize(("players", "cycle"), [
    (4, [L, R, A, H, L, R, A, H]), (3, [L, R, H, L, R, H]), (5, [L, R, H, L, R, H])])
def test_pass_direction_cycles_by_hand_number(players: int, cycle: list[PassDirection]) -> None:
    assert [pass_direction_for(players, h) for h in range(len(cycle))] == cycle


@pytest.mark.parametrize(("players", "hand", "offset"), [
    (4, 0, 1), (4, 1, -1), (4, 2, 2), (3, 0, 1), (3, 1, -1), (5, 0, 1), (5, 1, -1)])
def test_passes_go_to_the_right_seat(players: int, hand: int, offset: int) -> None:
    game = Game(Rules(players=players, max_hands=0), 3)
    while game.hand_number < hand:  # play earlier hands automatically
        game.apply(game.auto_action(game.to_act()[0]))
    assert game.phase is Phase.PASSING
    chosen = {s: tuple(game.legal_cards(s)[:3]) for s in range(players)}
    before = list(game.hands)
    for s in range(players):
        game.apply(PassCards(s, chosen[s]))
    for s in range(players):
        giver = (s - offset) % players
        got = mask_of(chosen[giver])
        assert game.received[s] == got
        assert game.hands[s] == (before[s] & ~mask_of(chosen[s])) | got
        assert player_view(game, s).received == tuple(sorted(chosen[giver]))


def test_no_card_moves_until_everyone_has_chosen() -> None:
    game = Game(Rules(), 1)
    before = list(game.hands)
    first = tuple(game.legal_cards(0)[:3])
    events = game.apply(PassCards(0, first))
    assert events == [PassChosen(0, False)]
    assert game.hands == before and game.received == [0, 0, 0, 0]
    assert game.phase is Phase.PASSING and game.to_act() == (1, 2, 3)
    # Who has chosen is public; what they chose is not.
    spectator = public_view(game)
    assert spectator.has_passed == (True, False, False, False)
    assert spectator.pass_choice == () and spectator.hand == ()
    assert player_view(game, 1).pass_choice == ()
    assert player_view(game, 0).pass_choice == tuple(sorted(first))
    for s in (1, 2, 3):
        events = game.apply(PassCards(s, tuple(game.legal_cards(s)[:3])))
    assert events[-1] == CardsExchanged(0, L)
    assert game.phase is Phase.PLAYING


def test_a_pass_is_final() -> None:
    game = Game(Rules(), 1)
    game.apply(PassCards(0, tuple(game.legal_cards(0)[:3])))
    before = fingerprint(game)
    with pytest.raises(IllegalActionError) as err:
        game.apply(PassCards(0, tuple(game.hand(0)[3:6])))
    assert err.value.reason is Reason.ALREADY_PASSED
    assert fingerprint(game) == before


@pytest.mark.parametrize("count", [0, 2, 4])
def test_pass_needs_three_cards(count: int) -> None:
    game = Game(Rules(), 1)
    before = fingerprint(game)
    with pytest.raises(InvalidActionError) as err:
        game.apply(PassCards(0, tuple(game.hand(0)[:count])))
    assert err.value.reason is Reason.PASS_NEEDS_THREE_CARDS
    hand = game.hand(0)
    with pytest.raises(InvalidActionError):
        game.apply(PassCards(0, (hand[0], hand[0], hand[1])))
    assert fingerprint(game) == before


def test_pass_only_from_your_hand() -> None:
    game = Game(Rules(), 1)
    other = game.hand(1)
    before = fingerprint(game)
    with pytest.raises(IllegalActionError) as err:
        game.apply(PassCards(0, (*game.hand(0)[:2], other[0])))
    assert err.value.reason is Reason.CARD_NOT_IN_HAND
    assert fingerprint(game) == before


def test_no_passing_on_a_hold_hand() -> None:
    game = Game(Rules(max_hands=0), 2)
    while game.hand_number < 3:
        game.apply(game.auto_action(game.to_act()[0]))
    assert game.pass_direction is H and game.phase is Phase.PLAYING
    with pytest.raises(IllegalActionError) as err:
        game.apply(PassCards(0, tuple(game.hand(0)[:3])))
    assert err.value.reason is Reason.WRONG_PHASE


def test_bad_seat_is_malformed() -> None:
    game = Game(Rules(players=3), 1)
    for seat in (-1, 3, "0", True):
        with pytest.raises(InvalidActionError) as err:
            game.apply(PassCards(seat, tuple(game.hand(0)[:3])))  # type: ignore[arg-type]
        assert err.value.reason is Reason.INVALID_SEAT


@pytest.mark.parametrize(("hand", "expected"), [
    ("QS AS KS 2H 3C 4C 5C 6C 7C 8C 9C 10C JC", ["QS", "AS", "KS"]),
    ("AS 2H 9H 3C 4C 5C 6C 7C 8C 9C 10C JC QC", ["AS", "9H", "2H"]),
    ("KS 2S 3S 4D 5D 6D 7C 8C 9C 10C JC QC AH", ["KS", "AH", "QC"]),
    ("2S 3S 4S 5S 6S 7S 8S 9S 10S JS AD AC 2C", ["AD", "AC", "JS"]),
    ("10S 10D 10C 2C 3C 4C 5C 6C 7C 8C 9C 2D 3D", ["10S", "10D", "10C"]),
])
def test_pass_timeout_choice(hand: str, expected: list[str]) -> None:
    from engine import auto_pass

    mask = mask_of(card(t) for t in hand.split())
    assert [str(c) for c in auto_pass(mask)] == expected

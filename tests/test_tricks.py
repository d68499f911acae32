import pytest

from engine import (
    CardPlayed,
    Game,
    IllegalActionError,
    PlayCard,
    Reason,
    Rules,
    TrickWon,
    auto_play,
    card,
)
from engine.cards import mask_of
from tests.helpers.games import fingerprint, rig

# Four hands with 13 cards each covering the deck. Seat 0 holds 2C.
HANDS_4 = [
    "2C 3C 4C 5C 2D 3D 4D 5D 2S 3S 4S 5S 2H",
    "6C 7C 8C 9C 6D 7D 8D 9D 6S 7S 8S 9S 3H",
    "10C JC QC KC 10D JD QD KD 10S JS QS KS 4H",
    "AC AD AS 5H 6H 7H 8H 9H 10H JH QH KH AH",
]


def refused(game: Game, seat: int, text: str) -> Reason:
    before = fingerprint(game)
    with pytest.raises(IllegalActionError) as err:
        game.apply(PlayCard(seat, card(text)))
    assert fingerprint(game) == before, "a refused action changed the state"
    return err.value.reason


def play(game: Game, *texts: str) -> list[object]:
    events: list[object] = []
    for t in texts:
        events += game.apply(PlayCard(game.turn, card(t)))
    return events


@pytest.mark.parametrize(("players", "opening"), [(3, "2C"), (4, "2C"), (5, "3C")])
def test_holder_of_the_opening_card_leads_it(players: int, opening: str) -> None:
    for seed in range(10):
        game = rig_auto(players, seed)
        assert game.hands[game.turn] >> card(opening) & 1
        assert game.legal_cards(game.turn) == (card(opening),)
        other = next(c for c in game.hand(game.turn) if c != card(opening))
        assert refused(game, game.turn, str(other)) is Reason.MUST_LEAD_OPENING_CARD


def rig_auto(players: int, seed: int) -> Game:
    game = Game(Rules(players=players), seed)
    while game.phase.value == "PASSING":
        game.apply(game.auto_action(game.to_act()[0]))
    return game


def test_must_follow_suit() -> None:
    game = rig(Game(Rules(), 1), HANDS_4)
    play(game, "2C")
    assert game.turn == 1 and set(game.legal_cards(1)) == {card(t) for t in "6C 7C 8C 9C".split()}
    assert refused(game, 1, "6D") is Reason.MUST_FOLLOW_SUIT


def test_only_the_player_to_act_may_play() -> None:
    game = rig(Game(Rules(), 1), HANDS_4)
    assert refused(game, 1, "6C") is Reason.NOT_YOUR_TURN
    assert refused(game, 0, "6C") is Reason.CARD_NOT_IN_HAND


def test_highest_of_the_suit_led_wins_and_leads_next() -> None:
    game = rig(Game(Rules(), 1), HANDS_4)
    events = play(game, "2C", "9C", "KC", "AC")
    assert events[-1] == TrickWon(0, 3, 0, (card("2C"), card("9C"), card("KC"), card("AC")), 0)
    assert game.turn == 3 and game.taken == [0, 0, 0, 0]


def test_off_suit_cards_never_win() -> None:
    hands = ["2C 3C 4C 5C 2D 3D 4D 5D 2S 3S 4S 5S 2H",
             "AC 7C 8C 9C 6D 7D 8D 9D 6S 7S 8S 9S 3H",
             "10C JC QC KC 10D JD QD KD 10S JS QS KS 4H",
             "6C AD AS 5H 6H 7H 8H 9H 10H JH QH KH AH"]
    game = rig(Game(Rules(), 1), hands)
    play(game, "2C", "AC", "10C", "6C")  # seat 1 wins with AC
    events = play(game, "6D", "10D", "AD", "2D")  # seat 1 leads D, seat 3 AD wins
    assert isinstance(events[-1], TrickWon) and events[-1].winner == 3


def test_first_trick_void_player_may_not_shed_points() -> None:
    hands = ["2C 3C 4C 5C 6C 7C 8C 9C 10C JC QC KC AC",
             "2D 3D 4D 5D 6D 7D 8D 9D 10D JD QD KD 2H",
             "2S 3S 4S 5S 6S 7S 8S 9S 10S JS QS KS 3H",
             "AD AS 4H 5H 6H 7H 8H 9H 10H JH QH KH AH"]
    game = rig(Game(Rules(), 1), hands)
    play(game, "2C")
    assert refused(game, 1, "2H") is Reason.NO_POINTS_ON_FIRST_TRICK
    play(game, "2D")
    assert refused(game, 2, "QS") is Reason.NO_POINTS_ON_FIRST_TRICK
    assert card("QS") not in game.legal_cards(2)
    play(game, "KS")
    assert set(game.legal_cards(3)) == {card("AD"), card("AS")}


def test_first_trick_points_allowed_when_the_hand_holds_nothing_else() -> None:
    hands = ["2C 3C 4C 5C 6C 7C 8C 9C 10C JC QC KC AC",
             "2D 3D 4D 5D 6D 7D 8D 9D 10D JD QD KD AD",
             "2S 3S 4S 5S 6S 7S 8S 9S 10S JS KS AS 2H",
             "QS 3H 4H 5H 6H 7H 8H 9H 10H JH QH KH AH"]
    game = rig(Game(Rules(), 1), hands)
    play(game, "2C", "2D", "2S")
    assert set(game.legal_cards(3)) == {card(t) for t in hands[3].split()}
    events = play(game, "QS")
    assert isinstance(events[-1], TrickWon) and events[-1].points == 13
    assert game.taken[0] == 13


def test_points_on_first_trick_option() -> None:
    hands = ["2C 3C 4C 5C 6C 7C 8C 9C 10C JC QC KC AC",
             "2D 3D 4D 5D 6D 7D 8D 9D 10D JD QD KD 2H",
             "2S 3S 4S 5S 6S 7S 8S 9S 10S JS QS KS 3H",
             "AD AS 4H 5H 6H 7H 8H 9H 10H JH QH KH AH"]
    game = rig(Game(Rules(points_on_first_trick=True), 1), hands)
    play(game, "2C")
    assert card("2H") in game.legal_cards(1)
    play(game, "2H", "QS")
    assert game.turn == 3


def test_hearts_may_not_be_led_until_broken() -> None:
    game = rig(Game(Rules(), 1), HANDS_4)
    play(game, "2C", "6C", "10C", "AC")  # seat 3 wins and leads
    assert game.turn == 3 and not game.hearts_broken
    assert set(game.legal_cards(3)) == {card("AD"), card("AS")}
    assert refused(game, 3, "5H") is Reason.HEARTS_NOT_BROKEN
    play(game, "AD", "2D", "6D", "10D")  # seat 3 wins again
    play(game, "AS", "2S", "6S", "10S")  # and again; now holds only hearts
    assert set(game.legal_cards(3)) == {card(t) for t in "5H 6H 7H 8H 9H 10H JH QH KH AH".split()}
    play(game, "5H")  # leading hearts from a hand of only hearts
    assert game.hearts_broken


def test_a_heart_discard_breaks_hearts_for_later_leads() -> None:
    hands = ["2C 3C 4C 5C 2D 3D 4D 5D 2S 3S 4S 5S 2H",
             "6C 7C 8C 9C 6D 7D 8D 9D 6S 7S 8S 9S 3H",
             "10C JC QC KC AC 10D JD QD KD 10S JS KS 4H",
             "AD AS QS 5H 6H 7H 8H 9H 10H JH QH KH AH"]
    game = rig(Game(Rules(), 1), hands)
    play(game, "2C", "6C", "AC", "AD")  # seat 2 wins the first trick
    assert refused(game, 2, "4H") is Reason.HEARTS_NOT_BROKEN
    play(game, "10D", "AH")  # seat 3, void in diamonds, discards a heart
    assert game.hearts_broken
    play(game, "2D", "6D")  # seat 2's 10D wins
    assert game.turn == 2 and card("4H") in game.legal_cards(2)
    play(game, "4H")


def test_queen_of_spades_does_not_break_hearts_by_default() -> None:
    for breaks in (False, True):
        hands = ["2C 3C 4C 5C 2D 3D 4D 5D 2S 3S 4S 5S 2H",
                 "6C 7C 8C 9C 6D 7D 8D 9D 6S 7S 8S 9S 3H",
                 "10C JC QC KC AC 10D JD QD KD 10S JS KS 4H",
                 "AD AS QS 5H 6H 7H 8H 9H 10H JH QH KH AH"]
        game = rig(Game(Rules(queen_breaks_hearts=breaks), 1), hands)
        play(game, "2C", "6C", "AC", "AD")  # seat 2 wins, leads diamonds
        play(game, "10D", "QS")  # seat 3 is void in diamonds and drops the queen
        assert game.hearts_broken is breaks


def test_spades_may_be_led_after_the_first_trick() -> None:
    game = rig(Game(Rules(), 1), HANDS_4)
    play(game, "2C", "6C", "10C", "AC")  # seat 3 wins
    assert card("AS") in game.legal_cards(3)
    play(game, "AS")


@pytest.mark.parametrize(("legal", "expected"), [
    ("3C 5D QS 2H", "3C"),  # lowest card without points
    ("QS 2H 3H", "2H"),  # all have points: the lowest
    ("4D 4C 4S", "4C"),  # rank ties: clubs, diamonds, spades, hearts
    ("4D 4S", "4D"),
    ("KS QS 2H", "KS"),
    ("5H 5S", "5S"),
])
def test_play_timeout_choice(legal: str, expected: str) -> None:
    assert str(auto_play(mask_of(card(t) for t in legal.split()))) == expected


def test_auto_play_is_always_legal_and_marked() -> None:
    game = rig(Game(Rules(), 1), HANDS_4)
    action = game.auto_action(game.turn)
    assert action == PlayCard(0, card("2C"))
    assert game.apply(action, is_automatic=True)[0] == CardPlayed(0, card("2C"), True)

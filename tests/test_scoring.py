import pytest

from engine import (
    ChooseMoon,
    Game,
    GameEndReason,
    GameOver,
    HandScored,
    IllegalActionError,
    Leave,
    MoonChoice,
    MoonRule,
    MoonShot,
    Phase,
    PlayerLeft,
    Reason,
    Rules,
    Standing,
    compute_standings,
)
from tests.helpers.games import fingerprint, play_auto, rig

# Seat 0 holds every club: it leads 2C and wins all 13 tricks, so it takes all 26 points.
MOON_4 = [
    "2C 3C 4C 5C 6C 7C 8C 9C 10C JC QC KC AC",
    "2D 3D 4D 5D 6D 7D 8D 9D 10D JD QD KD AD",
    "2S 3S 4S 5S 6S 7S 8S 9S 10S JS QS KS AS",
    "2H 3H 4H 5H 6H 7H 8H 9H 10H JH QH KH AH",
]


def finish_hand(game: Game) -> list[object]:
    hand = game.hand_number
    return play_auto(game, until=lambda g: g.hand_number != hand or g.phase is Phase.MOON_CHOICE)


def scored(events: list[object]) -> HandScored:
    return next(e for e in events if isinstance(e, HandScored))


@pytest.mark.parametrize("players", [3, 4, 5])
def test_each_hand_is_worth_26_points(players: int) -> None:
    for seed in range(30):
        game = Game(Rules(players=players, moon=MoonRule.DISABLED, max_hands=3), seed)
        events = play_auto(game)
        hands = [e for e in events if isinstance(e, HandScored)]
        assert len(hands) == 3
        assert all(sum(h.taken) == 26 == sum(h.points) for h in hands)


def test_moon_others_plus_26() -> None:
    game = rig(Game(Rules(moon=MoonRule.OTHERS_PLUS_26), 1), MOON_4)
    events = finish_hand(game)
    assert MoonShot(0, 0, False) in events
    hand = scored(events)
    assert hand.taken == (26, 0, 0, 0)
    assert hand.points == (0, 26, 26, 26) and hand.moon_shooter == 0
    assert game.totals == [0, 26, 26, 26]


def test_moon_disabled_counts_points_as_taken() -> None:
    game = rig(Game(Rules(moon=MoonRule.DISABLED), 1), MOON_4)
    hand = scored(finish_hand(game))
    assert hand.points == (26, 0, 0, 0) and hand.moon_shooter is None


def test_no_moon_unless_one_player_takes_all_26() -> None:
    near_misses = 0
    for seed in range(40):
        game = Game(Rules(moon=MoonRule.OTHERS_PLUS_26, max_hands=4), seed)
        for hand in (e for e in play_auto(game) if isinstance(e, HandScored)):
            if max(hand.taken) < 26:
                assert hand.points == hand.taken and hand.moon_shooter is None
                near_misses += max(hand.taken) >= 14  # took Q♠ and hearts, not all
    assert near_misses > 0


def shooter_choice_game(totals: list[int]) -> Game:
    game = rig(Game(Rules(moon=MoonRule.SHOOTER_CHOICE, max_hands=0, point_limit=500), 1), MOON_4)
    game.totals = list(totals)
    events = finish_hand(game)
    assert MoonShot(0, 0, True) in events
    assert game.phase is Phase.MOON_CHOICE and game.to_act() == (0,)
    return game


def test_shooter_choice_add_to_others() -> None:
    game = shooter_choice_game([40, 10, 20, 30])
    hand = scored(game.apply(ChooseMoon(0, MoonChoice.ADD_TO_OTHERS)))
    assert hand.points == (0, 26, 26, 26) and hand.moon_choice is MoonChoice.ADD_TO_OTHERS
    assert game.totals == [40, 36, 46, 56] and game.hand_number == 1


def test_shooter_choice_subtract_from_self() -> None:
    game = shooter_choice_game([40, 10, 20, 30])
    hand = scored(game.apply(ChooseMoon(0, MoonChoice.SUBTRACT_FROM_SELF)))
    assert hand.points == (-26, 0, 0, 0) and game.totals == [14, 10, 20, 30]


def test_shooter_choice_never_takes_a_total_below_zero() -> None:
    game = shooter_choice_game([10, 0, 0, 0])
    hand = scored(game.apply(ChooseMoon(0, MoonChoice.SUBTRACT_FROM_SELF)))
    assert hand.points == (-10, 0, 0, 0) and game.totals == [0, 0, 0, 0]


def test_only_the_shooter_chooses_and_only_when_pending() -> None:
    game = shooter_choice_game([0, 0, 0, 0])
    before = fingerprint(game)
    with pytest.raises(IllegalActionError) as err:
        game.apply(ChooseMoon(1, MoonChoice.ADD_TO_OTHERS))
    assert err.value.reason is Reason.NOT_THE_SHOOTER and fingerprint(game) == before
    other = Game(Rules(moon=MoonRule.SHOOTER_CHOICE), 1)
    with pytest.raises(IllegalActionError) as err:
        other.apply(ChooseMoon(0, MoonChoice.ADD_TO_OTHERS))
    assert err.value.reason is Reason.WRONG_PHASE


@pytest.mark.parametrize("totals", [[0, 0, 0, 0], [10, 0, 0, 0], [40, 10, 20, 30],
                                    [90, 0, 95, 99], [5, 60, 70, 80]])
def test_automatic_moon_choice_gives_the_better_place_tie_adds(totals: list[int]) -> None:
    game = shooter_choice_game(totals)
    places = {}
    for choice in MoonChoice:
        trial = shooter_choice_game(totals)
        trial.apply(ChooseMoon(0, choice))
        places[choice] = next(r.place for r in compute_standings(trial.totals, []) if r.seat == 0)
    best = (MoonChoice.SUBTRACT_FROM_SELF
            if places[MoonChoice.SUBTRACT_FROM_SELF] < places[MoonChoice.ADD_TO_OTHERS]
            else MoonChoice.ADD_TO_OTHERS)
    assert game.auto_action(0) == ChooseMoon(0, best)


def test_game_ends_on_the_hand_limit() -> None:
    game = Game(Rules(max_hands=2, point_limit=1000), 5)
    events = play_auto(game)
    assert len(game.hands_played) == 2
    over = events[-1]
    assert isinstance(over, GameOver) and over.reason is GameEndReason.HAND_LIMIT


def test_game_ends_when_a_total_reaches_the_point_limit() -> None:
    game = Game(Rules(max_hands=0, point_limit=30), 5)
    events = play_auto(game)
    assert max(game.totals) >= 30
    assert all(max(h.totals) < 30 for h in game.hands_played[:-1])
    assert isinstance(events[-1], GameOver) and events[-1].reason is GameEndReason.POINT_LIMIT


def test_a_total_exactly_at_the_limit_ends_the_game() -> None:
    game = rig(Game(Rules(moon=MoonRule.DISABLED, max_hands=0, point_limit=26), 1), MOON_4)
    finish_hand(game)
    assert game.is_over and game.totals == [26, 0, 0, 0]


def test_hand_limit_and_point_limit_in_the_same_hand_end_the_game_once() -> None:
    game = rig(Game(Rules(max_hands=1, point_limit=26, moon=MoonRule.DISABLED), 1), MOON_4)
    events = finish_hand(game)
    assert sum(isinstance(e, GameOver) for e in events) == 1
    assert game.is_over and len(game.hands_played) == 1
    assert game.standings[-1] == Standing(0, 4, 26, False)


def test_tied_totals_share_a_place() -> None:
    assert [(r.seat, r.place) for r in compute_standings([10, 5, 10, 20], [])] == [
        (1, 1), (0, 2), (2, 2), (3, 4)]
    assert [r.place for r in compute_standings([0, 0, 0, 0, 0], [])] == [1, 1, 1, 1, 1]
    assert [(r.seat, r.place) for r in compute_standings([3, 3, 9], [])] == [(0, 1), (1, 1), (2, 3)]


def test_leavers_are_placed_behind_everyone_first_to_leave_last() -> None:
    rows = compute_standings([50, 0, 10, 90, 20], [1, 3])
    assert [(r.seat, r.place, r.has_left) for r in rows] == [
        (2, 1, False), (4, 2, False), (0, 3, False), (3, 4, True), (1, 5, True)]


def test_two_leavers_are_played_for_and_ranked_last() -> None:
    game = Game(Rules(max_hands=2), 9)
    events = game.apply(Leave(2))
    assert events[0] == PlayerLeft(2, 0, 0)
    assert game.has_left[2] and game.passes[2] is not None  # passed for it at once
    with pytest.raises(IllegalActionError) as err:
        game.apply(Leave(2))
    assert err.value.reason is Reason.SEAT_HAS_LEFT
    game.apply(Leave(0))
    assert not game.is_over
    assert 0 not in game.to_act() and 2 not in game.to_act()
    play_auto(game)
    assert [(r.seat, r.place) for r in game.standings][-2:] == [(0, 3), (2, 4)]
    assert game.standings[0].seat in (1, 3) and not game.standings[0].has_left


def test_leaver_plays_automatically_at_once() -> None:
    game = rig(Game(Rules(), 1), MOON_4)
    assert game.turn == 0
    events = game.apply(Leave(0))
    plays = [e for e in events if type(e).__name__ == "CardPlayed"]
    assert plays and plays[0].seat == 0 and plays[0].is_automatic and game.turn == 1


def test_last_remaining_player_wins_at_once() -> None:
    game = Game(Rules(players=3), 4)
    game.apply(Leave(1))
    events = game.apply(Leave(0))
    over = events[-1]
    assert isinstance(over, GameOver) and over.reason is GameEndReason.LAST_PLAYER
    assert [(r.seat, r.place) for r in over.standings] == [(2, 1), (0, 2), (1, 3)]
    with pytest.raises(IllegalActionError) as err:
        game.apply(Leave(2))
    assert err.value.reason is Reason.WRONG_PHASE


def test_a_shooter_who_left_chooses_automatically() -> None:
    game = rig(Game(Rules(moon=MoonRule.SHOOTER_CHOICE, max_hands=0), 1), MOON_4)
    game.apply(Leave(0))
    events = finish_hand(game) if not game.hands_played else []
    assert game.hands_played[0].moon_choice is MoonChoice.ADD_TO_OTHERS
    assert events == [] or game.phase is not Phase.MOON_CHOICE

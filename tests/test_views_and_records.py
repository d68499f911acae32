import json
import random

import pytest

from engine import (
    Game,
    Leave,
    MoonRule,
    PassCards,
    Phase,
    RecordError,
    Rules,
    dumps,
    player_view,
    public_view,
    replay,
    replay_actions,
    result_of,
    to_record,
)
from engine.cards import cards_of
from engine.record import deals_of
from tests.helpers.games import play_random, rig


def test_player_view_holds_only_its_own_cards() -> None:
    game = Game(Rules(), 11)
    for seat in range(4):
        view = player_view(game, seat)
        assert view.hand == cards_of(game.hands[seat])
        assert view.legal_cards == view.hand  # passing: any three of the hand
        assert view.card_counts == (13, 13, 13, 13)
    spectator = public_view(game)
    assert spectator.seat is None and spectator.hand == spectator.legal_cards == ()


def test_legal_cards_only_for_the_seat_that_must_act() -> None:
    game = rig(Game(Rules(), 11), [
        "2C 3C 4C 5C 2D 3D 4D 5D 2S 3S 4S 5S 2H",
        "6C 7C 8C 9C 6D 7D 8D 9D 6S 7S 8S 9S 3H",
        "10C JC QC KC 10D JD QD KD 10S JS QS KS 4H",
        "AC AD AS 5H 6H 7H 8H 9H 10H JH QH KH AH"])
    assert player_view(game, 0).legal_cards == (game.opening_card,)
    assert player_view(game, 0).must_act
    assert all(player_view(game, s).legal_cards == () for s in (1, 2, 3))
    game.play(0, game.opening_card)
    view = public_view(game)
    assert view.trick == ((0, game.opening_card),) and view.to_act == (1,)
    assert view.card_counts == (12, 13, 13, 13)


def test_received_cards_are_private() -> None:
    game = Game(Rules(), 3)
    for s in range(4):
        game.apply(PassCards(s, game.legal_cards(s)[:3]))
    assert game.phase is Phase.PLAYING
    for s in range(4):
        assert len(player_view(game, s).received) == 3
    assert public_view(game).received == ()


@pytest.mark.parametrize("players", [3, 4, 5])
def test_a_record_replays_to_the_same_result(players: int) -> None:
    rng = random.Random(players)
    game = Game(Rules.preset("classic", players=players, point_limit=60), f"seed-{players}")
    for _ in range(40):
        game.apply(game.auto_action(game.to_act()[0]))
    game.apply(Leave(1))
    play_random(game, rng)
    assert game.is_over
    text = dumps(game)
    again = replay(text)
    assert result_of(again) == result_of(game)
    assert again.standings == game.standings and again.hands_played == game.hands_played
    assert replay_actions(game.rules, game.seed, game.actions).totals == game.totals
    assert json.loads(text)["result"]["leavers"][0]["seat"] == 1


@pytest.mark.parametrize("players", [3, 4, 5])
def test_a_records_deals_are_each_hands_cards_as_dealt(players: int) -> None:
    """The replay's starting hands: the seed replayed gives each seat's cards at each deal,
    as the live game held them before the pass (a leaver's hands too)."""
    rng = random.Random(100 + players)
    game = Game(Rules.preset("classic", players=players, point_limit=50), f"deal-{players}")

    def held(seat: int) -> list[str]:  # the hand, and what a leaver played of it at once
        mask = game.hands[seat] | sum(1 << c for c, s in zip(game.trick_cards, game.trick_seats)
                                      if s == seat)
        return [c.text for c in cards_of(mask)]

    seen = [[held(s) for s in range(players)]]
    while not game.is_over:
        if len(game.actions) == 30:
            game.apply(Leave(0))
        else:
            play_random(game, rng, max_actions=1)
        if game.hand_number >= len(seen) and not game.is_over:
            seen.append([held(s) for s in range(players)])
    deals = deals_of(game.rules, game.seed, game.actions)
    assert len(seen) >= 2 and deals == seen
    for deal in deals:
        cards = [c for hand in deal for c in hand]
        assert len(cards) == len(set(cards)) == 52 // players * players


def test_a_tampered_record_is_refused() -> None:
    game = Game(Rules(moon=MoonRule.DISABLED, max_hands=1), 5)
    play_random(game, random.Random(5))
    record = to_record(game)
    record["result"]["totals"][0] += 1
    with pytest.raises(RecordError, match="differs"):
        replay(record)
    record = to_record(game)
    record["actions"][5] = record["actions"][4]
    with pytest.raises(RecordError, match="does not replay"):
        replay(record)
    with pytest.raises(RecordError):
        replay("{not json")

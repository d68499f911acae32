"""Bisca bots (ai/bisca.py): every policy plays only legal cards and decides the same card
from the same view, seed and budget; the greedy rule as written. Strength is measured by
bench/bisca_bots.py, not here."""

from __future__ import annotations

import random

import pytest

from ai.bisca import POLICIES, decide, greedy_card, known_voids
from ai.policies import Budget
from engine.bisca import (
    PRESETS,
    BiscaRules,
    Card,
    FollowSuit,
    Game,
    card,
    player_view,
    public_view,
)
from engine.bisca.cards import mask_of

SMALL = Budget(playouts=6)


def cards(text: str) -> list[Card]:
    return [card(t) for t in text.split()]


@pytest.mark.parametrize("preset", ["bisca3", "bisca9", "pairs", "three", "six"])
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_every_policy_plays_whole_games_legally(preset: str, policy: str) -> None:
    game = Game(PRESETS[preset].replace(max_hands=1), seed=f"{preset}/{policy}")
    while not game.is_over:
        view = player_view(game, game.turn)
        action = decide(view, policy, seed=7, budget=SMALL)
        assert action.seat == game.turn and action.card in view.legal_cards
        game.apply(action)  # raises if illegal
    assert sum(game.hands_played[0].points) == 120


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_the_same_view_seed_and_budget_give_the_same_card(policy: str) -> None:
    rng = random.Random(5)
    for seed in range(6):
        game = Game(PRESETS["bisca7"], seed)
        for _ in range(rng.randrange(0, 30)):  # somewhere into the hand
            game.play(game.turn, rng.choice(game.legal_cards(game.turn)))
        view = player_view(game, game.turn)
        again = player_view(Game(PRESETS["bisca7"], seed), 0)  # a different view
        first = decide(view, policy, seed=3, budget=SMALL)
        assert decide(view, policy, seed=3, budget=SMALL) == first
        assert again is not view


def test_mc_changes_its_mind_only_with_the_seed() -> None:
    game = Game(PRESETS["pairs"], 2)
    view = player_view(game, game.turn)
    picks = {decide(view, "mc", seed=s, budget=Budget(playouts=4)).card for s in range(12)}
    assert picks <= set(view.legal_cards)
    assert len({decide(view, "mc", seed=1, budget=Budget(playouts=4)) for _ in range(3)}) == 1


def test_nothing_to_decide_and_unknown_policies_are_refused() -> None:
    game = Game(PRESETS["bisca3"], 1)
    with pytest.raises(ValueError, match="unknown Bisca policy 'duck'"):
        decide(player_view(game, 0), "duck")
    with pytest.raises(ValueError, match="nothing to decide"):
        decide(player_view(game, 1), "greedy")
    with pytest.raises(ValueError, match="nothing to decide"):
        decide(public_view(game), "greedy")


RULES_2 = BiscaRules()
RULES_PAIRS = PRESETS["pairs"]
HEARTS = 3


@pytest.mark.parametrize("rules, hand, trick, seat, expected", [
    # Leading: the card that gives away least.
    (RULES_2, "AS 2H 6C", [], 0, "6C"),
    # An opponent's K: taken with the ace of its suit.
    (RULES_2, "AS 7S 2H", [(0, "KS")], 1, "AS"),
    # An opponent's 10-point card of another suit: trumped with the lowest trump.
    (RULES_2, "2H 5H 3C", [(0, "7D")], 1, "2H"),
    # A pointless card: not worth a trump.
    (RULES_2, "2H 3C QC", [(0, "4D")], 1, "3C"),
    # The partner wins and this seat plays last: its most valuable card that is not a trump.
    (RULES_PAIRS, "AC KH 2S", [(0, "3D"), (1, "AD"), (2, "2D")], 3, "AC"),
    # The partner wins but an opponent plays after: the card that gives away least.
    (RULES_PAIRS, "AC KH 2S", [(0, "AD"), (1, "4D")], 2, "2S"),
    # An opponent's ace of another suit, with partners: trumped (11 points on the table).
    (RULES_PAIRS, "AC KH 2S", [(0, "4D"), (1, "AD")], 2, "KH"),
])
def test_the_greedy_rule_as_written(rules: BiscaRules, hand: str,
                                    trick: list[tuple[int, str]], seat: int,
                                    expected: str) -> None:
    chosen = greedy_card(rules, mask_of(cards(hand)), [s for s, _ in trick],
                         [int(card(c)) for _, c in trick], HEARTS, False, seat)
    assert chosen == card(expected)


def test_mc_knows_a_seat_that_did_not_follow_with_the_stock_empty_lacks_the_suit() -> None:
    rules = PRESETS["four"].replace(hand_size=9, follow_suit=FollowSuit.STOCK_EMPTY)
    found = 0
    for seed in range(40):
        game, rng = Game(rules, seed), random.Random(seed)
        while not game.is_over and game.hand_number == 0:
            if game.trick_cards and not game.stock:
                led = game.trick_cards[0] // 10
                seat = game.turn
                if not game.hands[seat] & (0x3FF << 10 * led):
                    game.play(seat, rng.choice(game.legal_cards(seat)))
                    if game.trick_cards:  # the trick goes on: the void shows in the trick
                        view = player_view(game, game.turn)
                        assert known_voids(view)[seat] >> led & 1
                        found += 1
                    continue
            game.play(game.turn, rng.choice(game.legal_cards(game.turn)))
        view = player_view(Game(rules, seed), 0)
        assert known_voids(view) == [0, 0, 0, 0]  # nothing shown yet at the start
    assert found > 10

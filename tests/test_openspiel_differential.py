"""Differential test: the engine and OpenSpiel's ``hearts`` in lock-step on 200 hands (1,200 in
the thorough profile, tests/helpers/budget.py).

Same deal (fed through OpenSpiel's chance actions), same pass direction, same random
passes and plays; at every decision both must offer the same legal cards, and each hand
must score the same points. Options matched: 4 players, Q♠ does not break hearts, no points
on the first trick, moon = others +26 (OpenSpiel's only moon rule).
"""

from __future__ import annotations

import random

import pyspiel  # type: ignore[import-not-found]

from engine import Game, HandScored, MoonRule, PassCards, PassDirection, Phase, PlayCard, Rules
from engine.cards import CARDS, Card
from tests.helpers.budget import budget

HANDS = budget(200, 1200)  # hands compared; 1,200 in the thorough profile
# OpenSpiel cards are rank * 4 + suit with suits C, D, H, S; ours are suit * 13 + rank with
# suits C, D, S, H.
_OS_SUIT = {0: 0, 1: 1, 2: 3, 3: 2}
TO_OS = {c: c.rank * 4 + _OS_SUIT[c.suit] for c in CARDS}
FROM_OS = {v: k for k, v in TO_OS.items()}
OS_DIRECTION = {PassDirection.HOLD: 0, PassDirection.LEFT: 1, PassDirection.ACROSS: 2,
                PassDirection.RIGHT: 3}


def legal_os(state: pyspiel.State) -> set[Card]:
    return {FROM_OS[a] for a in state.legal_actions()}


def test_lock_step_with_openspiel() -> None:
    os_game = pyspiel.load_game("hearts", {"qs_breaks_hearts": False, "pass_cards": True,
                                           "no_pts_on_first_trick": True,
                                           "must_break_hearts": True})
    rules = Rules(max_hands=0, point_limit=10**9, moon=MoonRule.OTHERS_PLUS_26)
    rng = random.Random(2026)
    hands_compared = decisions = 0
    seed = 0
    while hands_compared < HANDS:
        game = Game(rules, seed)
        seed += 1
        for _ in range(25):
            state = os_game.new_initial_state()
            state.apply_action(OS_DIRECTION[game.pass_direction])
            dealt = [sorted(game.hand(s)) for s in range(4)]
            for k in range(52):  # OpenSpiel deals card k to player k % 4
                state.apply_action(TO_OS[dealt[k % 4][k // 4]])
            if game.phase is Phase.PASSING:
                chosen = {s: rng.sample(game.legal_cards(s), 3) for s in range(4)}
                for s in range(4):  # OpenSpiel passes seat by seat, one card at a time
                    for c in chosen[s]:
                        assert state.current_player() == s
                        assert legal_os(state) == set(game.legal_cards(s)) - set(
                            chosen[s][:chosen[s].index(c)])
                        state.apply_action(TO_OS[c])
                    game.apply(PassCards(s, tuple(chosen[s])))
            scored = None
            while not state.is_terminal():
                seat = game.turn
                assert state.current_player() == seat
                legal = game.legal_cards(seat)
                assert legal_os(state) == set(legal), f"hand {hands_compared}, seat {seat}"
                decisions += 1
                c = rng.choice(legal)
                state.apply_action(TO_OS[c])
                for event in game.apply(PlayCard(seat, c)):
                    if isinstance(event, HandScored):
                        scored = event
            assert scored is not None
            os_points = tuple(int(26 - r) for r in state.returns())
            assert scored.points == os_points, f"hand {hands_compared}"
            hands_compared += 1
    assert decisions >= HANDS * 52

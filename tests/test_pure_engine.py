"""The engine is compiled with mypyc at install (setup.py); its pure-Python source stays the
reference. Here: the compiled module is the one imported and the two agree move for move.
`make test` also runs the rule tests (``PURE_ENGINE_TESTS`` in the Makefile) and this file on
the pure modules (``COPAS_PURE_ENGINE=1``, see conftest.py)."""

from __future__ import annotations

import importlib.util
import os
import random
from types import ModuleType

import pytest

import ai.playout
import engine.game
from engine import MoonRule, Rules, dumps
from tests.helpers.games import ROOT, random_action

IS_PURE_RUN = os.environ.get("COPAS_PURE_ENGINE") == "1"


def pure_game_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("engine_pure_game", ROOT / "engine" / "game.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(IS_PURE_RUN, reason="this run imports the pure modules on purpose")
def test_the_installed_engine_is_compiled() -> None:
    """`pip install -e .` builds engine/game.py and ai/playout.py with mypyc; a silent
    fallback to pure Python (no C compiler) would show here, not as a slow benchmark."""
    for module in (engine.game, ai.playout):
        assert module.__file__ is not None
        assert not module.__file__.endswith(".py"), module.__file__


@pytest.mark.parametrize("players", [3, 4, 5])
def test_pure_and_compiled_games_agree_move_for_move(players: int) -> None:
    pure = pure_game_module()
    moons = [MoonRule.OTHERS_PLUS_26, MoonRule.SHOOTER_CHOICE, MoonRule.DISABLED]
    for seed in range(12):
        rules = Rules(players=players, max_hands=3, moon=moons[seed % 3],
                      queen_breaks_hearts=seed % 2 == 0, points_on_first_trick=seed % 4 == 1)
        compiled_game, pure_game = engine.game.Game(rules, seed), pure.Game(rules, seed)
        assert compiled_game.started_events == pure_game.started_events
        rng = random.Random(seed)
        while not compiled_game.is_over:
            for seat in range(players):
                assert compiled_game.legal_mask(seat) == pure_game.legal_mask(seat)
            action = random_action(compiled_game, rng)
            assert compiled_game.apply(action) == pure_game.apply(action)
            assert compiled_game.tricks == pure_game.tricks
        assert dumps(compiled_game) == dumps(pure_game)


def test_the_deal_is_the_standard_librarys_shuffle() -> None:
    """The engine inlines random.shuffle: the same permutation and the same generator state."""
    from engine.cards import CARDS

    for seed in range(300):
        ours, theirs = random.Random(seed), random.Random(seed)
        deck, expected = list(CARDS), list(CARDS)
        for _ in range(3):
            engine.game._shuffle(deck, ours)
            theirs.shuffle(expected)
            assert deck == expected
        assert ours.getstate() == theirs.getstate()

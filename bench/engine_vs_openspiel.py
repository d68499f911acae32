"""Random full hands per second (4 players, passing included): the Copas engine alone, and
the same work driven from Python through OpenSpiel's ``hearts`` in the same run.

Both sides deal with the same shuffle, pass three random cards and play random legal cards
chosen the same way, so the driver's own cost is equal; the last line is
``engine_vs_openspiel_ratio=<engine hands/s ÷ OpenSpiel hands/s>``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable

from engine import Game, Phase, Rules

RULES = Rules(players=4, max_hands=0, point_limit=10**9)  # hands never end the game
HANDS_PER_GAME = 50


def copas_hands(n_hands: int, seed: int) -> None:
    rand = random.Random(seed).random
    done = 0
    game_seed = seed
    while done < n_hands:
        game = Game(RULES, game_seed)
        game_seed += 1
        for _ in range(min(HANDS_PER_GAME, n_hands - done)):
            hand_number = game.hand_number
            while game.hand_number == hand_number:
                if game.phase is Phase.PLAYING:
                    seat = game.turn
                    legal = game.legal_cards(seat)
                    game.play(seat, legal[int(rand() * len(legal))])
                elif game.phase is Phase.PASSING:
                    for seat in game.to_act():
                        hand = list(game.hand(seat))
                        chosen = []
                        for _ in range(3):
                            chosen.append(hand.pop(int(rand() * len(hand))))
                        game.pass_cards(seat, chosen)
                else:  # a moon under SHOOTER_CHOICE never happens with OTHERS_PLUS_26
                    raise AssertionError(game.phase)
            done += 1


def openspiel_hands(n_hands: int, seed: int) -> None:
    import pyspiel  # type: ignore[import-not-found]

    game = pyspiel.load_game("hearts", {"qs_breaks_hearts": False})
    rng = random.Random(seed)
    rand = rng.random
    deck = list(range(52))
    for h in range(n_hands):
        state = game.new_initial_state()
        state.apply_action((1, 3, 2, 0)[h % 4])  # left, right, across, hold as Copas cycles
        rng.shuffle(deck)
        for c in deck:
            state.apply_action(c)
        passing = 12 if h % 4 != 3 else 0
        while passing:  # three random cards, drawn the way the Copas driver draws them
            hand = state.legal_actions()
            chosen = []
            for _ in range(3):
                chosen.append(hand.pop(int(rand() * len(hand))))
            for c in chosen:
                state.apply_action(c)
            passing -= 3
        while not state.is_terminal():
            legal = state.legal_actions()
            state.apply_action(legal[int(rand() * len(legal))])


def rate(fn: Callable[[int, int], None], n_hands: int, seed: int) -> float:
    start = time.perf_counter()
    fn(n_hands, seed)
    return n_hands / (time.perf_counter() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hands", type=int, default=3000, help="hands per round")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per side")
    args = parser.parse_args()
    ours, theirs = [], []
    for r in range(args.rounds):  # alternate so both sides see the same machine noise
        ours.append(rate(copas_hands, args.hands, r))
        theirs.append(rate(openspiel_hands, args.hands, r))
    copas, openspiel = statistics.median(ours), statistics.median(theirs)
    print(f"copas_engine_hands_per_s={copas:.0f}  (rounds: {', '.join(f'{x:.0f}' for x in ours)})")
    print(f"openspiel_hands_per_s={openspiel:.0f}  (rounds: "
          f"{', '.join(f'{x:.0f}' for x in theirs)})")
    print(f"engine_vs_openspiel_ratio={copas / openspiel:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

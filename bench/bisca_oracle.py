"""10,000 random Bisca games through the engine, every action checked against the independent
oracle (tests/helpers/bisca_oracle.py): every player count, hand size and option, with
timeouts, leavers and games ended by the table. Prints the games, actions and violations.

    .venv/bin/python bench/bisca_oracle.py [--games 10000] [--seed 41]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.helpers.bisca_differential import play_checked, random_rules
from tests.helpers.bisca_oracle import OracleViolation


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--games", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=41)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    kinds: Counter[str] = Counter()
    violations, actions, hands = 0, 0, 0
    started = time.perf_counter()
    for seed in range(args.games):
        rules = random_rules(rng)
        kinds[f"{rules.players}{'p' if rules.partnerships else ''}x{rules.hand_size}"] += 1
        try:
            game = play_checked(rules, seed, rng)
        except OracleViolation as exc:
            violations += 1
            print(f"violation in game {seed} ({rules}): {exc}")
            continue
        actions += len(game.actions)
        hands += len(game.hands_played)
    seconds = time.perf_counter() - started
    print(f"{args.games} games, {hands} hands scored, {actions} actions, "
          f"{violations} violations, {seconds:.1f} s")
    print("kinds (players[p = partnerships] x hand size):",
          ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    return 1 if violations else 0


if __name__ == "__main__":
    raise SystemExit(main())

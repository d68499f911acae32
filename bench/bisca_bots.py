"""Bisca bot strength on duplicate deals: ``mc`` against ``greedy`` (or ``random``). Each deal
is played twice, the bots swapping sides, so the cards cancel out; prints mc's share of the
hands won and its card-point margin per hand, each with a 95% confidence interval over deals,
and the time per mc decision.

    .venv/bin/python bench/bisca_bots.py [--deals 200] [--preset quick] [--playouts 100]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ai.bisca import decide
from ai.policies import Budget
from engine.bisca import BiscaRules, Game, player_view


def play(rules: BiscaRules, seed: int, mc_side: int, opponent: str, budget: Budget,
         clock: list[float]) -> tuple[float, int]:
    """One hand: (mc's win share 1 / 0.5 / 0, mc's side points minus the other side's)."""
    game = Game(rules, f"bisca-bots/{seed}")
    while not game.is_over:
        seat = game.turn
        view = player_view(game, seat)
        if rules.side_of(seat) == mc_side:
            started = time.perf_counter()
            action = decide(view, "mc", seed=seed, budget=budget)
            clock.append(time.perf_counter() - started)
        else:
            action = decide(view, opponent, seed=1)
        game.apply(action)
    hand = game.hands_played[0]
    mine, theirs = hand.side_points[mc_side], hand.side_points[1 - mc_side]
    share = 0.5 if hand.winner is None else float(hand.winner == mc_side)
    return share, mine - theirs


def interval(values: list[float]) -> str:
    mean = statistics.fmean(values)
    half = 1.96 * statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0
    return f"{mean:.3f} ± {half:.3f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--deals", type=int, default=200)
    parser.add_argument("--preset", default="quick",
                        help="a two-sided Bisca preset (2 players or partnerships)")
    parser.add_argument("--playouts", type=int, default=100)
    parser.add_argument("--opponent", default="greedy", choices=("greedy", "random"))
    args = parser.parse_args()
    rules = BiscaRules.preset(args.preset).replace(max_hands=1)
    if rules.sides != 2:
        parser.error("duplicate deals need two sides: 2 players or partnerships")
    budget = Budget(playouts=args.playouts)
    shares: list[float] = []
    margins: list[float] = []
    clock: list[float] = []
    for deal in range(args.deals):
        results = [play(rules, deal, side, args.opponent, budget, clock) for side in (0, 1)]
        shares.append(statistics.fmean(r[0] for r in results))
        margins.append(statistics.fmean(r[1] for r in results))
    print(f"{args.preset} ({rules.players} players, {rules.hand_size} cards), {args.deals} deals "
          f"x 2 seatings, mc ({args.playouts} playouts) vs {args.opponent}")
    print(f"  mc's share of hands won: {interval(shares)}")
    print(f"  mc's card-point margin per hand: {interval(margins)} (of 120)")
    print(f"  mc decision: mean {statistics.fmean(clock) * 1000:.1f} ms, "
          f"max {max(clock) * 1000:.1f} ms over {len(clock)} decisions")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

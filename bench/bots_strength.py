"""Bot strength through the engine: duplicate deals, points per hand with 95% intervals.

4 players, passing on, moon = others +26. A deal is a game seed; its first ``--hands`` hands
(left, right, across, hold) are played four times, the tested bot in each seat in turn and
the opponents in the other three, so every bot sees the same cards. A deal's figure is the
tested bot's mean points per hand over its four seats; the interval is 1.96 standard errors
over deals. Prints a table and machine-readable lines such as
``strong_vs_duck_points_per_hand=4.52 ci95=0.12`` (strong: ``--strong``, mc by default), then
the strong bot's median and p99 decision time (one core, ``--playouts`` deals per decision):
over every decision, and over those with a choice (passes, plays from two legal cards up).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time

from ai import Budget, decide, info_from_game
from engine import Game, MoonRule, Phase, Rules

RULES = Rules(players=4, max_hands=4, point_limit=10**9, moon=MoonRule.OTHERS_PLUS_26)


def play_deal(seed: int, tested: str, opponent: str, hands: int, budget: Budget,
              timings: list[float] | None) -> float:
    """The tested bot's mean points per hand over the four seats of one deal."""
    total = 0
    rules = RULES.replace(max_hands=hands)
    for seat in range(4):
        game = Game(rules, seed)
        policies = [tested if s == seat else opponent for s in range(4)]
        decisions = 0
        while not game.is_over:
            acting = game.to_act()[0]
            info = info_from_game(game, acting)
            start = time.perf_counter()
            action = decide(info, policies[acting], seed * 1000 + decisions, budget)
            if timings is not None and acting == seat:
                # Negative: a forced move (one legal card), for the "with a choice" figure.
                forced = game.phase is Phase.PLAYING and len(game.legal_cards(acting)) == 1
                spent = time.perf_counter() - start
                timings.append(-spent if forced else spent)
            decisions += 1
            game.apply(action)
        total += game.totals[seat]
    return total / (4 * hands)


def match(tested: str, opponent: str, deals: int, first_seed: int, hands: int,
          budget: Budget, timings: list[float] | None = None) -> tuple[float, float]:
    values = [play_deal(first_seed + d, tested, opponent, hands, budget, timings)
              for d in range(deals)]
    mean = statistics.fmean(values)
    ci = 1.96 * statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    return mean, ci


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--deals", type=int, default=100, help="deals per match (mc matches)")
    parser.add_argument("--control-deals", type=int, default=1000,
                        help="deals for the fast matches (duck self-play, greedy vs duck)")
    parser.add_argument("--hands", type=int, default=4, help="hands per deal (1..4)")
    parser.add_argument("--playouts", type=int, default=Budget().playouts,
                        help="mc: deals sampled per decision")
    parser.add_argument("--seed", type=int, default=1, help="first deal's seed")
    parser.add_argument("--strong", default="mc", help="the strong policy")
    args = parser.parse_args()
    budget = Budget(playouts=args.playouts)
    timings: list[float] = []
    rows = []
    plan = [(args.strong, "duck", args.deals), (args.strong, "random", args.deals),
            (args.strong, "greedy", args.deals), ("duck", "duck", args.control_deals),
            ("greedy", "duck", args.control_deals)]
    start = time.perf_counter()
    for tested, opponent, deals in plan:
        mean, ci = match(tested, opponent, deals, args.seed, args.hands, budget,
                         timings if tested == args.strong else None)
        rows.append((tested, opponent, deals, mean, ci))
        print(f"  {tested} vs 3 {opponent}: {mean:.2f} ± {ci:.2f} points/hand "
              f"({deals} deals, {time.perf_counter() - start:.0f} s)", file=sys.stderr,
              flush=True)
    print(f"{'bot':<8} {'opponents':<10} {'deals':>6} {'points/hand':>12} {'ci95':>6}")
    for tested, opponent, deals, mean, ci in rows:
        print(f"{tested:<8} 3 {opponent:<8} {deals:>6} {mean:>12.2f} {ci:>6.2f}")
    print(f"strong_policy={args.strong}")
    for tested, opponent, _, mean, ci in rows:
        name = "duck_self_play" if tested == opponent else \
            f"{'strong' if tested == args.strong else tested}_vs_{opponent}"
        print(f"{name}_points_per_hand={mean:.2f} ci95={ci:.2f}")
    every = [abs(t) for t in timings]
    chosen = [t for t in timings if t >= 0]
    print(f"strong_decision_ms_median={percentile(every, 0.5) * 1000:.1f} "
          f"p99={percentile(every, 0.99) * 1000:.1f} decisions={len(every)} "
          f"playouts={args.playouts}")
    print(f"strong_choice_decision_ms_median={percentile(chosen, 0.5) * 1000:.1f} "
          f"p99={percentile(chosen, 0.99) * 1000:.1f} decisions={len(chosen)} "
          "(passes and plays with more than one legal card)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What a 1,000-player championship costs: seating a round (target <= 100 ms) and the
standings after one more finished game (target <= 10 ms).

Plays ``--rounds`` rounds of random game results (seeded), seating each round from the
standings, and prints per round the seating time, the repeated pairs it could not avoid and
the time of ``Tally.add`` + ``Tally.standings`` for one game, as the process's CPU time (a
loaded machine inflates wall time; the CPU time is the work). Asserts nothing.

``--game`` seats and scores as that game does (its table sizes, most or fewest points winning).

Run: ``.venv/bin/python bench/championship.py [--players 1000] [--rounds 20] [--game NAME]``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from server.championships.format import (
    ChampionshipRules,
    GameResult,
    Standing,
    Tally,
    seat_round,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--players", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument("--game", default="", help="the game (empty: the default game)")
    args = parser.parse_args()
    players = [f"player-{i:04d}" for i in range(args.players)]
    tally = Tally(players, args.seed, ChampionshipRules(args.rounds, game_name=args.game))
    rng = random.Random(args.seed)
    table: list[Standing] = []
    seat_ms: list[float] = []
    update_ms: list[float] = []
    for round_no in range(1, args.rounds + 1):
        met = tally.met_pairs()
        start = time.process_time()
        tables = seat_round(players, table, met, args.seed, round_no, game=args.game)
        seat_ms.append((time.process_time() - start) * 1000)
        repeats = sum(frozenset((a, b)) in met
                      for t in tables for i, a in enumerate(t) for b in t[i + 1:])
        results = [GameResult(round_no, k, tuple(t), tuple(rng.randrange(0, 80) for _ in t),
                              game_name=args.game)
                   for k, t in enumerate(tables, start=1)]
        for result in results[:-1]:
            tally.add(result)
        tally.standings()
        start = time.process_time()
        tally.add(results[-1])
        table = tally.standings()
        update_ms.append((time.process_time() - start) * 1000)
        print(f"round={round_no:2d} tables={len(tables)} seat_ms={seat_ms[-1]:.1f} "
              f"repeated_pairs={repeats} one_game_standings_ms={update_ms[-1]:.2f}")
    print(f"players={args.players} rounds={args.rounds} game={args.game or 'default'} "
          f"seat_ms_median={statistics.median(seat_ms):.1f} seat_ms_max={max(seat_ms):.1f} "
          f"(target 100) one_game_standings_ms_median={statistics.median(update_ms):.2f} "
          f"one_game_standings_ms_max={max(update_ms):.2f} (target 10)")


if __name__ == "__main__":
    main()

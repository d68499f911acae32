"""A demo game between engine bots in the terminal (no server, no network)."""

from __future__ import annotations

import argparse
import secrets

from engine import (
    CardPlayed,
    GameOver,
    HandScored,
    HandStarted,
    MoonShot,
    Rules,
    TrickWon,
)
from engine.game import Game


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="DEMO: engine bots play one game of Copas.")
    parser.add_argument("--preset", default="online")
    parser.add_argument("--players", type=int, default=4)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else secrets.randbelow(2**32)
    game = Game(Rules.preset(args.preset, players=args.players), seed)
    print(f"DEMO GAME between engine bots (preset {args.preset}, {args.players} players, "
          f"seed {seed}); the table server is `make run`.")
    events = list(game.started_events)
    while True:
        for event in events:
            if isinstance(event, HandStarted):
                print(f"\n== hand {event.hand_number + 1}: pass {event.pass_direction}")
            elif isinstance(event, CardPlayed):
                print(f"  seat {event.seat}: {event.card}", end="")
            elif isinstance(event, TrickWon):
                print(f"   -> seat {event.winner} takes {event.points}")
            elif isinstance(event, MoonShot):
                print(f"  seat {event.seat} shoots the moon!")
            elif isinstance(event, HandScored):
                print(f"  hand points {list(event.points)}, totals {list(event.totals)}")
            elif isinstance(event, GameOver):
                print(f"\nGAME OVER ({event.reason}):")
                for row in event.standings:
                    print(f"  {row.place}. seat {row.seat}  {row.total} points")
        if game.is_over:
            return 0
        events = game.apply(game.auto_action(game.to_act()[0]))


if __name__ == "__main__":
    raise SystemExit(main())

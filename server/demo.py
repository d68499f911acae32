"""A demo game between the server's automatic players in the terminal (no server, no
network): the default game, through its module (``server.games``)."""

from __future__ import annotations

import argparse
import secrets
from dataclasses import dataclass, field
from typing import Any

from server import games
from server.errors import ServiceError


@dataclass(frozen=True)
class _NoLimits:
    """A demo's rules are the engine's: no server limits over them (``games.RuleLimits``)."""

    rule_defaults: dict[str, Any] = field(default_factory=dict)
    max_point_limit: int = 10**9
    max_hands_limit: int = 10**9
    min_timeout: float = 0.0


def main(argv: list[str] | None = None) -> int:
    module = games.get()
    parser = argparse.ArgumentParser(description="DEMO: engine bots play one game of Copas.")
    parser.add_argument("--preset", default=module.default_preset)
    parser.add_argument("--players", type=int, default=module.default_players)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else secrets.randbelow(2**32)
    try:
        rules = module.check_rules(_NoLimits(), args.preset, {"players": args.players})
    except ServiceError as error:
        parser.error(error.message)
    state = module.new_state(rules, seed)
    print(f"DEMO GAME between engine bots (preset {args.preset}, {args.players} players, "
          f"seed {seed}); the table server is `make run`.")
    events = module.started_events(state)
    while True:
        print("".join(module.event_text(event) for event in events), end="")
        if state.is_over:
            return 0
        events = module.apply_automatic(state, module.auto_action(state, state.to_act()[0]))


if __name__ == "__main__":
    raise SystemExit(main())

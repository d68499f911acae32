"""What a new table may ask for: its game; its rules from a preset and overrides (the server's
defaults for timings beneath), within this server's limits (the game's module judges them);
its bots and how they play; a seed only where the server allows one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from server import games
from server.config import BOT_POLICIES, RegistrySettings
from server.errors import ServiceError
from server.games import GameModule, GameRules


@dataclass(frozen=True, slots=True)
class NewTable:
    """A table request that passed every check."""

    preset: str
    rules: GameRules
    bot_seats: int
    bot_policy: str
    rating: str = "people"
    bot_pace: float = 0.0
    game: str = games.DEFAULT_GAME


MAX_BOT_PACE = 10.0  # seconds: the slowest bot a table may ask for


RATING_RULES = ("people", "with_bots", "off")  # CreateTableRequest.rating


def game_module(game: str) -> GameModule:
    """The module of the game a request names ("" for the default game).

    :raises ServiceError: INVALID_ARGUMENT (INVALID_RULES) listing the games this server
        plays."""
    try:
        return games.get(game)
    except KeyError:
        raise ServiceError.invalid(
            f"unknown game {game[:40]!r}: game must be one of {', '.join(games.GAMES)} "
            f"(empty: {games.DEFAULT_GAME})", "INVALID_RULES") from None


def default_bot_policy(server_default: str, module: GameModule) -> str:
    """The policy of a table that names none: the server's --bot-policy where the game's bots
    play it, else its "mc" (else "auto"): a policy of one game only (say "duck") must not
    refuse every table, nor every quick match, of the other games."""
    if server_default in module.bot_policies:
        return server_default
    return "mc" if "mc" in module.bot_policies else "auto"


def check_new_table(settings: RegistrySettings, *, preset: str, overrides: Mapping[str, Any],
                    bot_seats: int, bot_policy: str, has_seed: bool,
                    rating: str = "", bot_pace: float | None = None, game: str = ""
                    ) -> NewTable:
    """``bot_pace`` None: the server's --bot-pace where a person may sit, else 0; ``game``
    "" for the default game.

    :raises ServiceError: INVALID_ARGUMENT for a game, rules, bots, a policy or a pace this
        server does not take; PERMISSION_DENIED for a seed where none is allowed."""
    module = game_module(game)
    preset = preset or module.default_preset
    rules = module.check_rules(settings, preset, overrides)
    if not 0 <= bot_seats <= rules.players:
        raise ServiceError.invalid(f"bot_seats must be 0..{rules.players}", "INVALID_BOT_SEATS")
    bot_policy = bot_policy or default_bot_policy(settings.bot_policy, module)
    if bot_policy not in BOT_POLICIES or bot_policy not in module.bot_policies:
        raise ServiceError.invalid(
            f"bot_policy must be one of {', '.join(module.bot_policies)} for {module.name}",
            "INVALID_BOT_POLICY")
    if has_seed and not settings.allow_seed:
        raise ServiceError.denied("this server does not accept explicit seeds "
                                  "(start it with --allow-seed)", "SEED_NOT_ALLOWED")
    rating = rating or "people"
    if rating not in RATING_RULES:
        raise ServiceError.invalid(f"rating must be one of {', '.join(RATING_RULES)}",
                                   "INVALID_RATING_RULE")
    if bot_pace is None:
        bot_pace = settings.bot_pace if bot_seats < rules.players else 0.0
    if not 0.0 <= bot_pace <= MAX_BOT_PACE:  # NaN too
        raise ServiceError.invalid(f"bot_pace_seconds must be 0..{MAX_BOT_PACE:g}",
                                   "INVALID_RULES")
    return NewTable(preset, rules, bot_seats, bot_policy, rating, bot_pace, module.name)

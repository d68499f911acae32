"""What a new table may ask for: its rules from a preset and overrides (the server's defaults
for timings beneath), within this server's limits; its bots and how they play; a seed only
where the server allows one."""

from __future__ import annotations

from dataclasses import dataclass

from engine import Rules, RulesError
from server.codec import RuleOverrides
from server.config import BOT_POLICIES, RegistrySettings
from server.errors import ServiceError, from_engine


@dataclass(frozen=True, slots=True)
class NewTable:
    """A table request that passed every check."""

    preset: str
    rules: Rules
    bot_seats: int
    bot_policy: str
    rating: str = "people"
    bot_pace: float = 0.0


MAX_BOT_PACE = 10.0  # seconds: the slowest bot a table may ask for


RATING_RULES = ("people", "with_bots", "off")  # CreateTableRequest.rating


def check_new_table(settings: RegistrySettings, *, preset: str, overrides: RuleOverrides,
                    bot_seats: int, bot_policy: str, has_seed: bool,
                    rating: str = "", bot_pace: float | None = None) -> NewTable:
    """``bot_pace`` None: the server's --bot-pace where a person may sit, else 0.

    :raises ServiceError: INVALID_ARGUMENT for rules, bots, a policy or a pace this server
        does not take; PERMISSION_DENIED for a seed where none is allowed."""
    preset = preset or "online"
    try:
        rules = Rules.preset(preset, **{**settings.rule_defaults, **overrides})
    except RulesError as error:
        raise from_engine(error) from None
    if rules.point_limit > settings.max_point_limit:
        raise ServiceError.invalid(
            f"point_limit is at most {settings.max_point_limit} on this server", "INVALID_RULES")
    for limit in ("play_timeout", "pass_timeout", "moon_timeout"):
        value = getattr(rules, limit)
        if 0 < value < settings.min_timeout:
            raise ServiceError.invalid(
                f"{limit}_seconds is 0 (no limit) or at least {settings.min_timeout:g} on "
                "this server", "INVALID_RULES")
    if rules.max_hands > settings.max_hands_limit:
        raise ServiceError.invalid(
            f"max_hands is at most {settings.max_hands_limit} on this server", "INVALID_RULES")
    if not 0 <= bot_seats <= rules.players:
        raise ServiceError.invalid(f"bot_seats must be 0..{rules.players}", "INVALID_BOT_SEATS")
    bot_policy = bot_policy or settings.bot_policy
    if bot_policy not in BOT_POLICIES:
        raise ServiceError.invalid(
            f"bot_policy must be one of {', '.join(BOT_POLICIES)}", "INVALID_BOT_POLICY")
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
    return NewTable(preset, rules, bot_seats, bot_policy, rating, bot_pace)

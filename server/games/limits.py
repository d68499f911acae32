"""This server's limits on any game's rules (``RuleLimits``: ``copas-server``'s options),
checked alike for every game after its own rules are read."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from server.errors import ServiceError
from server.games.base import RuleLimits


def check_limits(settings: RuleLimits, rules: Any, timeouts: Iterable[str]) -> None:
    """Each of the rules' ``timeouts`` (their attribute names: ``play_timeout``, ...) is 0 (no
    limit) or at least the server's shortest, and ``max_hands`` at most its longest game.

    :raises ServiceError: INVALID_ARGUMENT (INVALID_RULES) naming the option."""
    for limit in timeouts:
        value = getattr(rules, limit)
        if 0 < value < settings.min_timeout:
            raise ServiceError.invalid(
                f"{limit}_seconds is 0 (no limit) or at least {settings.min_timeout:g} on "
                "this server", "INVALID_RULES")
    if rules.max_hands > settings.max_hands_limit:
        raise ServiceError.invalid(
            f"max_hands is at most {settings.max_hands_limit} on this server", "INVALID_RULES")

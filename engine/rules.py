"""Table options: one frozen ``Rules`` value holds every variant, plus the named presets."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from engine.errors import RulesError


class MoonRule(StrEnum):
    """What shooting the moon (all 13 hearts and Q♠ in one hand) does."""

    OTHERS_PLUS_26 = "OTHERS_PLUS_26"  # shooter 0 for the hand, every other player 26
    SHOOTER_CHOICE = "SHOOTER_CHOICE"  # shooter picks: -26 to self (floored at 0) or +26 others
    DISABLED = "DISABLED"  # no moon: points count as taken


@dataclass(frozen=True, slots=True)
class Rules:
    """Every option of a table. Times are seconds; a pause of 0 is no pause, a timeout of 0
    is no time limit. The engine uses the game options; the server uses the times."""

    players: int = 4
    max_hands: int = 4
    point_limit: int = 100
    moon: MoonRule = MoonRule.OTHERS_PLUS_26
    points_on_first_trick: bool = False
    queen_breaks_hearts: bool = False
    play_timeout: float = 20.0
    pass_timeout: float = 30.0
    moon_timeout: float = 15.0
    trick_pause: float = 2.0
    hand_pause: float = 5.0

    def __post_init__(self) -> None:
        def check(ok: bool, message: str) -> None:
            if not ok:
                raise RulesError(message)

        for name in ("players", "max_hands", "point_limit"):
            value = getattr(self, name)
            check(isinstance(value, int) and not isinstance(value, bool),
                  f"{name} must be a whole number, got {value!r}")
        check(3 <= self.players <= 5, f"players must be 3, 4 or 5, got {self.players}")
        check(self.max_hands >= 0, f"max_hands must be 0 (no limit) or more, got {self.max_hands}")
        check(self.point_limit >= 1, f"point_limit must be at least 1, got {self.point_limit}")
        if not isinstance(self.moon, MoonRule):
            try:
                object.__setattr__(self, "moon", MoonRule(self.moon))
            except ValueError:
                raise RulesError(
                    f"moon must be one of {', '.join(MoonRule)}, got {self.moon!r}") from None
        for name in ("points_on_first_trick", "queen_breaks_hearts"):
            check(isinstance(getattr(self, name), bool), f"{name} must be true or false")
        for name in ("play_timeout", "pass_timeout", "moon_timeout", "trick_pause", "hand_pause"):
            value = getattr(self, name)
            check(isinstance(value, (int, float)) and not isinstance(value, bool)
                  and 0 <= value <= 86400 and value == value,
                  f"{name} must be a number of seconds from 0 to 86400, got {value!r}")

    @property
    def hand_size(self) -> int:
        return {3: 17, 4: 13, 5: 10}[self.players]

    def replace(self, **changes: Any) -> Rules:
        """A copy with some options changed (validated again)."""
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise RulesError(f"unknown rule option(s): {', '.join(sorted(unknown))}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: (str(v) if isinstance(v := getattr(self, f.name), MoonRule) else v)
                for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Rules:
        return cls().replace(**data)

    @classmethod
    def preset(cls, name: str = "online", **overrides: Any) -> Rules:
        """A named preset (``online``, ``classic``, ``quick``, ``20``, ``50``, ``100``),
        with any option overridden."""
        try:
            base = PRESETS[name]
        except KeyError:
            raise RulesError(
                f"unknown preset {name!r}: choose one of {', '.join(PRESETS)}") from None
        return base.replace(**overrides) if overrides else base


PRESETS: dict[str, Rules] = {
    "online": Rules(max_hands=4, point_limit=100, moon=MoonRule.OTHERS_PLUS_26),
    "classic": Rules(max_hands=0, point_limit=100, moon=MoonRule.SHOOTER_CHOICE),
    "quick": Rules(max_hands=1, point_limit=100, moon=MoonRule.SHOOTER_CHOICE),
    "20": Rules(max_hands=0, point_limit=20, moon=MoonRule.SHOOTER_CHOICE),
    "50": Rules(max_hands=0, point_limit=50, moon=MoonRule.SHOOTER_CHOICE),
    "100": Rules(max_hands=0, point_limit=100, moon=MoonRule.SHOOTER_CHOICE),
}

"""Bisca's table options: one frozen ``BiscaRules`` value holds every variant, plus presets."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from engine.bisca.cards import pack_for
from engine.errors import RulesError

PLAYER_COUNTS = (2, 3, 4, 6)
HAND_SIZES = (3, 7, 9)


class FollowSuit(StrEnum):
    """When a player must play a card of the suit led (when they hold one)."""

    NEVER = "NEVER"  # any card, always
    STOCK_EMPTY = "STOCK_EMPTY"  # once the stock is empty (the trump card drawn)


class TieRule(StrEnum):
    """What a hand tied for the most card points (60-60 with two sides) is worth."""

    NOBODY_SCORES = "NOBODY_SCORES"
    CARRIED_OVER = "CARRIED_OVER"  # the next hand not tied is worth 1 more per tied hand


@dataclass(frozen=True, slots=True)
class BiscaRules:
    """Every option of a Bisca table (docs/RULES.md, "Bisca"). Times are seconds, as in
    Hearts's ``Rules``; the engine uses the game options, the server the times."""

    players: int = 2
    partnerships: bool = False  # 4 or 6 players: two teams, seats alternating
    hand_size: int = 3
    follow_suit: FollowSuit = FollowSuit.NEVER
    margin_bonus: bool = True  # 2 game points for 91+, 4 for all 120
    tie: TieRule = TieRule.NOBODY_SCORES
    target: int = 4  # game points that end the game
    max_hands: int = 0  # 0 = no limit
    play_timeout: float = 20.0
    trick_pause: float = 2.0
    hand_pause: float = 5.0

    def __post_init__(self) -> None:
        def check(ok: bool, message: str) -> None:
            if not ok:
                raise RulesError(message)

        for name in ("players", "hand_size", "target", "max_hands"):
            value = getattr(self, name)
            check(isinstance(value, int) and not isinstance(value, bool),
                  f"{name} must be a whole number, got {value!r}")
        for name in ("partnerships", "margin_bonus"):
            check(isinstance(getattr(self, name), bool), f"{name} must be true or false")
        check(self.players in PLAYER_COUNTS,
              f"players must be one of {', '.join(map(str, PLAYER_COUNTS))} for Bisca, "
              f"got {self.players}")
        check(self.hand_size in HAND_SIZES,
              f"hand_size must be one of {', '.join(map(str, HAND_SIZES))} (Bisca de 3, de 7, "
              f"de 9), got {self.hand_size}")
        check(not self.partnerships or self.players in (4, 6),
              f"partnerships are played by 4 or 6 players, not {self.players}")
        check(self.players != 6 or self.partnerships,
              "6 players play Bisca in partnerships (two teams of 3): set partnerships")
        check(self.players * self.hand_size < len(pack_for(self.players)),
              f"{self.players} players with {self.hand_size} cards each leave no stock "
              f"(the pack has {len(pack_for(self.players))} cards)")
        check(1 <= self.target <= 100, f"target must be 1 to 100 game points, got {self.target}")
        check(0 <= self.max_hands <= 100,
              f"max_hands must be 0 (no limit) to 100, got {self.max_hands}")
        for name, enum in (("follow_suit", FollowSuit), ("tie", TieRule)):
            value = getattr(self, name)
            if not isinstance(value, enum):
                try:
                    object.__setattr__(self, name, enum(value))
                except ValueError:
                    raise RulesError(f"{name} must be one of {', '.join(enum)}, "
                                     f"got {value!r}") from None
        for name in ("play_timeout", "trick_pause", "hand_pause"):
            value = getattr(self, name)
            check(isinstance(value, (int, float)) and not isinstance(value, bool)
                  and 0 <= value <= 86400 and value == value,
                  f"{name} must be a number of seconds from 0 to 86400, got {value!r}")

    @property
    def sides(self) -> int:
        """How many sides score: 2 teams in partnerships, else one per player."""
        return 2 if self.partnerships else self.players

    def side_of(self, seat: int) -> int:
        """The side (team 0 or 1, or the seat itself) that ``seat`` plays for."""
        return seat % 2 if self.partnerships else seat

    def replace(self, **changes: Any) -> BiscaRules:
        """A copy with some options changed (validated again)."""
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            known = ", ".join(f.name for f in dataclasses.fields(self))
            raise RulesError(f"unknown Bisca rule option(s): {', '.join(sorted(unknown))}; "
                             f"the options are {known}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: (str(v) if isinstance(v := getattr(self, f.name), StrEnum) else v)
                for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BiscaRules:
        return cls().replace(**data)

    @classmethod
    def preset(cls, name: str = "bisca3", **overrides: Any) -> BiscaRules:
        """A named preset (docs/RULES.md, "Bisca"), with any option overridden."""
        try:
            base = PRESETS[name]
        except KeyError:
            raise RulesError(
                f"unknown Bisca preset {name!r}: choose one of {', '.join(PRESETS)}") from None
        return base.replace(**overrides) if overrides else base


PRESETS: dict[str, BiscaRules] = {
    "bisca3": BiscaRules(),
    "bisca7": BiscaRules(hand_size=7, follow_suit=FollowSuit.STOCK_EMPTY),
    "bisca9": BiscaRules(hand_size=9, follow_suit=FollowSuit.STOCK_EMPTY),
    "pairs": BiscaRules(players=4, partnerships=True),
    "four": BiscaRules(players=4),
    "three": BiscaRules(players=3),
    "six": BiscaRules(players=6, partnerships=True),
    "quick": BiscaRules(max_hands=1),
}

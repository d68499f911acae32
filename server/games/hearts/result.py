"""A finished Hearts game's result as its record keeps it (moved from ``server/store/base.py``
behind the game seam): ``engine.record.result_of``'s JSON, typed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine import GameEndReason, MoonChoice, PassDirection, Standing
from engine.game import Game, HandResult, LeaverRecord


@dataclass(frozen=True, slots=True)
class GameResult:
    """Everything a championship needs from a game (``engine.result_of``, typed)."""

    is_over: bool
    end_reason: GameEndReason | None
    totals: tuple[int, ...]
    hands: tuple[HandResult, ...]
    """Each hand played: points taken and scored, the moon."""
    leavers: tuple[LeaverRecord, ...]
    """Who left, and when."""
    standings: tuple[Standing, ...]
    """Places at the end (ties share a place; leavers last)."""

    @classmethod
    def of(cls, game: Game) -> GameResult:
        return cls(game.is_over, game.end_reason, tuple(game.totals),
                   tuple(game.hands_played), tuple(game.left), tuple(game.standings))

    def to_dict(self) -> dict[str, Any]:
        """The JSON form ``engine.record.result_of`` gives (replay compares the two)."""
        return {
            "is_over": self.is_over,
            "end_reason": str(self.end_reason) if self.end_reason else None,
            "totals": list(self.totals),
            "hands": [{"hand_number": h.hand_number, "pass_direction": str(h.pass_direction),
                       "taken": list(h.taken), "points": list(h.points),
                       "totals": list(h.totals), "moon_shooter": h.moon_shooter,
                       "moon_choice": str(h.moon_choice) if h.moon_choice else None}
                      for h in self.hands],
            "leavers": [{"seat": lv.seat, "hand_number": lv.hand_number,
                         "trick_number": lv.trick_number} for lv in self.leavers],
            "standings": [{"seat": r.seat, "place": r.place, "total": r.total,
                           "has_left": r.has_left} for r in self.standings],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GameResult:
        reason = data["end_reason"]
        return cls(
            bool(data["is_over"]), GameEndReason(reason) if reason else None,
            tuple(int(t) for t in data["totals"]),
            tuple(HandResult(int(h["hand_number"]), PassDirection(h["pass_direction"]),
                             tuple(h["taken"]), tuple(h["points"]), tuple(h["totals"]),
                             h["moon_shooter"],
                             MoonChoice(h["moon_choice"]) if h["moon_choice"] else None)
                  for h in data["hands"]),
            tuple(LeaverRecord(int(lv["seat"]), int(lv["hand_number"]),
                               int(lv["trick_number"])) for lv in data["leavers"]),
            tuple(Standing(int(r["seat"]), int(r["place"]), int(r["total"]),
                           bool(r["has_left"])) for r in data["standings"]))

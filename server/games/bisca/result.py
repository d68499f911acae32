"""A finished Bisca game's result as its record keeps it: ``engine.bisca.result_of``'s JSON
(what ``replay`` compares), read into typed values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.actions import GameEndReason
from engine.bisca import Game, Standing, result_of


@dataclass(frozen=True, slots=True)
class Leaver:
    seat: int
    hand_number: int
    trick_number: int


@dataclass(frozen=True, slots=True)
class HandPlayed:
    """One hand: card points per seat and per side, its winning side, game points per side."""

    hand_number: int
    trump_card: str
    points: tuple[int, ...]
    side_points: tuple[int, ...]
    winner: int | None
    game_points: tuple[int, ...]
    totals: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class BiscaResult:
    """Everything a record says of how a Bisca game went (``engine.bisca.result_of``)."""

    is_over: bool
    end_reason: GameEndReason | None
    totals: tuple[int, ...]
    """Game points per side (a team in partnerships, else a seat)."""
    hands: tuple[HandPlayed, ...]
    leavers: tuple[Leaver, ...]
    standings: tuple[Standing, ...]
    """Places at the end: a side's seats share its place."""

    @classmethod
    def of(cls, game: Game) -> BiscaResult:
        return cls.from_dict(result_of(game))

    def to_dict(self) -> dict[str, Any]:
        """``engine.bisca.result_of``'s form (replay compares the two)."""
        return {
            "is_over": self.is_over,
            "end_reason": str(self.end_reason) if self.end_reason else None,
            "totals": list(self.totals),
            "hands": [{"hand_number": h.hand_number, "trump_card": h.trump_card,
                       "points": list(h.points), "side_points": list(h.side_points),
                       "winner": h.winner, "game_points": list(h.game_points),
                       "totals": list(h.totals)} for h in self.hands],
            "leavers": [{"seat": lv.seat, "hand_number": lv.hand_number,
                         "trick_number": lv.trick_number} for lv in self.leavers],
            "standings": [{"seat": r.seat, "place": r.place, "side": r.side, "total": r.total,
                           "has_left": r.has_left} for r in self.standings],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BiscaResult:
        """:raises KeyError, TypeError, ValueError: not a Bisca result."""
        reason = data["end_reason"]
        return cls(
            bool(data["is_over"]), GameEndReason(reason) if reason else None,
            tuple(int(t) for t in data["totals"]),
            tuple(HandPlayed(int(h["hand_number"]), str(h["trump_card"]),
                             tuple(int(p) for p in h["points"]),
                             tuple(int(p) for p in h["side_points"]),
                             None if h["winner"] is None else int(h["winner"]),
                             tuple(int(p) for p in h["game_points"]),
                             tuple(int(t) for t in h["totals"])) for h in data["hands"]),
            tuple(Leaver(int(lv["seat"]), int(lv["hand_number"]), int(lv["trick_number"]))
                  for lv in data["leavers"]),
            tuple(Standing(int(r["seat"]), int(r["place"]), int(r["side"]), int(r["total"]),
                           bool(r["has_left"])) for r in data["standings"]))

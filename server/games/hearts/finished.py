"""A finished Hearts game as its accounts keep it, and whether it may be rated: the rule of
docs/RULES.md's "Rated games" (``server/games/finished.py``, every game's), where its end is
the point limit, the hand limit, the last player standing, or abandoned, and an operator's
end is CLOSED. Places are the game's standings: ties share a place, leavers rank behind
everyone who stayed, the first to leave last.
"""

from __future__ import annotations

from typing import cast

from engine import GameEndReason
from server.accounts.model import FinishedGame
from server.accounts.ratings import rating_kind
from server.games import finished
from server.games.hearts.result import GameResult
from server.store.base import RecordSummary


def finished_game(summary: RecordSummary) -> FinishedGame | None:
    """The game for its accounts' histories (None when no seat had an account)."""
    result = cast("GameResult", summary.result)
    return finished.finished_game(
        summary, result, hand_size=summary.rules.hand_size,
        was_closed=result.end_reason is GameEndReason.CLOSED,
        kind=rating_kind(summary.game))  # every seat for itself: no partnerships in Hearts

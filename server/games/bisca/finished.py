"""A finished Bisca game as its accounts keep it, and whether it may be rated: the rule of
docs/RULES.md's "Rated games" (``server/games/finished.py``, every game's: its table rates
people, it reached its end and no operator closed it, every seat a different signed-in
account, at least two who played), in Bisca's kind of game (``rating_kind("bisca",
has_partnerships=)``): a rated Bisca game moves only Bisca ratings. Places are the standings'
(partners share their team's place), points are the seat's side's game points (more is
better)."""

from __future__ import annotations

from typing import cast

from engine.actions import GameEndReason
from engine.bisca import BiscaRules
from server.accounts.model import FinishedGame
from server.accounts.ratings import rating_kind
from server.games import finished
from server.games.bisca.result import BiscaResult
from server.store.base import RecordSummary


def finished_game(summary: RecordSummary) -> FinishedGame | None:
    """The game for its accounts' histories (None when no seat had an account)."""
    result = cast("BiscaResult", summary.result)
    rules = cast("BiscaRules", summary.rules)
    return finished.finished_game(
        summary, result, hand_size=rules.hand_size,
        was_closed=result.end_reason is GameEndReason.CLOSED,
        kind=rating_kind(summary.game, has_partnerships=rules.partnerships))

"""A finished Bisca game as its accounts keep it, and whether it may be rated: the rule of
docs/RULES.md's "Rated games", as Hearts's (its table rates people, it reached its end and no
operator closed it, every seat a different signed-in account, at least two who played), in
Bisca's kind of game (``rating_kind("bisca", has_partnerships=)``): a rated Bisca game moves
only Bisca ratings. Places are the standings' (partners share their team's place), points are
the seat's side's game points (more is better)."""

from __future__ import annotations

from typing import cast

from engine.actions import GameEndReason
from engine.bisca import BiscaRules
from server.accounts.model import FinishedGame, Placed
from server.accounts.ratings import has_played, rating_kind
from server.games.bisca.result import BiscaResult
from server.store.base import RecordSummary


def finished_game(summary: RecordSummary) -> FinishedGame | None:
    """The game for its accounts' histories (None when no seat had an account)."""
    accounts = {s.seat: s.account_id for s in summary.seats if s.account_id}
    if not accounts:
        return None
    result = cast("BiscaResult", summary.result)
    rules = cast("BiscaRules", summary.rules)
    by_seat = {s.seat: s for s in summary.seats}
    left = {lv.seat for lv in result.leavers}
    places = tuple(
        Placed(accounts[r.seat], r.place, r.total, r.seat,
               has_played(by_seat[r.seat].own_cards, by_seat[r.seat].cards, rules.hand_size),
               by_seat[r.seat].network, r.seat in left)
        for r in sorted(result.standings, key=lambda s: s.seat) if r.seat in accounts)
    is_rated = (summary.rating == "people" and result.is_over
                and result.end_reason is not GameEndReason.CLOSED
                and len(accounts) == len(summary.seats) >= 2
                and len(set(accounts.values())) == len(accounts)
                and sum(p.has_played and not p.has_left for p in places) >= 2)
    kind = rating_kind(summary.game, has_partnerships=rules.partnerships)
    return FinishedGame(summary.record_id, summary.display_name, summary.finished,
                        len(summary.seats), places, is_rated, kind)

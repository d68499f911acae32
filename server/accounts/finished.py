"""A finished game as its accounts keep it, and whether it is rated.

Rated (RULES.md, "Ratings"): a game that reached its end (the point limit, the hand limit, or
abandoned with the leavers last), not CLOSED by an operator, whose every seat was held by a
signed-in account (so no bot and no anonymous seat: a rating is only ever won against people
who can be rated back, and a bot cannot be farmed). Places are the game's standings: ties share
a place, leavers rank behind everyone who stayed, the first to leave last. Every other game of
an account is still in its history, unrated.
"""

from __future__ import annotations

from engine import GameEndReason
from server.accounts.model import FinishedGame, Placed
from server.store.base import RecordSummary


def finished_game(summary: RecordSummary) -> FinishedGame | None:
    """The game for its accounts' histories (None when no seat had an account)."""
    accounts = {s.seat: s.account_id for s in summary.seats if s.account_id}
    if not accounts:
        return None
    result = summary.result
    places = tuple(Placed(accounts[s.seat], s.place, s.total)
                   for s in sorted(result.standings, key=lambda s: s.seat) if s.seat in accounts)
    is_rated = (result.is_over and result.end_reason is not GameEndReason.CLOSED
                and len(accounts) == len(summary.seats) >= 2
                and len(set(accounts.values())) == len(accounts))
    return FinishedGame(summary.record_id, summary.display_name, summary.finished,
                        len(summary.seats), places, is_rated)

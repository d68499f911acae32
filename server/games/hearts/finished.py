"""A finished Hearts game as its accounts keep it (moved from ``server/accounts/finished.py``
behind the game seam), and whether it may be rated (RULES.md, "Rated
games"): its table's rating rule is ``people`` (``off`` never rates; ``with_bots`` is kept for
older clients and rates nothing, since a game with a bot is never rated), it reached its end
(the point limit, the hand limit, the last player standing, or abandoned) and no operator
ended it (CLOSED), and every seat was held by a signed-in account, each a different one. Who
then moves whose rating is ``ratings.rate_game``'s: only seats whose people played rate each
other (the seat's cards, ``SeatRecord.own_cards`` of the cards it played). Places are the
game's standings: ties share a place, leavers rank behind everyone who stayed, the first to
leave last. Every game of an account is in its history, rated or not.
"""

from __future__ import annotations

from typing import cast

from engine import GameEndReason
from server.accounts.model import FinishedGame, Placed
from server.accounts.ratings import has_played, rating_kind
from server.games.hearts.result import GameResult
from server.store.base import RecordSummary


def finished_game(summary: RecordSummary) -> FinishedGame | None:
    """The game for its accounts' histories (None when no seat had an account)."""
    accounts = {s.seat: s.account_id for s in summary.seats if s.account_id}
    if not accounts:
        return None
    result = cast("GameResult", summary.result)
    by_seat = {s.seat: s for s in summary.seats}
    left = {lv.seat for lv in result.leavers}
    places = tuple(
        Placed(accounts[r.seat], r.place, r.total, r.seat,
               has_played(by_seat[r.seat].own_cards, by_seat[r.seat].cards,
                          summary.rules.hand_size),
               by_seat[r.seat].network, r.seat in left)
        for r in sorted(result.standings, key=lambda s: s.seat) if r.seat in accounts)
    is_rated = (summary.rating == "people" and result.is_over
                and result.end_reason is not GameEndReason.CLOSED
                and len(accounts) == len(summary.seats) >= 2
                and len(set(accounts.values())) == len(accounts)
                and sum(p.has_played and not p.has_left for p in places) >= 2)
    kind = rating_kind(summary.game)  # every seat for itself: no partnerships in Hearts
    return FinishedGame(summary.record_id, summary.display_name, summary.finished,
                        len(summary.seats), places, is_rated, kind)

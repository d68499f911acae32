"""A finished game as its accounts keep it, and whether it is rated.

Its table's rating rule (CreateTableRequest.rating; RULES.md, "Accounts and ratings") says:
- ``people`` (the default): rated when every seat was held by a signed-in account (no bot, no
  anonymous seat: a rating is only won against people who can be rated back);
- ``with_bots``: rated when every person's seat was held by a signed-in account; each bot is an
  opponent of a new account's rating, fixed (a bot's rating never moves);
- ``off``: never rated.
Either way the game reached its end (the point limit, the hand limit, the last player, or
abandoned with the leavers last) and no operator ended it (CLOSED). Places are the game's
standings: ties share a place, leavers rank behind everyone who stayed, the first to leave
last. Every game of an account is in its history, rated or not.
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
    by_seat = sorted(result.standings, key=lambda s: s.seat)
    places = tuple(Placed(accounts[s.seat], s.place, s.total) for s in by_seat
                   if s.seat in accounts)
    bots = {s.seat for s in summary.seats if s.is_bot}
    people = [s for s in summary.seats if not s.is_bot]
    all_signed_in = all(s.account_id for s in people) and \
        len(set(accounts.values())) == len(accounts)
    allowed = (summary.rating == "people" and not bots) or \
        summary.rating == "with_bots"
    is_rated = (result.is_over and result.end_reason is not GameEndReason.CLOSED and allowed
                and all_signed_in and len(summary.seats) >= 2)
    return FinishedGame(summary.record_id, summary.display_name, summary.finished,
                        len(summary.seats), places, is_rated,
                        tuple(s.place for s in by_seat if s.seat in bots) if is_rated else ())

"""A finished game as its accounts keep it, and whether it may be rated (docs/RULES.md, "Rated
games"), the same rule for every game: its table's rating rule is ``people`` (``off`` never
rates; ``with_bots`` is kept for older clients and rates nothing, since a game with a bot is
never rated), it reached its end and no operator ended it, every seat was held by a signed-in
account, each a different one, and at least two of them played and stayed. Who then moves
whose rating is ``ratings.rate_game``'s: only seats whose people played rate each other (the
seat's cards, ``SeatRecord.own_cards`` of the cards it played). Places and points are the
game's standings' (each game's module says what they mean: ``server/games/<game>/finished.py``).
Every game of an account is in its history, rated or not."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from server.accounts.model import FinishedGame, Placed
from server.accounts.ratings import has_played
from server.store.base import RecordSummary


class _Place(Protocol):
    @property
    def seat(self) -> int: ...
    @property
    def place(self) -> int: ...
    @property
    def total(self) -> int: ...


class _Leaver(Protocol):
    @property
    def seat(self) -> int: ...


class FinishedResult(Protocol):
    """What the rule reads of a game's result."""

    @property
    def is_over(self) -> bool: ...
    @property
    def leavers(self) -> Sequence[_Leaver]: ...
    @property
    def standings(self) -> Sequence[_Place]: ...


def finished_game(summary: RecordSummary, result: FinishedResult, *, hand_size: int,
                  was_closed: bool, kind: str) -> FinishedGame | None:
    """The game for its accounts' histories (None when no seat had an account).

    ``hand_size``: the cards a seat is dealt (whether its person played); ``was_closed``: an
    operator ended it; ``kind``: its ratings' kind (``ratings.rating_kind``)."""
    accounts = {s.seat: s.account_id for s in summary.seats if s.account_id}
    if not accounts:
        return None
    by_seat = {s.seat: s for s in summary.seats}
    left = {lv.seat for lv in result.leavers}
    places = tuple(
        Placed(accounts[r.seat], r.place, r.total, r.seat,
               has_played(by_seat[r.seat].own_cards, by_seat[r.seat].cards, hand_size),
               by_seat[r.seat].network, r.seat in left)
        for r in sorted(result.standings, key=lambda s: s.seat) if r.seat in accounts)
    is_rated = (summary.rating == "people" and result.is_over and not was_closed
                and len(accounts) == len(summary.seats) >= 2
                and len(set(accounts.values())) == len(accounts)
                and sum(p.has_played and not p.has_left for p in places) >= 2)
    return FinishedGame(summary.record_id, summary.display_name, summary.finished,
                        len(summary.seats), places, is_rated, kind)

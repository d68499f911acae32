"""Quick match alone does not wait forever (issue 40): a quick-match table that a person has
waited at for ``--quick-match-bots-after`` seconds (counted from the first quick match seated
there) gives its free seats to bots, and its game starts (once its people's reserved seats are
taken up, as always). The bots' joins are log entries like a rematch's unclaimed seats, so a
restart rebuilds them; the timer itself is not kept: a table restored still waiting is armed
again by the next quick match seated there. A table that a quick match never seated anyone at
(one a person made for friends, even with a quick match's rules) is never filled."""

from __future__ import annotations

from collections.abc import Callable

from server.tables.clock import Handle, Scheduler
from server.tables.table import Table


class QuickFill:
    """The bots' timer of each waiting quick-match table: one handle per table, given back
    when it fires (at most ``wait`` seconds after it was armed, whatever became of the
    table)."""

    def __init__(self, scheduler: Scheduler, wait: float, holds: Callable[[str], bool]) -> None:
        self._scheduler = scheduler
        self._wait = wait  # seconds; 0: never (people only, as before)
        self._holds = holds
        self._timers: dict[str, Handle] = {}

    @property
    def wait(self) -> float:
        return self._wait

    def armed(self) -> int:
        """How many tables' timers are running (their bound: the tables waiting here)."""
        return len(self._timers)

    def watch(self, table: Table) -> None:
        """A quick match seated a person at ``table``: arm its timer, unless it runs already
        (the wait is the first person's) or the table is not waiting any more."""
        if self._wait <= 0 or table.id in self._timers or table.game is not None:
            return
        self._timers[table.id] = self._scheduler.call_later(
            self._wait, lambda: self._fill(table))

    def _fill(self, table: Table) -> None:
        """Bots take the free seats of ``table``, if it still waits with a person seated."""
        self._timers.pop(table.id, None)
        if not self._holds(table.id) or table.is_released or table.game is not None:
            return
        if not any(seat.is_taken and not seat.is_bot for seat in table.seats):
            return  # its people gave their seats up: nobody to play with
        free = [seat.number for seat in table.seats if not seat.is_taken]
        table.log.info("quick_match_bots", seats=len(free), waited=self._wait)
        for number in free:
            if table.game is None:
                table.seat_bot(number)

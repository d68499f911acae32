"""A table's presence: what it shows of each seat's connection (its person's streams: one
open, or all closed), the same in its views (a player's ``is_connected``) and in its presence
events. A seat's change is shown at most once per interval: a change within it is shown at
its end, as the state is then (nothing when that is the state shown), so a player who reopens
streams in a loop costs the table one event, and one view per watched seat, per interval.
Until then every view shows the seat as its last event told (however the table moves
meanwhile), so what anyone is shown of a seat is the truth once the interval has passed,
whatever the order of its changes within it."""

from __future__ import annotations

from collections.abc import Callable

from copas.v1 import copas_pb2

from server.tables.clock import Handle, Scheduler
from server.tables.events import TableEvents


class Presence:
    """Per seat: the connection state shown (in the views and the last event) and when,
    and the announcement pending."""

    __slots__ = ("_events", "_interval", "_is_connected", "_pending", "_scheduler", "_shown",
                 "_step")

    def __init__(self, scheduler: Scheduler, interval: float, events: TableEvents,
                 is_connected: Callable[[int], bool],
                 step: Callable[[Callable[[], None]], Callable[[], None]]) -> None:
        """``is_connected``: the truth (a stream of the seat's person is open now);
        ``step`` makes a timer's callback that runs its argument as a step of the table's
        own (``Table._timer_step``)."""
        self._scheduler = scheduler
        self._interval = interval
        self._events = events
        self._is_connected = is_connected
        self._step = step
        self._shown: dict[int, tuple[bool, float]] = {}
        self._pending: dict[int, Handle] = {}

    def shows(self, seat: int) -> bool:
        """What every view shows of ``seat``: connected as its last presence event told
        (gone when none did)."""
        shown = self._shown.get(seat)
        return shown is not None and shown[0]

    def changed(self, seat: int) -> None:
        """``seat``'s player connected or went (in a step of the table's): announced now,
        or at the end of the interval since its last announcement."""
        if seat in self._pending:
            return  # the pending announcement shows the state as it is then
        now = self._scheduler.now()
        shown = self._shown.get(seat)
        if shown is not None and now < shown[1] + self._interval:
            def due() -> None:
                self._pending.pop(seat, None)
                self._step(lambda: self._announce(seat))()
            self._pending[seat] = self._scheduler.call_later(shown[1] + self._interval - now,
                                                             due)
            return
        self._announce(seat)

    def _announce(self, seat: int) -> None:
        """Show ``seat`` as it is, unless it is shown so: the views have shown what the last
        event told, so nobody was shown otherwise."""
        is_connected = self._is_connected(seat)
        if self.shows(seat) == is_connected:
            return  # back as it was shown: nothing to tell
        self._tell(seat, is_connected)

    def _tell(self, seat: int, is_connected: bool) -> None:
        self._shown[seat] = (is_connected, self._scheduler.now())
        self._events.announce("player_connection", copas_pb2.PlayerConnection(
            seat=seat, is_connected=is_connected))

    def forget(self, seat: int) -> None:
        """``seat``'s person is gone (their token revoked, their streams closed, in a step of
        the table's): shown gone now if they were shown connected, nothing pending for them,
        and the seat's next person starts afresh."""
        handle = self._pending.pop(seat, None)
        if handle is not None:
            handle.cancel()
        if self.shows(seat):
            self._tell(seat, False)
        self._shown.pop(seat, None)

    def cancel(self) -> None:
        """The table goes: no announcement is pending any more."""
        for handle in self._pending.values():
            handle.cancel()
        self._pending.clear()

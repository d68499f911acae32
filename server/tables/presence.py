"""A table's presence events (a player's streams opened or all closed), at most one per seat
per interval: a change within it is shown at its end, as the state is then (nothing when that
is the state shown last), so a player who reopens streams in a loop costs the table one
event, and one view per watched seat, per interval, and the last state is always shown."""

from __future__ import annotations

from collections.abc import Callable

from copas.v1 import copas_pb2

from server.tables.clock import Handle, Scheduler
from server.tables.events import TableEvents


class Presence:
    """Per seat: the connection state shown last and when, and the announcement pending."""

    __slots__ = ("_events", "_interval", "_is_connected", "_pending", "_scheduler", "_shown",
                 "_step")

    def __init__(self, scheduler: Scheduler, interval: float, events: TableEvents,
                 is_connected: Callable[[int], bool],
                 step: Callable[[Callable[[], None]], Callable[[], None]]) -> None:
        """``step`` makes a timer's callback that runs its argument as a step of the
        table's own (``Table._timer_step``)."""
        self._scheduler = scheduler
        self._interval = interval
        self._events = events
        self._is_connected = is_connected
        self._step = step
        self._shown: dict[int, tuple[bool, float]] = {}
        self._pending: dict[int, Handle] = {}

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
        is_connected = self._is_connected(seat)
        shown = self._shown.get(seat)
        if shown is not None and shown[0] == is_connected:
            return  # back as it was shown: nothing to tell
        self._shown[seat] = (is_connected, self._scheduler.now())
        self._events.announce("player_connection", copas_pb2.PlayerConnection(
            seat=seat, is_connected=is_connected))

    def cancel(self) -> None:
        """The table goes: no announcement is pending any more."""
        for handle in self._pending.values():
            handle.cancel()
        self._pending.clear()

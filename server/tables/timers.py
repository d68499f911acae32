"""A table's timers (like Colyseus's per-room ``Clock``): at most one handle of each kind,
with the time it falls due; armed, cancelled one by one or all at once, and listed. What
happens when one fires is the table's business: here is only when, and which."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

from server.tables.clock import Handle, Scheduler


class TimerKind(StrEnum):
    """The timers a table keeps, one of each at most, listed in this order."""

    TURN = "turn"  # the deadline of the people who must act
    PAUSE = "pause"  # the end of a pause between tricks or hands
    BOT = "bot"  # the next bot move (a step due, or a decision being thought)
    WATCHDOG = "watchdog"  # a waiting table's expiry, an idle game's end


class TableTimers:
    """One table's timer handles and their due times."""

    __slots__ = ("_armed", "_scheduler")

    def __init__(self, scheduler: Scheduler) -> None:
        self._scheduler = scheduler
        self._armed: dict[TimerKind, tuple[Handle, float]] = {}

    def arm(self, kind: TimerKind, delay: float, callback: Callable[[], None], *,
            due: float | None = None) -> None:
        """Run ``callback`` after ``delay`` seconds, instead of any timer of its kind; it
        is listed as due at ``due`` (else now plus ``delay``) until it fires or is
        cancelled."""
        self.cancel(kind)
        when = self._scheduler.now() + max(0.0, delay) if due is None else due

        def fire() -> None:
            self._armed.pop(kind, None)  # fired: no longer armed, whatever it does next
            callback()

        self._armed[kind] = (self._scheduler.call_later(delay, fire), when)

    def hold(self, kind: TimerKind, handle: Handle, due: float) -> None:
        """Keep a handle made elsewhere (a bot's decision being thought), instead of any
        timer of its kind; its owner calls ``forget`` when it answers."""
        self.cancel(kind)
        self._armed[kind] = (handle, due)

    def forget(self, kind: TimerKind) -> None:
        """A held handle answered: it is no longer armed (nothing is cancelled)."""
        self._armed.pop(kind, None)

    def cancel(self, kind: TimerKind) -> None:
        """Cancel the timer of ``kind``, if one is armed."""
        armed = self._armed.pop(kind, None)
        if armed is not None:
            armed[0].cancel()

    def cancel_all(self) -> None:
        for kind in list(self._armed):
            self.cancel(kind)

    def is_armed(self, kind: TimerKind) -> bool:
        return kind in self._armed

    def due(self, kind: TimerKind) -> float | None:
        """When the timer of ``kind`` falls due; None when none is armed."""
        armed = self._armed.get(kind)
        return armed[1] if armed is not None else None

    def armed(self) -> list[tuple[TimerKind, float]]:
        """The timers armed now, (kind, due), in ``TimerKind``'s order."""
        return [(kind, self._armed[kind][1]) for kind in TimerKind if kind in self._armed]

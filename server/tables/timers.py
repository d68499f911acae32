"""A table's timers (like Colyseus's per-room ``Clock``): at most one handle of each kind,
with the time it falls due; armed, cancelled one by one or all at once, and listed. What
happens when one fires is the table's business: here is only when, and which. A table's turn
clock (``TurnClock``) keeps the two times it shows and logs, a turn's deadline and a pause's
end, each with its timer; ``AwayTurns`` says when the turns of away seats play."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from enum import StrEnum
from typing import Protocol

from server import games
from server.games import GameEvent, GameModule, GameRules, GameState
from server.tables.clock import Handle, Scheduler

AWAY_GRACE = 2.0  # seconds an away person who is connected gets to act before their turn plays


class TimerKind(StrEnum):
    """The timers a table keeps, one of each at most, listed in this order."""

    TURN = "turn"  # the deadline of the people who must act
    PAUSE = "pause"  # the end of a pause between tricks or hands
    BOT = "bot"  # the next bot move (a step due, or a decision being thought)
    AWAY = "away"  # away seats' turns, played at once (or after a connected one's grace)
    RESERVATION = "reservation"  # the first quick-match reservation not taken up falls due
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

    def now(self) -> float:
        return self._scheduler.now()

    def hold(self, kind: TimerKind, handle: Handle) -> None:
        """Keep a handle made elsewhere (a bot's decision being thought), due now, instead
        of any timer of its kind; its owner calls ``forget`` when it answers."""
        self.cancel(kind)
        self._armed[kind] = (handle, self._scheduler.now())

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


class Watchdog:
    """A table's watchdog (the WATCHDOG timer): a waiting table nobody is at expires after
    --waiting-table-ttl; a game no person has acted in for --abandon-after seconds ends. It
    keeps when a person last acted."""

    __slots__ = ("_abandon_after", "_timers", "_ttl", "last_person_action")

    def __init__(self, timers: TableTimers, ttl: float, abandon_after: float, now: float
                 ) -> None:
        self._timers, self._ttl, self._abandon_after = timers, ttl, abandon_after
        self.last_person_action = now

    def person_acted(self) -> None:
        """A person acted (or the game started): the idle game's clock starts over."""
        self.last_person_action = self._timers.now()

    def arm_waiting(self, on_idle: Callable[[], None]) -> None:
        self._timers.arm(TimerKind.WATCHDOG, self._ttl, on_idle)

    def arm_game(self, on_idle: Callable[[], None]) -> None:
        due = self.last_person_action + self._abandon_after
        self._timers.arm(TimerKind.WATCHDOG, max(0.0, due - self._timers.now()), on_idle)

    def is_idle(self) -> bool:
        return self._timers.now() - self.last_person_action >= self._abandon_after

    def cancel(self) -> None:
        self._timers.cancel(TimerKind.WATCHDOG)


class AwaySeat(Protocol):
    is_away: bool
    has_streamed: bool


class AwayTurns:
    """When the turns of away seats play (docs/RULES.md, "Away seats"): at once while the
    person has no stream (no clock shown), within ``AWAY_GRACE`` while they are connected
    (time to act and be back: the turn's deadline, when all who must act are away). Away:
    marked so (two timeouts in a row, or played this way before), or its person had a
    stream and has none now."""

    __slots__ = ("_is_connected", "_on_due", "_seats", "_timers")

    def __init__(self, timers: TableTimers, seats: Sequence[AwaySeat],
                 is_connected: Callable[[int], bool], on_due: Callable[[], None]) -> None:
        self._timers, self._seats = timers, seats
        self._is_connected, self._on_due = is_connected, on_due

    def due(self, people: list[int]) -> list[int]:
        """The seats of ``people`` (to act now) whose turns play this way."""
        return [n for n in people if self._seats[n].is_away
                or (self._seats[n].has_streamed and not self._is_connected(n))]

    def arm(self, people: list[int], *, is_on: bool) -> float | None:
        """Arm the away seats' play among ``people`` (``is_on``: live, and the turn has a
        clock). When all of them are away: the longest the turn may take (0: played at once,
        no clock; else the turn's own deadline plays them); None when the turn keeps its
        clock (some seats, or none, are played sooner on their own timer)."""
        self._timers.cancel(TimerKind.AWAY)
        seats = self.due(people) if is_on else []
        if not seats:
            return None
        for number in seats:  # shown away from now on (the log's TimedOut entry says so)
            self._seats[number].is_away = True
        wait = AWAY_GRACE if all(self._is_connected(n) for n in seats) else 0.0
        if wait and len(seats) == len(people):
            return wait
        self._timers.arm(TimerKind.AWAY, wait, self._on_due)
        return 0.0 if len(seats) == len(people) else None


class TurnClock:
    """The deadline of the people who must act and the end of a pause, with their timers
    (``on_deadline`` and ``on_pause_end`` run when they fire). While a table replays its log
    (``is_live`` false) it arms nothing: the stored times follow in the log. Which turn it is,
    its timeout and the pauses are the rules' (``module``, the game's; None: the default
    game's)."""

    __slots__ = ("_module", "_on_deadline", "_on_pause_end", "_rules", "_timers", "_turn",
                 "deadline", "paused_until")

    def __init__(self, timers: TableTimers, rules: GameRules, on_deadline: Callable[[], None],
                 on_pause_end: Callable[[], None], module: GameModule | None = None) -> None:
        self._timers = timers
        self._rules = rules
        self._module = module if module is not None else games.get()
        self._on_deadline = on_deadline
        self._on_pause_end = on_pause_end
        self.paused_until: float | None = None
        self.deadline: float | None = None
        self._turn: Hashable | None = None  # the turn the deadline is for

    def pause_after(self, game: GameState, events: list[GameEvent]) -> float:
        """The pause the rules give after ``events`` (a hand scored, a trick won): seconds."""
        return self._module.pause_after(self._rules, game, events)

    def start_pause(self, now: float, seconds: float, *, is_live: bool) -> float:
        """A pause from ``now``: no deadline runs meanwhile; when it ends."""
        self.clear_deadline()
        self.paused_until = now + seconds
        if is_live:
            self._timers.arm(TimerKind.PAUSE, seconds, self._on_pause_end,
                             due=self.paused_until)
        return self.paused_until

    def next_deadline(self, game: GameState, now: float, *, is_live: bool,
                      within: float | None = None) -> float | None:
        """The people to act get their deadline (``within`` seconds at most): a new one to
        log, or None when the same turn's stands (another seat passed), the rules give no
        timeout, or not live."""
        turn, timeout = self._module.turn(self._rules, game)
        if timeout and within is not None:
            timeout = min(timeout, within)
        if turn == self._turn:
            return None
        self._timers.cancel(TimerKind.TURN)
        self._turn, self.deadline = turn, None
        if not timeout or not is_live:
            return None
        self.deadline = now + timeout
        self._timers.arm(TimerKind.TURN, timeout, self._on_deadline, due=self.deadline)
        return self.deadline

    def timeout_of(self, game: GameState) -> float:
        """The time the rules give the turn now (0: no limit)."""
        return self._module.turn(self._rules, game)[1]

    def clear_deadline(self) -> None:
        self._timers.cancel(TimerKind.TURN)
        self.deadline = self._turn = None

    def timed_out(self) -> None:
        """The deadline passed (its timer fired, or its entry replays): the next turn gets
        a new one."""
        self.deadline = self._turn = None

    def resume(self, now: float) -> None:
        """After a replay: the pause's end or the deadline arms from its stored time (at once
        when past)."""
        if self.paused_until is not None:
            self._timers.arm(TimerKind.PAUSE, self.paused_until - now, self._on_pause_end,
                             due=self.paused_until)
        elif self.deadline is not None:
            self._timers.arm(TimerKind.TURN, self.deadline - now, self._on_deadline,
                             due=self.deadline)

    def listed(self, game: GameState | None, people_among: Callable[[Iterable[int]], list[int]],
               now: float) -> list[tuple[str, float, list[int]]]:
        """The timers armed now: (kind, when, seats) for an operator's eyes: the turn's
        (``people_among`` the seats to act are its seats), the pause's, a bot's move (due
        now), the away seats' play, the first reservation to fall due and the watchdog."""
        out: list[tuple[str, float, list[int]]] = []
        if self.deadline is not None and game is not None and not game.is_over:
            out.append(("turn", self.deadline, people_among(game.to_act())))
        if self.paused_until is not None:
            out.append(("pause", self.paused_until, []))
        for kind, due in self._timers.armed():
            if kind is not TimerKind.TURN and kind is not TimerKind.PAUSE:
                out.append((kind.value, now if kind is TimerKind.BOT else due, []))
        return out

    def stop(self) -> None:
        """The game ended: no pause, no deadline."""
        self.clear_deadline()
        self.paused_until = None

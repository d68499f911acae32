"""A table's timers on a manual clock: one of each kind at most, each listed with its due
time until it fires or is cancelled; and the turn's clock (a deadline per turn, a pause that
stops it, nothing armed while a log replays, times resumed after a replay)."""

from __future__ import annotations

from functools import partial

from engine import Game, Phase, Rules
from server.tables.clock import ManualScheduler
from server.tables.timers import TableTimers, TimerKind, TurnClock


def test_a_timer_fires_once_at_its_time_and_is_then_no_longer_armed() -> None:
    clock = ManualScheduler(start=100.0)
    timers = TableTimers(clock)
    fired: list[float] = []
    timers.arm(TimerKind.WATCHDOG, 5.0, lambda: fired.append(clock.now()))
    assert timers.is_armed(TimerKind.WATCHDOG) and timers.due(TimerKind.WATCHDOG) == 105.0
    assert timers.armed() == [(TimerKind.WATCHDOG, 105.0)]
    clock.advance(4.9)
    assert fired == []
    clock.advance(1.0)
    assert fired == [105.0]
    assert not timers.is_armed(TimerKind.WATCHDOG) and timers.armed() == []
    clock.advance(100.0)
    assert fired == [105.0]


def test_a_timer_sees_itself_gone_when_it_fires_so_it_can_arm_its_kind_again() -> None:
    clock = ManualScheduler(start=0.0)
    timers = TableTimers(clock)
    fired: list[float] = []

    def again() -> None:
        fired.append(clock.now())
        if len(fired) < 3:
            timers.arm(TimerKind.BOT, 1.0, again)
    timers.arm(TimerKind.BOT, 1.0, again)
    clock.advance(10.0)
    assert fired == [1.0, 2.0, 3.0] and not timers.is_armed(TimerKind.BOT)


def test_arming_a_kind_again_replaces_its_timer() -> None:
    clock = ManualScheduler(start=0.0)
    timers = TableTimers(clock)
    fired: list[str] = []
    timers.arm(TimerKind.TURN, 10.0, lambda: fired.append("first"))
    timers.arm(TimerKind.TURN, 20.0, lambda: fired.append("second"), due=25.0)
    assert timers.armed() == [(TimerKind.TURN, 25.0)]  # listed as due when asked
    clock.advance(30.0)
    assert fired == ["second"]


def test_kinds_are_independent_and_listed_in_their_order() -> None:
    clock = ManualScheduler(start=0.0)
    timers = TableTimers(clock)
    fired: list[TimerKind] = []
    for kind, delay in ((TimerKind.WATCHDOG, 4.0), (TimerKind.BOT, 1.0),
                        (TimerKind.TURN, 3.0)):
        timers.arm(kind, delay, partial(fired.append, kind))
    assert [k for k, _ in timers.armed()] == [TimerKind.TURN, TimerKind.BOT,
                                              TimerKind.WATCHDOG]
    timers.cancel(TimerKind.TURN)
    timers.cancel(TimerKind.PAUSE)  # none armed: nothing happens
    clock.advance(10.0)
    assert fired == [TimerKind.BOT, TimerKind.WATCHDOG]


def test_cancel_all_stops_every_timer() -> None:
    clock = ManualScheduler(start=0.0)
    timers = TableTimers(clock)
    fired: list[TimerKind] = []
    for kind in TimerKind:
        timers.arm(kind, 1.0, partial(fired.append, kind))
    timers.cancel_all()
    assert timers.armed() == [] and clock.pending() == 0
    clock.advance(5.0)
    assert fired == []


class Thinking:
    """A handle made elsewhere (a bot's decision being thought)."""

    def __init__(self) -> None:
        self.is_cancelled = False

    def cancel(self) -> None:
        self.is_cancelled = True


def test_a_held_handle_is_listed_until_forgotten_or_cancelled() -> None:
    clock = ManualScheduler(start=50.0)
    timers = TableTimers(clock)
    first, second = Thinking(), Thinking()
    timers.hold(TimerKind.BOT, first)
    assert timers.armed() == [(TimerKind.BOT, 50.0)]
    timers.forget(TimerKind.BOT)  # it answered: nothing to cancel
    assert not timers.is_armed(TimerKind.BOT) and not first.is_cancelled
    timers.hold(TimerKind.BOT, second)
    timers.arm(TimerKind.BOT, 0.0, lambda: None)  # a new move instead of the decision
    assert second.is_cancelled and timers.due(TimerKind.BOT) == 50.0


def game_passing() -> Game:
    game = Game(Rules(), 1)
    assert game.phase is Phase.PASSING
    return game


def new_clock(clock: ManualScheduler, fired: list[str], rules: Rules | None = None
              ) -> tuple[TableTimers, TurnClock]:
    timers = TableTimers(clock)
    turn = TurnClock(timers, rules or Rules(pass_timeout=30.0, hand_pause=2.0),
                     lambda: fired.append("deadline"), lambda: fired.append("pause end"))
    return timers, turn


def test_a_turn_gets_one_deadline_that_fires_when_it_passes() -> None:
    clock = ManualScheduler(start=0.0)
    fired: list[str] = []
    timers, turn = new_clock(clock, fired)
    game = game_passing()
    assert turn.next_deadline(game, clock.now(), is_live=True) == 30.0
    assert turn.deadline == 30.0 and timers.due(TimerKind.TURN) == 30.0
    clock.advance(10.0)
    # The same turn (another seat passed): the deadline stands, nothing new to log.
    assert turn.next_deadline(game, clock.now(), is_live=True) is None
    assert turn.deadline == 30.0
    clock.advance(25.0)
    assert fired == ["deadline"]
    turn.timed_out()
    assert turn.deadline is None
    assert turn.next_deadline(game, clock.now(), is_live=True) == 65.0  # a new one


def test_no_timeout_in_the_rules_means_no_deadline() -> None:
    clock = ManualScheduler(start=0.0)
    fired: list[str] = []
    timers, turn = new_clock(clock, fired, Rules(pass_timeout=0.0))
    assert turn.next_deadline(game_passing(), clock.now(), is_live=True) is None
    assert turn.deadline is None and timers.armed() == []


def test_a_pause_stops_the_deadline_and_ends_at_its_time() -> None:
    clock = ManualScheduler(start=0.0)
    fired: list[str] = []
    timers, turn = new_clock(clock, fired)
    turn.next_deadline(game_passing(), clock.now(), is_live=True)
    assert turn.start_pause(clock.now(), 2.0, is_live=True) == 2.0
    assert turn.deadline is None and turn.paused_until == 2.0
    assert timers.armed() == [(TimerKind.PAUSE, 2.0)]
    clock.advance(100.0)
    assert fired == ["pause end"]


def test_replaying_arms_nothing_and_resume_arms_the_stored_times() -> None:
    clock = ManualScheduler(start=0.0)
    fired: list[str] = []
    timers, turn = new_clock(clock, fired)
    game = game_passing()
    assert turn.next_deadline(game, clock.now(), is_live=False) is None  # its entry follows
    assert turn.start_pause(clock.now(), 2.0, is_live=False) == 2.0
    assert timers.armed() == []
    turn.paused_until = None  # the log: the pause ended, then a deadline was set
    turn.deadline = 40.0
    clock.advance(50.0)
    turn.resume(clock.now())  # past: at once
    assert timers.armed() == [(TimerKind.TURN, 40.0)]
    clock.advance(0.0)
    assert fired == ["deadline"]


def test_the_end_of_the_game_stops_the_clock() -> None:
    clock = ManualScheduler(start=0.0)
    fired: list[str] = []
    timers, turn = new_clock(clock, fired)
    turn.next_deadline(game_passing(), clock.now(), is_live=True)
    turn.stop()
    assert (turn.deadline, turn.paused_until, timers.armed()) == (None, None, [])
    clock.advance(100.0)
    assert fired == []

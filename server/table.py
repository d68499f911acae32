"""A table's state machine: seats and tokens, the game, turns, pauses, deadlines and bots.

Everything here runs on the server's one event loop and never awaits while it changes the
table, so a table's moves are strictly ordered. Work comes in *steps*: one player's request,
one timer (a deadline, a pause's end), or one bot move. A step does a bounded amount of game
work (one action and what the engine plays at once for leavers), never waits, and ends by
staging its events, each carrying the view after the whole step, for the watchers; they see
them once the store has committed the step. Bots move in steps of their own, scheduled on
the loop, so no request or timer ever plays a game through.

Every step that changes the table writes typed entries to the table's log
(``server.log_entries``); recovery replays them through the same code with ``is_replaying``
set, which schedules nothing, logs nothing, counts nothing and sends nothing.
"""

from __future__ import annotations

import logging
import secrets
import zlib
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog
from copas.v1 import copas_pb2

import ai
from engine import (
    Action,
    Card,
    EngineError,
    Game,
    GameOver,
    HandScored,
    Leave,
    MoonShot,
    Phase,
    PlayerLeft,
    Rules,
    TrickWon,
)
from engine import actions as ev
from engine.record import result_of, to_record
from server import codec, table_view
from server.clock import Handle
from server.errors import ServiceError, from_engine
from server.fanout import Fanout, Watcher
from server.idempotency import Remembered, check_reuse, request_key, seal, unseal
from server.log_entries import (
    Acted,
    DeadlineSet,
    Entry,
    Joined,
    PauseEnded,
    PauseStarted,
    TimedOut,
    dumps,
)

if TYPE_CHECKING:
    from server.registry import TableManager

log = structlog.get_logger("copas.table")

REQUEST_MEMORY = 256  # successful request_ids remembered per seat
AUTO_POLICY = "auto"  # the timeout rules' choices (RULES.md), played at once
JOIN_SCOPE = "join"  # JoinTable request ids are global: a quick match does not know its table


class Seat:
    """One seat: who holds it (a bot, or a person known by their token's hash)."""

    __slots__ = ("holds_slot", "is_bot", "is_taken", "join_key", "log_n", "name", "number",
                 "requests", "token_hash")

    def __init__(self, number: int) -> None:
        self.number = number
        self.name = ""
        self.is_taken = False
        self.is_bot = False
        self.token_hash = ""
        self.log_n = 0  # the position of its join in the table's log
        self.join_key = ""
        self.holds_slot = False  # counts against --max-players
        self.requests: OrderedDict[str, Remembered] = OrderedDict()


class ReplayMismatch(ValueError):
    """A log entry does not fit the table it is replayed into."""


class Table:
    def __init__(self, manager: TableManager, *, table_id: str, name: str, preset: str,
                 rules: Rules, seed: int | str, bot_seats: int, order: int, created: float,
                 request_key: str = "", fingerprint: str = "",
                 bot_policy: str = "auto") -> None:
        self.manager = manager
        self.config = manager.config
        self.metrics = manager.metrics
        self.storage = manager.storage
        self.scheduler = manager.scheduler
        self.id = table_id
        self.name = name
        self.preset = preset
        self.rules = rules
        self.rules_pb = codec.rules_to_pb(rules)
        self.view_cache = table_view.ViewCache(self.rules_pb)
        self.seed = seed
        self.order = order
        self.created = created
        self.bot_seats = bot_seats
        self.bot_policy = bot_policy
        self.request_key = request_key  # the CreateTable request that made it, if any
        self.fingerprint = fingerprint
        self.seats = [Seat(i) for i in range(rules.players)]
        for seat in self.seats[rules.players - bot_seats:]:
            seat.is_taken, seat.is_bot, seat.name = True, True, f"Bot {seat.number + 1}"
        self.has_people = bot_seats < rules.players
        self.join_requests: dict[str, tuple[Remembered, str]] = {}  # key -> (seat, sealed)
        self.game: Game | None = None
        self.sequence = 0
        self.history: deque[copas_pb2.TableEvent] = deque(maxlen=self.config.history)
        self.fanout = Fanout()
        self.paused_until: float | None = None
        self.deadline: float | None = None
        self._deadline_key: tuple[Any, ...] | None = None
        self._timer: Handle | None = None  # a pause's end or a deadline
        self._bot_timer: Handle | None = None  # the next bot move
        self._watchdog: Handle | None = None  # a waiting table's expiry, an idle game's end
        self.finished_at: float | None = None
        self.last_person_action = created
        self.is_replaying = False
        self._replay_position = 0
        self.is_released = False
        self.shared_lobby_key: tuple[object, ...] | None = None  # last summary in the database
        self._step: list[copas_pb2.TableEvent] = []
        self._step_engine: list[ev.Event] = []
        self.log = log.bind(table_id=table_id)

    def meta(self) -> dict[str, Any]:
        """What a restarted server needs to rebuild this table from its log."""
        return {"name": self.name, "preset": self.preset, "rules": self.rules.to_dict(),
                "seed": self.seed, "bots": self.bot_seats, "order": self.order,
                "rk": self.request_key, "fp": self.fingerprint, "bot_policy": self.bot_policy}

    # ------------------------------------------------------------ reading

    @property
    def is_finished(self) -> bool:
        return self.game is not None and self.game.is_over

    @property
    def is_waiting(self) -> bool:
        return self.game is None

    def has_free_seat(self) -> bool:
        return any(not s.is_taken for s in self.seats)

    def is_connected(self, seat: int) -> bool:
        token_hash = self.seats[seat].token_hash
        return bool(token_hash) and self.fanout.streams_of(token_hash) > 0

    def people_connected(self) -> int:
        return sum(self.is_connected(s.number) for s in self.seats if not s.is_bot)

    def summary(self) -> copas_pb2.TableSummary:
        return table_view.summary(self)

    def view(self, seat: int | None) -> copas_pb2.TableView:
        return table_view.for_seat(self, seat)

    def snapshot(self, watcher: Watcher, after_sequence: int) -> copas_pb2.TableEvent:
        """A snapshot for ``watcher``: the current view plus the events it missed."""
        watcher.clear()  # the snapshot supersedes anything queued
        watcher.needs_snapshot = False
        watcher.seen = self.sequence
        snap = copas_pb2.Snapshot()
        if after_sequence > 0:
            missed = [e for e in self.history if e.sequence > after_sequence]
            oldest = self.history[0].sequence if self.history else self.sequence + 1
            snap.has_gap = after_sequence + 1 < oldest and after_sequence < self.sequence
            snap.missed_events.extend(missed)
        return copas_pb2.TableEvent(
            sequence=self.sequence, time=table_view.timestamp(self.scheduler.now()),
            snapshot=snap, view=self.view(watcher.seat))

    # ------------------------------------------------------------ log and events

    def _log(self, entry: Entry) -> int:
        """Queue a log entry (not while replaying: it is already there); its position."""
        if self.is_replaying:
            return self._replay_position
        return self.storage.append(self.id, dumps(entry))

    def _emit(self, **kind: Any) -> None:
        self.sequence += 1
        message = copas_pb2.TableEvent(
            sequence=self.sequence, time=table_view.timestamp(self.scheduler.now()), **kind)
        self.history.append(message)
        self._step.append(message)

    def _emit_engine(self, events: list[ev.Event], phase_before: Phase | None = None) -> None:
        """Sequence the engine's events; ``phase_before`` is where a leave happened."""
        n = len(self.seats)
        for event in events:
            kind = codec.event_to_pb(event, n)
            if phase_before is not None and "player_left" in kind:
                kind["player_left"].phase = codec.PHASE_TO_PB[phase_before]
            self._emit(**kind)
        self._step_engine.extend(events)

    def _end_step(self) -> None:
        """Stage the step's events, with the view after the whole step, for the watchers;
        the store commits them first. Replay only forgets them."""
        events, self._step = self._step, []
        engine_events, self._step_engine = self._step_engine, []
        if not events:
            return
        events[-1].is_last_in_action = True
        if self.is_replaying:
            return
        is_debug = self.log.is_enabled_for(logging.DEBUG)
        for event in engine_events:
            if is_debug:
                self.log.debug("game_event", kind=type(event).__name__, **_public_fields(event))
            if isinstance(event, MoonShot):
                self.metrics.moons.inc()
            elif isinstance(event, GameOver):
                self.metrics.games_finished.labels(event.reason.value.lower()).inc()
            elif isinstance(event, PlayerLeft):
                self.log.debug("player_left", seat=event.seat)
        self.metrics.events.inc(len(events))
        seats = self.fanout.seats_watching()
        if seats:  # nobody watching: no views to build
            shared = table_view.public_bytes(self)
            self.fanout.stage([(e.sequence, e.SerializeToString()) for e in events],
                              {seat: table_view.view_bytes(self, shared, seat)
                               for seat in seats})
        self.manager.table_changed(self)

    def _timer_step(self, step: Callable[[], None]) -> Callable[[], None]:
        """A timer callback that runs ``step`` as a step of its own."""
        def run() -> None:
            if self.is_released:
                return
            try:
                step()
            except ServiceError:
                pass  # the store failed: the server is stopping, the log holds the truth
            except Exception:  # a bug must not kill the loop; the table stays as it is
                self.log.exception("table_step_failed", step=step.__name__)
            finally:
                self._end_step()
        return run

    # ------------------------------------------------------------ seats and watchers

    def join(self, name: str, seat_number: int | None, request_id: str = "",
             fingerprint: str = "") -> tuple[int, str]:
        """Seat a person; returns (seat, token). A retry with the same request_id gets the
        same seat and token."""
        key = request_key(JOIN_SCOPE, request_id) if request_id else ""
        if key:
            known = self.join_requests.get(key)
            if known is not None:
                check_reuse(known[0], fingerprint)
                return int(known[0].answer), unseal(known[1], JOIN_SCOPE, request_id)
        if self.game is not None:
            raise ServiceError.exhausted("the game has started", "TABLE_FULL")
        if seat_number is not None:
            if not 0 <= seat_number < len(self.seats):
                raise ServiceError.invalid(f"seat must be 0..{len(self.seats) - 1}",
                                           "INVALID_SEAT")
            if self.seats[seat_number].is_taken:
                raise ServiceError.precondition(f"seat {seat_number} is taken", "SEAT_TAKEN")
            seat = self.seats[seat_number]
        else:
            free = [s for s in self.seats if not s.is_taken]
            if not free:
                raise ServiceError.exhausted("the table is full", "TABLE_FULL")
            seat = free[0]
        self.manager.check_writable()
        self.manager.check_room_for_player()
        token = secrets.token_urlsafe(24)
        sealed = seal(token, JOIN_SCOPE, request_id) if key else ""
        try:
            self._seat_person(Joined(self.sequence, seat.number, name,
                                     self.manager.hash_token(token), key, fingerprint, sealed))
        finally:
            self._end_step()
        return seat.number, token

    def _seat_person(self, entry: Joined) -> None:
        """Seat a person (only the hash of their token is kept); start when full."""
        seat = self.seats[entry.seat]
        if seat.is_taken:
            raise ReplayMismatch(f"seat {entry.seat} is taken")
        seat.is_taken, seat.name, seat.token_hash = True, entry.name, entry.token_hash
        seat.log_n = self._log(entry)
        seat.holds_slot = True
        self.manager.take_slot()
        if entry.request_key:
            seat.join_key = entry.request_key
            self.join_requests[entry.request_key] = (
                Remembered(entry.fingerprint, entry.seat), entry.sealed_token)
            self.manager.index_join(entry.request_key, self.id)
        self.manager.register_token(entry.token_hash, self.id, entry.seat)
        self._emit(player_joined=copas_pb2.PlayerJoined(seat=entry.seat, display_name=entry.name))
        if not self.is_replaying:
            self.log.debug("player_joined", seat=entry.seat)
        if all(s.is_taken for s in self.seats):
            self.start()

    def _give_up_seat(self, seat_number: int, request_id: str = "") -> int:
        """A person leaves before the game starts: the seat is free again, their token and
        its streams end, and their join leaves the log."""
        seat = self.seats[seat_number]
        self.storage.delete_entry(self.id, seat.log_n)
        self.manager.forget_token(seat.token_hash)
        self.fanout.close_token(seat.token_hash, ServiceError.unauthenticated(
            "you left this table: your player token is no longer valid", "TOKEN_REVOKED"))
        self.join_requests.pop(seat.join_key, None)
        self.manager.forget_join(seat.join_key)
        if seat.holds_slot:
            self.manager.give_slot()
        self.seats[seat_number] = Seat(seat_number)
        self._emit(player_left=copas_pb2.PlayerLeft(
            seat=seat_number, hand_number=-1, phase=copas_pb2.PHASE_WAITING_FOR_PLAYERS))
        self.manager.seat_given_up(seat.token_hash, seat.join_key, request_id, self.sequence)
        self._arm_watchdog()
        return self.sequence

    def add_watcher(self, seat: int | None, token_hash: str | None) -> Watcher:
        config = self.config
        if token_hash is None:
            if self.fanout.spectators() >= config.max_watchers_per_table:
                raise ServiceError.exhausted("too many spectators on this table",
                                             "TOO_MANY_WATCHERS")
        elif self.fanout.streams_of(token_hash) >= config.max_streams_per_token:
            raise ServiceError.exhausted(
                f"at most {config.max_streams_per_token} streams per player; close one first",
                "TOO_MANY_STREAMS")
        watcher = Watcher(seat, token_hash, config.watcher_queue, config.watcher_buffer_bytes)
        self.fanout.add(watcher)
        if seat is not None and token_hash is not None \
                and self.fanout.streams_of(token_hash) == 1:
            self._cancel_watchdog_if_waiting()
            self._emit(player_connection=copas_pb2.PlayerConnection(seat=seat,
                                                                    is_connected=True))
            self._end_step()
        return watcher

    def remove_watcher(self, watcher: Watcher) -> None:
        if not self.fanout.remove(watcher) or self.is_released:
            return
        token_hash = watcher.token_hash
        if watcher.seat is not None and token_hash is not None \
                and self.fanout.streams_of(token_hash) == 0 \
                and self.seats[watcher.seat].token_hash == token_hash \
                and self.manager.is_accepting:
            self._emit(player_connection=copas_pb2.PlayerConnection(seat=watcher.seat,
                                                                    is_connected=False))
            self._arm_watchdog()
            self._end_step()

    # ------------------------------------------------------------ actions

    def act(self, seat: int, action: Action, request_id: str = "", fingerprint: str = ""
            ) -> int:
        """Apply a person's action; return the sequence of its first event. A retry with
        the same request_id and content gets the first answer; refusals are not kept.

        :raises ServiceError: the action is malformed or illegal now (nothing changed).
        """
        memory = self.seats[seat].requests
        if request_id:
            known = check_reuse(memory.get(request_id), fingerprint)
            if known is not None:
                return int(known.answer)
        kind = type(action).__name__
        try:
            first = self._person_acts(seat, action, request_id, fingerprint)
        except ServiceError as error:
            if not self.is_replaying:
                self.metrics.actions.labels(kind, error.reason).inc()
            raise
        finally:
            self._end_step()
        if not self.is_replaying:
            self.metrics.actions.labels(kind, "OK").inc()
        if request_id and self.seats[seat].is_taken:
            memory[request_id] = Remembered(fingerprint, first)
            while len(memory) > REQUEST_MEMORY:
                memory.popitem(last=False)
        return first

    def _person_acts(self, seat: int, action: Action, request_id: str, fingerprint: str
                     ) -> int:
        game = self.game
        if game is None:
            if isinstance(action, Leave):
                self.manager.check_writable()
                return self._give_up_seat(seat, request_id)
            raise ServiceError.precondition("the game has not started: seats are still free",
                                            "GAME_NOT_STARTED")
        is_leave = isinstance(action, Leave)
        if not game.is_over:
            if game.has_left[seat] and not is_leave:
                raise ServiceError.precondition("you have left this game; the server plays "
                                                "your seat", "SEAT_HAS_LEFT")
            if self.paused_until is not None and not is_leave:
                raise ServiceError.precondition("the table is paused; wait for play to resume",
                                                "TABLE_PAUSED")
        self.manager.check_writable()
        seq = self.sequence
        phase_before = game.phase
        try:
            events = game.apply(action)
        except EngineError as error:
            raise from_engine(error) from None
        self._log(Acted(seq, action, "player", request_id, fingerprint))
        self.last_person_action = self.scheduler.now()
        if is_leave:
            if not self.is_replaying:
                self.metrics.leavers.inc()
            self._free_slot(seat)
        self._emit_engine(events, phase_before)
        self._advance(events)
        return seq + 1

    def _free_slot(self, seat_number: int) -> None:
        seat = self.seats[seat_number]
        if seat.holds_slot:
            seat.holds_slot = False
            self.manager.give_slot()

    def start(self) -> None:
        self.game = Game(self.rules, self.seed)
        self._cancel_watchdog()
        self.last_person_action = self.scheduler.now()
        if not self.is_replaying:
            self.log.debug("game_started")
        self._emit(game_started=copas_pb2.GameStarted())
        events = list(self.game.started_events)
        self._emit_engine(events)
        self._advance(events)
        self._arm_watchdog()

    def _advance(self, events: list[ev.Event]) -> None:
        """After an action: end the game, start a pause, schedule a bot, or give the people
        who must act their deadline."""
        game = self.game
        assert game is not None
        if game.is_over:
            self._finish()
            return
        if self.has_people and all(s.is_bot or game.has_left[s.number] for s in self.seats):
            self._emit_engine(game.abandon())  # no person is left to play for
            self._finish()
            return
        if self.paused_until is not None:
            return  # a leave during a pause: the pause stands and its end goes on
        pause = self._pause_after(events)
        if pause:
            self._start_pause(pause)
            return
        to_act = game.to_act()
        if any(self.seats[s].is_bot for s in to_act):
            self._schedule_bot()
            if any(not self.seats[s].is_bot for s in to_act):
                self._arm_deadline()  # people pass while bots do: their clock runs
            else:
                self._clear_deadline()
            return
        self._arm_deadline()

    def _schedule_bot(self) -> None:
        if self.is_replaying:
            return
        if self._bot_timer is not None:
            self._bot_timer.cancel()  # a pending step, or a decision being thought
        self._bot_timer = self.scheduler.call_later(
            0.0 if self.has_people else self.config.bot_table_pace,
            self._timer_step(self._bot_moves))

    @property
    def is_bot_step_pending(self) -> bool:
        return self._bot_timer is not None

    def _bot_moves(self) -> None:
        self._bot_timer = None
        game = self.game
        if game is None or game.is_over or self.paused_until is not None:
            return
        bot = next((s for s in game.to_act() if self.seats[s].is_bot), None)
        if bot is None:
            return
        self.manager.check_writable()
        thinker = self.manager.bots
        if self.bot_policy == AUTO_POLICY or thinker is None:
            self._apply_automatic(Acted(self.sequence, game.auto_action(bot), "bot"))
            return
        # The bot thinks in a worker process; the table goes on meanwhile (a leave, a
        # timeout). Its move is applied only if the table is still where it thought.
        key = self._decision_key(bot)
        seed = zlib.crc32(f"{self.seed}:{self.sequence}".encode())
        self._bot_timer = thinker.think(
            ai.info_from_game(game, bot), self.bot_policy, seed,
            lambda action: self._timer_step(lambda: self._bot_decided(bot, key, action))())

    def _decision_key(self, seat: int) -> tuple[object, ...]:
        game = self.game
        assert game is not None
        return (game.phase, game.hand_number, game.trick_number, len(game.trick_cards),
                seat in game.to_act(), self.paused_until)

    def _bot_decided(self, seat: int, key: tuple[object, ...], action: Action | None) -> None:
        """A bot's decision came back: apply it if the table is still where it was (else
        think again); None (no answer in time) plays the automatic choice."""
        self._bot_timer = None
        game = self.game
        if game is None or game.is_over or self.paused_until is not None \
                or self._decision_key(seat) != key:
            if game is not None and not game.is_over and self.paused_until is None \
                    and any(self.seats[s].is_bot for s in game.to_act()):
                self._schedule_bot()
            return
        self.manager.check_writable()
        if action is None or action.seat != seat:
            action = game.auto_action(seat)
        try:
            self._apply_automatic(Acted(self.sequence, action, "bot"))
        except EngineError:  # a policy's mistake must not stop the table
            self.log.error("bot_move_refused", seat=seat)
            self._apply_automatic(Acted(self.sequence, game.auto_action(seat), "bot"))

    def _apply_automatic(self, entry: Acted) -> None:
        game = self.game
        assert game is not None
        events = game.apply(entry.action, is_automatic=True)
        self._log(entry)
        self._emit_engine(events)
        self._advance(events)

    def _pause_after(self, events: list[ev.Event]) -> float:
        game = self.game
        assert game is not None
        if any(isinstance(e, HandScored) for e in events):
            return self.rules.hand_pause
        if any(isinstance(e, TrickWon) for e in events) and game.phase is Phase.PLAYING:
            return self.rules.trick_pause
        return 0.0

    def _start_pause(self, seconds: float) -> None:
        self._clear_deadline()
        self.paused_until = self.scheduler.now() + seconds
        self._log(PauseStarted(self.sequence, self.paused_until))
        self._set_timer(seconds, self._timer_step(self._end_pause))

    def _end_pause(self) -> None:
        self.manager.check_writable()
        self._resume(PauseEnded(self.sequence))

    def _resume(self, entry: PauseEnded) -> None:
        self._log(entry)
        self.paused_until = None
        self._emit(pause_ended=copas_pb2.PauseEnded())
        self._advance([])

    def _deadline_for(self) -> tuple[tuple[Any, ...], float]:
        game = self.game
        assert game is not None
        if game.phase is Phase.PASSING:
            return (game.phase, game.hand_number), self.rules.pass_timeout
        if game.phase is Phase.PLAYING:
            return ((game.phase, game.hand_number, game.trick_number, len(game.trick_cards)),
                    self.rules.play_timeout)
        return (game.phase, game.hand_number), self.rules.moon_timeout

    def _arm_deadline(self) -> None:
        key, timeout = self._deadline_for()
        if key == self._deadline_key:
            return  # the same turn (e.g. another seat passed): the deadline stands
        self._cancel_timer()
        self._deadline_key = key
        self.deadline = None
        if not timeout or self.is_replaying:
            return  # replay: the stored deadline follows in the log
        self.deadline = self.scheduler.now() + timeout
        self._log(DeadlineSet(self.sequence, self.deadline))
        self._set_timer(timeout, self._timer_step(self._on_timeout))

    def _clear_deadline(self) -> None:
        self._cancel_timer()
        self.deadline = None
        self._deadline_key = None

    def _on_timeout(self) -> None:
        """Out of time: the automatic choice for every person who still had to act."""
        game = self.game
        if game is None or game.is_over or self.paused_until is not None:
            return
        self.manager.check_writable()
        actions = tuple(game.auto_action(s) for s in game.to_act() if not self.seats[s].is_bot)
        if actions:
            self._time_out(TimedOut(self.sequence, actions))

    def _time_out(self, entry: TimedOut) -> None:
        game = self.game
        assert game is not None
        self._log(entry)
        self._deadline_key = None
        self.deadline = None
        events: list[ev.Event] = []
        for action in entry.actions:
            phase = game.phase
            if not self.is_replaying:
                self.metrics.timeouts.labels(phase.value.lower()).inc()
                self.log.info("turn_timed_out", seat=action.seat, phase=phase.value)
            self._emit(turn_timed_out=copas_pb2.TurnTimedOut(seat=action.seat,
                                                             phase=codec.PHASE_TO_PB[phase]))
            step = game.apply(action, is_automatic=True)
            self._emit_engine(step)
            events += step
        self._advance(events)

    def _set_timer(self, delay: float, callback: Callable[[], None]) -> None:
        """The table's one timer (none while replaying a log: time there is stored)."""
        self._cancel_timer()
        if not self.is_replaying:
            self._timer = self.scheduler.call_later(delay, callback)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _cancel_all_timers(self) -> None:
        self._cancel_timer()
        self._cancel_watchdog()
        if self._bot_timer is not None:
            self._bot_timer.cancel()
            self._bot_timer = None

    # ------------------------------------------------------------ the watchdog

    def _arm_watchdog(self) -> None:
        """A waiting table with nobody connected expires; a running game in which no person
        has acted for --abandon-after seconds ends (reason ABANDONED)."""
        if self.is_replaying or self.is_released or self.is_finished:
            return
        if self.game is None:
            if self.people_connected():
                return
            delay = self.config.waiting_table_ttl
            check: Callable[[], None] = self._expire_if_idle
        elif self.has_people:
            delay = self.last_person_action + self.config.abandon_after - self.scheduler.now()
            check = self._abandon_if_idle
        else:
            return
        self._cancel_watchdog()
        self._watchdog = self.scheduler.call_later(max(0.0, delay), check)

    def _cancel_watchdog(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None

    def _cancel_watchdog_if_waiting(self) -> None:
        if self.game is None:
            self._cancel_watchdog()

    def _expire_if_idle(self) -> None:
        self._watchdog = None
        if self.game is None and not self.people_connected() and not self.is_released:
            self.manager.expire(self)

    def _abandon_if_idle(self) -> None:
        self._watchdog = None
        game = self.game
        if game is None or game.is_over or self.is_released:
            return
        if self.scheduler.now() - self.last_person_action < self.config.abandon_after:
            self._arm_watchdog()
            return
        try:
            self.manager.check_writable()
            self._apply_automatic(Acted(self.sequence, ev.Abandon(), "idle"))
        except ServiceError:
            return
        finally:
            self._end_step()

    # ------------------------------------------------------------ the end

    def _finish(self) -> None:
        self._cancel_all_timers()
        self.deadline = None
        self._deadline_key = None
        self.paused_until = None
        for seat in self.seats:
            if seat.holds_slot:
                self._free_slot(seat.number)
        if self.finished_at is None:
            self.finished_at = self.scheduler.now()
            if not self.is_replaying:
                self.storage.finish_table(self.id, self.finished_at, self.record_summary(),
                                          self.record())
                self.manager.table_finished(self)

    def record(self) -> dict[str, Any]:
        """The finished game: replayable by the engine (rules, seed, actions) and carrying
        its result, seats and times."""
        assert self.game is not None
        data = to_record(self.game)
        data.update(self.record_summary())
        return data

    def record_summary(self) -> dict[str, Any]:
        assert self.game is not None
        return {"record_id": self.id, "table_id": self.id, "display_name": self.name,
                "preset": self.preset, "created": self.created, "finished": self.finished_at,
                "seed": self.seed, "rules": self.rules.to_dict(),
                "seats": [{"seat": s.number, "name": s.name, "is_bot": s.is_bot}
                          for s in self.seats],
                "result": result_of(self.game)}

    def release(self, error: ServiceError | None = None) -> None:
        """The table goes: timers stop, streams end (with ``error`` when given)."""
        self.is_released = True
        self._cancel_all_timers()
        self.fanout.close_all(error)

    # ------------------------------------------------------------ recovery

    def replay(self, entry: Entry, position: int) -> None:
        """Re-apply one log entry (at ``position`` in the log) through the code that wrote
        it (``is_replaying`` set)."""
        self._replay_position = position
        if isinstance(entry, (Joined, Acted, TimedOut, PauseEnded)):
            if entry.seq < self.sequence:
                raise ReplayMismatch(f"entry at sequence {entry.seq} after {self.sequence}")
            self.sequence = entry.seq  # events that were never logged keep their numbers
        match entry:
            case Joined():
                self._seat_person(entry)
            case Acted(by="player"):
                self.act(entry.action.seat, entry.action, entry.request_id, entry.fingerprint)
            case Acted():
                if self.game is None:
                    raise ReplayMismatch("an automatic action before the game started")
                self._apply_automatic(entry)
            case TimedOut():
                if self.game is None:
                    raise ReplayMismatch("a timeout before the game started")
                self._time_out(entry)
            case PauseEnded():
                self._resume(entry)
            case PauseStarted():
                self.paused_until = entry.until
            case DeadlineSet():
                self.deadline = entry.at
        self._end_step()

    def resume_after_recovery(self, finished_at: float | None) -> None:
        """After a replay: timers resume from the stored times (at once when past), bots
        move, the watchdog starts over."""
        self.is_replaying = False
        self.last_person_action = self.scheduler.now()
        game = self.game
        if game is None:
            self._arm_watchdog()
            return
        if game.is_over:
            self.finished_at = finished_at if finished_at is not None else self.finished_at
            return
        now = self.scheduler.now()
        if self.paused_until is not None:
            self._set_timer(self.paused_until - now, self._timer_step(self._end_pause))
        else:
            if self.deadline is not None:
                self._set_timer(self.deadline - now, self._timer_step(self._on_timeout))
            if any(self.seats[s].is_bot for s in game.to_act()):
                self._schedule_bot()
        self._arm_watchdog()


def _public_fields(event: ev.Event) -> dict[str, Any]:
    """Log fields of an engine event; engine events hold only public information."""
    out: dict[str, Any] = {}
    for key, value in event._asdict().items():
        if key == "standings":
            out[key] = [(r.seat, r.place, r.total) for r in value]
        elif key == "cards":
            out[key] = " ".join(map(str, value))
        elif isinstance(value, (int, bool, tuple, type(None))) and not isinstance(value, Card):
            out[key] = value
        else:
            out[key] = str(value)
    return out

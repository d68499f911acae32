"""A table's state machine: seats and tokens, the game, turns, pauses, deadlines and bots.

Everything here runs on the server's one event loop and never awaits while it changes the table, so
a table's moves are strictly ordered. Work comes in *steps*: one player's request, one timer (a
deadline, a pause's end), or one bot move. Every step goes through one runner (``_step``), which
refuses to start once the store has failed (fail-stop: nothing changes in memory that the log will
never hold) and ends by staging the step's events, each carrying the view after the whole step, for
the watchers; they see them once the store has committed the step. A step does a bounded amount of
game work (one action and what the engine plays at once for leavers), never waits; bots move in
steps of their own, scheduled on the loop, so no request or timer ever plays a game through.

A table asks its owner for what it cannot decide alone only through ``TableHost`` (slots against
--max-players, where tokens belong, delivery), given at construction; it writes its log through the
narrow ``TableLog`` (both in ``ports``). What it owns is split by state: its seats and a quick
match's reservations (``seats``), its numbered events (``events``), its timer handles, turn's clock,
watchdog and away seats' turns (``timers``), its bots' moves (``bots.BotTurns``), its presence
events (``presence.Presence``); the table decides what happens when a person sits, connects, acts or
leaves, or a timer fires. Recovery replays the log through the same code with ``is_replaying`` set,
which schedules nothing, logs nothing, counts nothing and sends nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import structlog
from copas.v1 import copas_pb2

from server import games, tokens
from server.config import TableSettings
from server.errors import ServiceError
from server.games import GameAction, GameEvent, GameState
from server.names import name_key
from server.observability import Metrics
from server.store.base import StorageFailed, TableMeta
from server.tables import views
from server.tables.bots import BotTurns, Thinker
from server.tables.clock import Scheduler
from server.tables.events import ActResult, TableEvents
from server.tables.fanout import Fanout, Watcher
from server.tables.idempotency import request_key, seal, unseal
from server.tables.log_entries import (
    Acted,
    DeadlineSet,
    Entry,
    Held,
    Joined,
    PauseEnded,
    PauseStarted,
    Removed,
    ReplayMismatch,
    StepEntry,
    TakenUp,
    TimedOut,
    dumps,
)
from server.tables.ports import TableHost, TableLog
from server.tables.presence import Presence
from server.tables.seats import Reservations, Seats, bot_joined, revoked
from server.tables.timers import AwayTurns, TableTimers, TurnClock, Watchdog
from server.tokens import network_tag

log = structlog.get_logger("copas.table")

JOIN_SCOPE = "join"  # JoinTable request ids are global: a quick match does not know its table
T = TypeVar("T")
STUCK_GRACE = 5.0  # seconds past what a table's rules allow before it counts as stuck


class Table:
    def __init__(self, host: TableHost[Table], store: TableLog, *, table_id: str, created: float,
                 meta: TableMeta, settings: TableSettings, metrics: Metrics,
                 scheduler: Scheduler, thinker: Thinker | None) -> None:
        self._host = host
        self.rematch_id = ""  # this finished game's rematch table, once asked for
        self._store = store
        self.settings = settings
        self.metrics = metrics
        self.scheduler = scheduler
        self.id = table_id
        self.created = created
        self.meta = meta
        self.name = meta.name
        self.preset = meta.preset
        self.rules = meta.rules
        self.seed = meta.seed
        self.order = meta.order
        self.bot_seats = meta.bot_seats
        self.bot_policy, self.rating, self.bot_pace = meta.bot_policy, meta.rating, meta.bot_pace
        self.request_key, self.fingerprint = meta.request_key, meta.fingerprint  # its creation
        self.game_module = module = games.get(meta.game)
        self.rules_pb = module.rules_to_pb(self.rules)
        self.rules_pb.bot_pace_seconds = self.bot_pace
        self.view_cache = module.new_view_cache(self.rules_pb)
        self.seats = Seats(self.rules.players, self.bot_seats, host)
        self.has_people = self.bot_seats < self.rules.players
        self.game: GameState | None = None
        self._events = TableEvents(self.rules.players, settings.history, created,
                                   module.event_to_pb)
        self.fanout = Fanout(settings.spectator_tick, settings.snapshot_max_events, self.now,
                             metrics.snapshot_lists.inc)
        self._timers = TableTimers(scheduler)
        self._clock = TurnClock(self._timers, self.rules, self._timer_step(self._on_timeout),
                                self._timer_step(self._end_pause), module)
        self._watchdog = Watchdog(self._timers, settings.waiting_table_ttl,
                                  settings.abandon_after, created)
        self._reservations = Reservations(self.seats, self._timers, settings.reservation_seconds,
                                          self._timer_step(self._expire_reservations))
        self._away = AwayTurns(self._timers, self.seats, self.is_connected,
                               self._timer_step(self._play_away))
        self._presence = Presence(scheduler, settings.presence_interval, self._events,
                                  self.is_connected, self._timer_step)
        self._bots = BotTurns(self, self._timers, thinker,
                              self.bot_pace if self.has_people
                              else max(self.bot_pace, settings.bot_table_pace),
                              self._play_bot, self._timer_step)
        self.finished_at: float | None = None
        self.is_held = False  # its championship is paused: nobody acts, no clock runs
        self.is_replaying = False
        self._replay_position = 0
        self.is_released = False
        self.is_lost = False  # released because another node took it
        self.log = log.bind(table_id=table_id)

    # ------------------------------------------------------------ reading

    @property
    def sequence(self) -> int:
        """The latest event's number."""
        return self._events.sequence

    @property
    def history(self) -> list[copas_pb2.TableEvent]:
        """The latest numbered events (at most --history), parsed (kept serialized)."""
        return [copas_pb2.TableEvent.FromString(event) for event in self._events.history]

    @property
    def last_event_at(self) -> float:
        return self._events.last_event_at

    @property
    def paused_until(self) -> float | None:
        return self._clock.paused_until

    @property
    def deadline(self) -> float | None:
        return self._clock.deadline

    @deadline.setter
    def deadline(self, at: float | None) -> None:  # an operator's tests make a table stuck
        self._clock.deadline = at

    @property
    def _step_time(self) -> float:
        """When the step under way happened: its events' time, its log entry's."""
        return self._events.step_time

    @property
    def is_finished(self) -> bool:
        return self.game is not None and self.game.is_over

    @property
    def is_waiting(self) -> bool:
        return self.game is None

    def now(self) -> float:
        return self.scheduler.now()

    def has_free_seat(self) -> bool:  # for anyone: a rematch's seats are kept for its people
        return self.seats.has_free_seat() and not (self.meta.rematch_of and self.game is None)

    def is_connected(self, seat: int) -> bool:
        """The person at ``seat`` has a stream open now: what the table acts on (away seats'
        turns, the watchdog); its views show ``shows_connected``."""
        token_hash = self.seats[seat].token_hash
        return bool(token_hash) and self.fanout.streams_of(token_hash) > 0

    def shows_connected(self, seat: int) -> bool:
        """What every view shows of ``seat``'s connection: as its last presence event told,
        the truth once --presence-interval has passed since (``Presence``)."""
        return self._presence.shows(seat)

    def people_connected(self) -> int:
        return sum(self.is_connected(s.number) for s in self.seats if not s.is_bot)

    def summary(self) -> copas_pb2.TableSummary:
        return views.summary(self)

    def view(self, seat: int | None) -> copas_pb2.TableView:
        return views.for_seat(self, seat)

    def snapshot(self, watcher: Watcher, after_sequence: int) -> bytes:
        """The view and the events ``watcher`` missed, a serialized TableEvent (``Fanout``'s)."""
        view = views.view_bytes(self, views.public_bytes(self), watcher.seat)
        return self.fanout.snapshot(watcher, after_sequence, self._events.missed_since,
                                    self.sequence, self.now(), view)

    # ------------------------------------------------------------ steps, log and events

    def _step(self, body: Callable[[], T], *, needs_store: bool = True,
              at: float | None = None) -> T:
        """Run one step: refused once the store has failed (fail-stop), its events staged
        at its end, whatever happened. Its time (``at``, else now) is kept to the
        millisecond, in its log entry too, so a replayed event shows the time it had."""
        if needs_store and not self.is_replaying:
            try:
                self._store.check_writable()
            except StorageFailed:
                raise ServiceError.storage_failed() from None
        self._events.begin(self.now() if at is None else at)
        try:
            return body()
        finally:
            self._end_step()

    def _log(self, entry: Entry) -> int:
        """Queue a log entry (not while replaying: it is already there); its position."""
        if self.is_replaying:
            return self._replay_position
        self._events.note_logged()
        return self._store.append(self.id, dumps(entry, self.game_module.action_to_json))

    def _end_step(self) -> None:
        """Stage the step's events, with the view after the whole step, for the watchers;
        the store commits them first. Replay only forgets them."""
        step = self._events.end()
        if step is None or self.is_replaying:
            return
        # Numbered events no log entry replays (a seat given up): numbers never go back.
        if step.is_numbered and not step.is_logged:
            self._store.note_sequence(self.id, self.sequence)
        self.game_module.observe(step.engine, self.metrics, self.log)
        self.metrics.events.inc(len(step.events))
        seats = self.fanout.seats_watching()
        if seats:  # nobody watching: no views to build
            shared = views.public_bytes(self)
            self.fanout.stage(step.events,
                              {seat: views.view_bytes(self, shared, seat) for seat in seats},
                              step.numbered)
        self._host.table_changed(self)

    def _timer_step(self, step: Callable[[], None]) -> Callable[[], None]:
        """A timer callback that runs ``step`` as a step of its own."""
        def run() -> None:
            if self.is_released:
                return
            try:
                self._step(step)
            except ServiceError:
                pass  # the store failed: the server is stopping, the log holds the truth
            except Exception:  # a bug must not kill the loop; the table stays as it is
                self.log.exception("table_step_failed", step=step.__name__)
        return run

    # ------------------------------------------------------------ its life

    def open(self) -> None:
        """A new table: a table of bots starts at once; one waiting for people starts its
        watchdog (it expires while nobody is at it)."""
        if self.has_people:
            self._arm_watchdog()
        else:
            self._step(self._start, at=self.created)

    # ------------------------------------------------------------ seats and watchers

    def join(self, name: str, seat_number: int | None, request_id: str = "",
             fingerprint: str = "", account_id: str = "", address: str = ""
             ) -> tuple[int, str]:
        """Seat a person (signed in as ``account_id``, if any, else from ``address``; one seat
        each at a quick-match table); returns (seat, token). A retry with the same request_id
        gets the same seat and token."""
        key = request_key(JOIN_SCOPE, request_id) if request_id else ""
        known = self.seats.recall_join(key, fingerprint) if key else None
        if known is not None:
            return known[0], unseal(known[1], JOIN_SCOPE, request_id)
        if self.game is not None:
            raise ServiceError.exhausted("the game has started", "TABLE_FULL")
        if self.meta.is_quick:
            self.seats.check_one_each(account_id, address,
                                      self.settings.quick_match_seats_per_client)
        seat = self.seats.choose(seat_number, account_id)
        looks = name_key(name)
        if any(s.is_taken and not s.is_bot and name_key(s.name) == looks for s in self.seats):
            raise ServiceError.already_exists(
                "another person at this table has that name (or one that looks the same): "
                "choose another", "NAME_TAKEN")

        def seat_them() -> tuple[int, str]:
            self._host.check_room_for_player()
            token = tokens.new_token()
            sealed = seal(token, JOIN_SCOPE, request_id) if key else ""
            self._seat_person(Joined(self.sequence, seat.number, name,
                                     tokens.hash_token(token), key, fingerprint, sealed,
                                     self._step_time, account_id,
                                     address if self.meta.is_quick and not account_id else "",
                                     network_tag(self.id, address) if account_id else ""))
            return seat.number, token
        return self._step(seat_them)

    def _seat_person(self, entry: Joined) -> None:
        """Seat a person (only the hash of their token is kept; at a quick-match table, a
        reservation until taken up); start when every seat is taken up."""
        if self.seats[entry.seat].is_taken:
            raise ReplayMismatch(f"seat {entry.seat} is taken")
        self.seats.seat_person(entry.seat, entry.name, entry.token_hash, self._log(entry),
                               entry.request_key, entry.fingerprint, entry.sealed_token,
                               entry.account_id, entry.address, entry.network)
        if self.meta.is_quick and entry.token_hash:  # a bot (QuickFill's) has nothing to take up
            self._reservations.reserve(entry.seat, self._step_time, is_live=not self.is_replaying)
        self._host.token_issued(entry.token_hash, self.id, entry.seat, entry.request_key)
        self._events.number("player_joined", copas_pb2.PlayerJoined(
            seat=entry.seat, display_name=entry.name))
        if not self.is_replaying:
            self.log.debug("player_joined", seat=entry.seat)
        if self.seats.is_ready():
            self._start()

    def seat_bot(self, number: int) -> None:  # a rematch's unclaimed seat: a join, no token
        self._step(lambda: self._seat_person(bot_joined(self.sequence, number, self._step_time)))

    def _take_up(self, entry: TakenUp) -> None:
        """A reserved seat's person connected: the game starts once every seat is."""
        self._log(entry)
        if self._reservations.take_up(entry.seat):
            self._start()

    def _expire_reservations(self) -> None:
        """Reservations not taken up in time go back (RESERVATION_EXPIRED)."""
        for number in self._reservations.due():
            self._give_up_seat(number, is_expired=True)
        self._reservations.arm()

    def _give_up_seat(self, seat_number: int, request_id: str = "", *,
                      by_operator: bool = False, is_expired: bool = False) -> int:
        """A person leaves before the game starts (or their reservation expired): the seat
        is free again, their token and its streams end, and their join leaves the log."""
        seat = self.seats[seat_number]
        self._store.delete_entry(self.id, seat.log_n)
        self.fanout.close_token(seat.token_hash, revoked(by_operator, is_expired))
        self._presence.forget(seat_number)
        self.seats.vacate(seat_number)
        self._events.number("player_left", copas_pb2.PlayerLeft(
            seat=seat_number, hand_number=-1, phase=copas_pb2.PHASE_WAITING_FOR_PLAYERS))
        if by_operator:
            self._host.token_removed(seat.token_hash, self.id, seat.join_key)
        elif is_expired:
            self._host.reservation_expired(seat.token_hash, self.id, seat.join_key)
        else:
            self._host.seat_given_up(seat.token_hash, self.id, seat.join_key, request_id,
                                     self.sequence)
        self._arm_watchdog()
        return self.sequence

    def add_watcher(self, seat: int | None, token_hash: str | None, is_batched: bool = False
                    ) -> Watcher:
        settings = self.settings
        self.fanout.check_room(token_hash, settings.max_watchers_per_table,
                               settings.max_streams_per_token)

        def add() -> Watcher:
            watcher = Watcher(seat, token_hash, settings.watcher_queue,
                              settings.watcher_buffer_bytes, is_batched)
            self.fanout.add(watcher)
            if seat is None or token_hash is None:
                return watcher
            if self.seats.streamed(seat):  # a reservation, taken up now
                self._take_up(TakenUp(self.sequence, seat, self._step_time))
            if self.fanout.streams_of(token_hash) == 1:
                if self.game is None:
                    self._watchdog.cancel()
                self._presence.changed(seat)
            return watcher
        return self._step(add)

    def remove_watcher(self, watcher: Watcher) -> None:
        if not self.fanout.remove(watcher) or self.is_released:
            return
        token_hash = watcher.token_hash
        if watcher.seat is not None and token_hash is not None \
                and self.fanout.streams_of(token_hash) == 0 \
                and self.seats[watcher.seat].token_hash == token_hash \
                and not self._host.is_stopping:
            seat = watcher.seat

            def disconnected() -> None:
                self._presence.changed(seat)
                self._arm_watchdog()
            self._step(disconnected, needs_store=False)  # a stream's end is not a change

    # ------------------------------------------------------------ operators

    def close_by_operator(self) -> None:
        """End the running game now (reason CLOSED): scored as an abandoned game, every
        stream gets its game_over, the record is kept.

        :raises ServiceError: WRONG_PHASE when the game has not started or is over (a
            waiting table is released by the registry instead).
        """
        game = self.game
        if game is None or game.is_over:
            raise ServiceError.precondition(
                "the game is over" if game is not None else "the game has not started",
                "WRONG_PHASE")
        self._step(lambda: self._apply_automatic(
            Acted(self.sequence, self.game_module.ending("operator"), "operator",
                  at=self._step_time)))

    def end_by_time_limit(self) -> None:
        """End the running game now (reason TIME_LIMIT: its championship round's time limit
        passed), scored as an abandoned game.

        :raises ServiceError: WRONG_PHASE when the game has not started or is over.
        """
        game = self.game
        if game is None or game.is_over:
            raise ServiceError.precondition(
                "the game is over" if game is not None else "the game has not started",
                "WRONG_PHASE")
        self._step(lambda: self._apply_automatic(
            Acted(self.sequence, self.game_module.ending("time_limit"), "time_limit",
                  at=self._step_time)))

    def hold(self, is_held: bool) -> None:
        """Hold the running game (its championship is paused: nobody acts, no clock runs, no
        bot moves) or release it (the turn starts again with its whole time); nothing when
        it is so already, or the game is not running."""
        game = self.game
        if game is None or game.is_over or self.is_held == is_held:
            return
        self._step(lambda: self._hold(Held(self.sequence, is_held, self._step_time)))

    def _hold(self, entry: Held) -> None:
        self._log(entry)
        self.is_held = entry.is_held
        self._events.number("table_held", copas_pb2.TableHeld(is_held=entry.is_held))
        if entry.is_held:  # every clock stops: the pause's, the turn's, the bots', the away
            self._clock.stop()
            self._timers.cancel_all()
            return
        self._watchdog.person_acted()  # a held game was not idle
        self._arm_watchdog()
        self._advance([])

    def remove_person(self, seat_number: int) -> None:
        """An operator takes the person at ``seat_number`` out: their token is revoked and
        its streams end; in a running game the seat plays as a leaver's, before the game the
        seat is free again.

        :raises ServiceError: INVALID_SEAT, NOT_A_PERSON (free or a bot's), WRONG_PHASE
            (the game is over).
        """
        self.seats.person_at(seat_number)
        game = self.game
        if game is None:
            self._step(lambda: self._give_up_seat(seat_number, by_operator=True))
            return
        if game.is_over:
            raise ServiceError.precondition("the game is over", "WRONG_PHASE")
        self._step(lambda: self._remove(Removed(self.sequence, seat_number, self._step_time)))

    def _remove(self, entry: Removed) -> None:
        game = self.game
        if game is None:
            raise ReplayMismatch("a removal before the game started")
        if not self.seats[entry.seat].token_hash:
            raise ReplayMismatch(f"seat {entry.seat} has no person to remove")
        module = self.game_module
        events: list[GameEvent] = []
        phase_before = module.phase_pb(game)
        if not game.is_over and not game.has_left[entry.seat]:
            events = module.apply(game, module.leave(entry.seat))
        self._log(entry)
        if events:
            if not self.is_replaying:
                self.metrics.leavers.inc()
            self.seats.free_slot(entry.seat)
            self._events.number_engine(events, phase_before)
        token_hash, join_key = self.seats.revoke(entry.seat)
        self.fanout.close_token(token_hash, ServiceError.unauthenticated(
            "an operator removed you from this table: your player token is no longer valid",
            "TOKEN_REVOKED"))
        self._presence.forget(entry.seat)
        self._host.token_removed(token_hash, self.id, join_key)
        if events:
            self._advance(events)

    def timers(self) -> list[tuple[str, float, list[int]]]:
        """The timers armed now: (kind, when, seats) for an operator's eyes."""
        return self._clock.listed(self.game, self.seats.people_among, self.now())

    # ------------------------------------------------------------ actions

    def act(self, seat: int, action: GameAction, request_id: str = "", fingerprint: str = ""
            ) -> ActResult:
        """Apply a person's action; return the sequences of its first event and of the
        latest after it. A retry with the same request_id and content gets the first
        answer; refusals are not kept.

        :raises ServiceError: the action is malformed or illegal now (nothing changed).
        """
        known = self.seats.recall(seat, request_id, fingerprint) if request_id else None
        if known is not None:
            return ActResult(known, self.sequence)
        kind = type(action).__name__
        try:
            first = self._step(lambda: self._person_acts(seat, action, request_id, fingerprint))
        except ServiceError as error:
            if not self.is_replaying:
                self.metrics.actions.labels(kind, error.reason).inc()
            raise
        if not self.is_replaying:
            self.metrics.actions.labels(kind, "OK").inc()
        if request_id:
            self.seats.remember(seat, request_id, fingerprint, first)
        return ActResult(first, self.sequence)

    def _person_acts(self, seat: int, action: GameAction, request_id: str, fingerprint: str
                     ) -> int:
        game, module = self.game, self.game_module
        is_leave = module.is_leave(action)
        if game is None:
            if is_leave:
                return self._give_up_seat(seat, request_id)
            raise ServiceError.precondition("the game has not started: seats are still free",
                                            "GAME_NOT_STARTED")
        if not game.is_over:
            if game.has_left[seat] and not is_leave:
                raise ServiceError.precondition("you have left this game; the server plays "
                                                "your seat", "SEAT_HAS_LEFT")
            if self.paused_until is not None and not is_leave:
                raise ServiceError.precondition("the table is paused; wait for play to resume",
                                                "TABLE_PAUSED")
            if self.is_held and not is_leave:
                raise ServiceError.precondition(
                    "the table is held (its championship is paused): wait for it to be "
                    "released", "TABLE_PAUSED")
        seq = self.sequence
        phase_before = module.phase_pb(game)
        events = module.apply(game, action)  # refused: a ServiceError, nothing changed
        self._log(Acted(seq, action, "player", request_id, fingerprint, self._step_time))
        self._watchdog.person_acted()
        self.seats.acted(seat, is_card=module.is_card(action))
        if is_leave:
            if not self.is_replaying:
                self.metrics.leavers.inc()
            self.seats.free_slot(seat)
        self._events.number_engine(events, phase_before)
        self._advance(events)
        return seq + 1

    # ------------------------------------------------------------ the game

    def _start(self) -> None:
        self.game = self.game_module.new_state(self.rules, self.seed)
        self._watchdog.cancel()
        self._watchdog.person_acted()
        if not self.is_replaying:
            self.log.debug("game_started")
        self._events.number("game_started", copas_pb2.GameStarted())
        events = self.game_module.started_events(self.game)
        self._events.number_engine(events)
        self._advance(events)
        self._arm_watchdog()

    def _advance(self, events: list[GameEvent]) -> None:
        """After an action: end the game, start a pause, schedule a bot, or give the people
        who must act their deadline."""
        game = self.game
        assert game is not None
        if game.is_over:
            self._finish()
            return
        if self.has_people and all(s.is_bot or game.has_left[s.number] for s in self.seats):
            self._events.number_engine(self.game_module.abandon(game))  # no person is left
            self._finish()
            return
        if self.paused_until is not None or self.is_held:
            return  # a leave during a pause (or a hold): the pause stands and its end goes on
        pause = self._clock.pause_after(game, events)
        if pause:
            self._start_pause(pause)
            return
        to_act = game.to_act()
        if self.seats.any_bot(to_act):
            self._bots.schedule()
            if not self.seats.people_among(to_act):
                self._clock.clear_deadline()
                return
        self._arm_turn()  # with bots: people pass while bots do, their clock runs

    @property
    def is_bot_step_pending(self) -> bool:
        return self._bots.is_pending

    def is_stuck(self, grace: float = STUCK_GRACE) -> bool:
        """No progress for longer than its rules allow: a turn's deadline passed ``grace``
        seconds ago and its timer has not played, or a bot is to act and nothing will make
        it. A game waiting for a person with no timeout is not stuck: its rules allow it."""
        game = self.game
        if game is None or game.is_over or self.paused_until is not None or self.is_released \
                or self.is_held:
            return False
        now = self.now()
        if self.deadline is not None and now > self.deadline + grace:
            return True
        return self.seats.any_bot(game.to_act()) and not self.is_bot_step_pending \
            and now - self._step_time > grace

    def _play_bot(self, action: GameAction) -> None:
        self._apply_automatic(Acted(self.sequence, action, "bot", at=self._step_time))

    def _apply_automatic(self, entry: Acted) -> None:
        game = self.game
        assert game is not None
        events = self.game_module.apply_automatic(game, entry.action)
        self._log(entry)
        self._events.number_engine(events)
        self._advance(events)

    def _start_pause(self, seconds: float) -> None:
        until = self._clock.start_pause(self.now(), seconds, is_live=not self.is_replaying)
        self._log(PauseStarted(self.sequence, until))

    def _end_pause(self) -> None:
        self._resume(PauseEnded(self.sequence, self._step_time))

    def _resume(self, entry: PauseEnded) -> None:
        self._log(entry)
        self._clock.paused_until = None
        self._events.number("pause_ended", copas_pb2.PauseEnded())
        self._advance([])

    def _arm_turn(self, *, is_fresh: bool = False) -> None:
        """The people to act get their deadline; on a clock, away seats' turns play as their
        timeouts would, sooner (``AwayTurns``; replay reads the log's entries)."""
        game = self.game
        assert game is not None
        if is_fresh:  # a replay stored no clock for this turn
            self._clock.clear_deadline()
        is_live = not self.is_replaying
        wait = self._away.arm(self.seats.people_among(game.to_act()),
                              is_on=is_live and bool(self._clock.timeout_of(game)))
        if wait == 0.0:
            self._clock.clear_deadline()  # played at once: the turn takes no clock
            return
        deadline = self._clock.next_deadline(game, self.now(), is_live=is_live, within=wait)
        if deadline is not None:
            self._log(DeadlineSet(self.sequence, deadline))

    def _play_away(self) -> None:  # the away seats' turns
        self._on_timeout(is_away=True)

    def _on_timeout(self, *, is_away: bool = False) -> None:
        """Out of time: the automatic choice for every person (away one) who still had to act."""
        game = self.game
        if game is None or game.is_over or self.paused_until is not None or self.is_held:
            return
        seats = self.seats.people_among(game.to_act())
        seats = self._away.due(seats) if is_away else seats
        if seats:
            auto = self.game_module.auto_action
            self._time_out(TimedOut(self.sequence, tuple(auto(game, s) for s in seats),
                                    self._step_time, is_away))
        elif is_away and self.deadline is None:  # back in time: the turn gets its clock
            self._arm_turn()

    def _time_out(self, entry: TimedOut) -> None:
        game = self.game
        assert game is not None
        self._log(entry)
        if not entry.is_away:  # the others' clock runs on while the away seats play
            self._clock.timed_out()
        module = self.game_module
        events: list[GameEvent] = []
        for action in entry.actions:
            self.seats.timed_out(action.seat, is_away_play=entry.is_away)
            if not self.is_replaying:
                phase = module.phase_name(game)
                self.metrics.timeouts.labels(phase.lower()).inc()
                self.log.info("turn_timed_out", seat=action.seat, phase=phase)
            self._events.number("turn_timed_out", copas_pb2.TurnTimedOut(
                seat=action.seat, phase=module.phase_pb(game)))  # type: ignore[arg-type]
            step = module.apply_automatic(game, action)
            self._events.number_engine(step)
            events += step
        self._advance(events)

    # ------------------------------------------------------------ the watchdog

    def _arm_watchdog(self) -> None:
        """A waiting table with nobody connected expires; a running game in which no person
        has acted for --abandon-after seconds ends (reason ABANDONED)."""
        if self.is_replaying or self.is_released or self.is_finished:
            return
        if self.game is None and not self.people_connected():
            self._watchdog.arm_waiting(self._expire_if_idle)
        elif self.game is not None and self.has_people:
            self._watchdog.arm_game(self._timer_step(self._abandon_if_idle))

    def _expire_if_idle(self) -> None:
        if self.game is None and not self.people_connected() and not self.is_released:
            self._host.table_idle(self)

    def _abandon_if_idle(self) -> None:
        game = self.game
        if game is None or game.is_over or self.is_held:
            return  # a held game waits for its release (which starts the idle clock over)
        if not self._watchdog.is_idle():
            self._arm_watchdog()
            return
        self._apply_automatic(Acted(self.sequence, self.game_module.ending("idle"), "idle",
                                    at=self._step_time))

    # ------------------------------------------------------------ the end

    def _finish(self) -> None:
        self._timers.cancel_all()
        self._clock.stop()
        self.is_held = False
        self.seats.free_all_slots()
        if self.finished_at is None:
            self.finished_at = self.now()
            if not self.is_replaying:
                self._store.finish_table(self.id, views.record(self))
                self._host.table_finished(self)

    def release(self, error: ServiceError | None = None, *, is_lost: bool = False) -> None:
        """The table goes: timers stop, streams end (with ``error`` when given); ``is_lost``:
        another node holds it now."""
        self.is_released = True
        self.is_lost = is_lost
        self._timers.cancel_all()
        self._presence.cancel()
        self.fanout.close_all(error)

    # ------------------------------------------------------------ recovery

    def replay_log(self, entries: list[tuple[int, Entry]], shown: int) -> None:
        """Rebuild the table from its log: each entry (with its position) through the code
        that wrote it, with ``is_replaying`` set; ``shown`` is the highest sequence the table
        had noted after a step no entry replays (a seat given up: those events keep their
        numbers, and the history starts after them). The table stays replaying until
        ``resume_after_recovery``.

        :raises ReplayMismatch: an entry does not fit the table (and engine errors alike).
        """
        self.is_replaying = True
        if self.bot_seats == self.rules.players:  # a table of bots started when it was made
            self._step(self._start, at=self.created)
        for position, entry in entries:
            self.replay(entry, position)
        self._events.skip_to(shown)

    def replay(self, entry: Entry, position: int) -> None:
        """Re-apply one log entry (at ``position`` in the log) through the code that wrote
        it (``is_replaying`` set)."""
        self._replay_position = position
        at = None
        if isinstance(entry, StepEntry):
            if entry.seq < self.sequence:
                raise ReplayMismatch(f"entry at sequence {entry.seq} after {self.sequence}")
            self._events.skip_to(entry.seq)
            at = entry.at or None  # an older log kept no time: its events show the replay's
        self._step(lambda: self._replay(entry), at=at)

    def _replay(self, entry: Entry) -> None:
        match entry:
            case Joined():
                self._seat_person(entry)
            case Acted(by="player"):
                self._person_acts(entry.action.seat, entry.action, entry.request_id,
                                  entry.fingerprint)
                if entry.request_id:
                    self.seats.remember(entry.action.seat, entry.request_id,
                                        entry.fingerprint, entry.seq + 1)
            case Acted() | TimedOut() if self.game is None:
                raise ReplayMismatch(f"{type(entry).__name__} before the game started")
            case Acted():
                self._apply_automatic(entry)
            case TimedOut():
                self._time_out(entry)
            case PauseEnded():
                self._resume(entry)
            case PauseStarted():
                self._clock.paused_until = entry.until
            case DeadlineSet():
                self._clock.deadline = entry.at
            case Removed():
                self._remove(entry)
            case TakenUp():
                self._take_up(entry)
            case Held():
                self._hold(entry)

    def resume_after_recovery(self, finished_at: float | None) -> None:
        """After a replay: timers resume from the stored times (at once when past), bots
        move, the watchdog starts over."""
        self.is_replaying = False
        self._watchdog.person_acted()
        game = self.game
        if game is None:
            self._reservations.arm()
            self._arm_watchdog()
            return
        if game.is_over:
            self.finished_at = finished_at if finished_at is not None else self.finished_at
            return
        if self.is_held:
            return  # nothing runs until it is released
        self._clock.resume(self.now())
        if self.paused_until is None and self.deadline is None \
                and self.seats.people_among(game.to_act()):
            self._step(lambda: self._arm_turn(is_fresh=True))  # an away seat's turn, or none
        if self.paused_until is None and self.seats.any_bot(game.to_act()):
            self._bots.schedule()
        self._arm_watchdog()

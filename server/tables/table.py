"""A table's state machine: seats and tokens, the game, turns, pauses, deadlines and bots.

Everything here runs on the server's one event loop and never awaits while it changes the
table, so a table's moves are strictly ordered. Work comes in *steps*: one player's request,
one timer (a deadline, a pause's end), or one bot move. Every step goes through one runner
(``_step``), which refuses to start once the store has failed (fail-stop: nothing changes in
memory that the log will never hold) and ends by staging the step's events, each carrying the
view after the whole step, for the watchers; they see them once the store has committed the
step. A step does a bounded amount of game work (one action and what the engine plays at once
for leavers), never waits; bots move in steps of their own, scheduled on the loop, so no
request or timer ever plays a game through.

A table asks its owner for what it cannot decide alone only through ``TableHost`` (slots
against --max-players, where tokens belong, delivery), given at construction; it writes its
log through the narrow ``TableLog``. Recovery replays the log through the same code with
``is_replaying`` set, which schedules nothing, logs nothing, counts nothing and sends nothing.
"""

from __future__ import annotations

import logging
import time
import zlib
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import structlog
from copas.v1 import copas_pb2
from google.protobuf.message import Message

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
    TrickWon,
)
from engine import actions as ev
from server import codec, tokens
from server.config import TableSettings
from server.errors import ServiceError, from_engine
from server.observability import Metrics
from server.store.base import (
    GameRecord,
    GameResult,
    RecordSummary,
    SeatRecord,
    StorageFailed,
    TableMeta,
)
from server.tables import views
from server.tables.bots import Thinker
from server.tables.clock import Handle, Scheduler
from server.tables.fanout import Fanout, Watcher
from server.tables.idempotency import Remembered, check_reuse, request_key, seal, unseal
from server.tables.log_entries import (
    Acted,
    DeadlineSet,
    Entry,
    Joined,
    PauseEnded,
    PauseStarted,
    Removed,
    StepEntry,
    TimedOut,
    dumps,
)
from server.wire import timestamp

log = structlog.get_logger("copas.table")

REQUEST_MEMORY = 256  # successful request_ids remembered per seat
AUTO_POLICY = "auto"  # the timeout rules' choices (RULES.md), played at once
JOIN_SCOPE = "join"  # JoinTable request ids are global: a quick match does not know its table
T = TypeVar("T")
STUCK_GRACE = 5.0  # seconds past what a table's rules allow before it counts as stuck


class TableHost(Protocol):
    """What a table may ask of its owner (the registry of one node's tables)."""

    @property
    def is_stopping(self) -> bool:
        """The server is stopping: connections that end are not news."""

    def check_room_for_player(self) -> None:
        """:raises ServiceError: the server has no room for another seated person."""

    def slot_taken(self) -> None:
        """A person took a --max-players slot."""

    def slot_freed(self) -> None:
        """A person gave theirs back (left, gave the seat up, or the game ended)."""

    def token_issued(self, token_hash: str, table_id: str, seat: int, join_key: str) -> None:
        """A seat's token now opens ``table_id``; ``join_key`` finds the join by request id."""

    def seat_given_up(self, token_hash: str, table_id: str, join_key: str, request_id: str,
                      sequence: int) -> None:
        """The token of a seat given up before its game stops working."""

    def token_removed(self, token_hash: str, table_id: str, join_key: str) -> None:
        """An operator took the token's holder out of a running game: it stops working."""

    def table_changed(self, table: Table) -> None:
        """A step ended: show its events once durable (and the lobby's change)."""

    def table_finished(self, table: Table) -> None:
        """The game ended (once)."""

    def table_idle(self, table: Table) -> None:
        """A waiting table nobody is at: it may go."""


class TableLog(Protocol):
    """What a table writes to the store."""

    def check_writable(self) -> None: ...
    def append(self, table_id: str, entry: str) -> int: ...
    def note_sequence(self, table_id: str, sequence: int) -> None: ...
    def delete_entry(self, table_id: str, n: int) -> None: ...
    def finish_table(self, table_id: str, record: GameRecord) -> None: ...


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
    def __init__(self, host: TableHost, store: TableLog, *, table_id: str, created: float,
                 meta: TableMeta, settings: TableSettings, metrics: Metrics,
                 scheduler: Scheduler, thinker: Thinker | None) -> None:
        self._host = host
        self._store = store
        self.settings = settings
        self.metrics = metrics
        self.scheduler = scheduler
        self._thinker = thinker
        self.id = table_id
        self.created = created
        self.meta = meta
        self.name = meta.name
        self.preset = meta.preset
        self.rules = meta.rules
        self.seed = meta.seed
        self.order = meta.order
        self.bot_seats = meta.bot_seats
        self.bot_policy = meta.bot_policy
        self.request_key = meta.request_key  # the CreateTable request that made it, if any
        self.fingerprint = meta.fingerprint
        self.rules_pb = codec.rules_to_pb(self.rules)
        self.view_cache = views.ViewCache(self.rules_pb)
        players = self.rules.players
        self.seats = [Seat(i) for i in range(players)]
        for seat in self.seats[players - self.bot_seats:]:
            seat.is_taken, seat.is_bot, seat.name = True, True, f"Bot {seat.number + 1}"
        self.has_people = self.bot_seats < players
        self.join_requests: dict[str, tuple[Remembered, str]] = {}  # key -> (seat, sealed)
        self.game: Game | None = None
        self.sequence = 0
        self.history: deque[copas_pb2.TableEvent] = deque(maxlen=settings.history)
        self.fanout = Fanout(settings.spectator_tick, settings.snapshot_max_events, self.now,
                             metrics.snapshot_lists.inc)
        self.paused_until: float | None = None
        self.deadline: float | None = None
        self._deadline_key: tuple[Any, ...] | None = None
        self._timer: Handle | None = None  # a pause's end or a deadline
        self._bot_timer: Handle | None = None  # the next bot move
        self._watchdog: Handle | None = None  # a waiting table's expiry, an idle game's end
        self.watchdog_at: float | None = None  # when the watchdog fires
        self.last_event_at = created  # the time of the latest numbered event
        self.finished_at: float | None = None
        self.last_person_action = created
        self.is_replaying = False
        self._replay_position = 0
        self.is_released = False
        self.is_lost = False  # released because another node took it
        self._step_events: list[copas_pb2.TableEvent] = []
        self._step_logged = False  # the step wrote a log entry (its events replay from it)
        self._step_numbered = False  # the step numbered an event
        self._step_time = created  # when the step happened (its events' time, its entry's)
        self._step_engine: list[ev.Event] = []
        self.log = log.bind(table_id=table_id)

    # ------------------------------------------------------------ reading

    @property
    def is_finished(self) -> bool:
        return self.game is not None and self.game.is_over

    @property
    def is_waiting(self) -> bool:
        return self.game is None

    def now(self) -> float:
        return self.scheduler.now()

    def has_free_seat(self) -> bool:
        return any(not s.is_taken for s in self.seats)

    def is_connected(self, seat: int) -> bool:
        token_hash = self.seats[seat].token_hash
        return bool(token_hash) and self.fanout.streams_of(token_hash) > 0

    def people_connected(self) -> int:
        return sum(self.is_connected(s.number) for s in self.seats if not s.is_bot)

    def token_hashes(self) -> list[str]:
        """The tokens of the seats' current holders."""
        return [s.token_hash for s in self.seats if s.token_hash]

    def join_keys(self) -> list[str]:
        """The JoinTable request keys that seated its people."""
        return [s.join_key for s in self.seats if s.join_key]

    def summary(self) -> copas_pb2.TableSummary:
        return views.summary(self)

    def view(self, seat: int | None) -> copas_pb2.TableView:
        return views.for_seat(self, seat)

    def snapshot(self, watcher: Watcher, after_sequence: int) -> bytes:
        """A snapshot for ``watcher`` (a serialized TableEvent): the current view plus the
        events it missed (``Fanout.snapshot``)."""
        return self.fanout.snapshot(watcher, after_sequence, self.history, self.sequence,
                                    self.now(), views.view_bytes(self, views.public_bytes(self),
                                                                 watcher.seat))

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
        self._step_time = round(self.now() if at is None else at, 3)
        try:
            return body()
        finally:
            self._end_step()

    def _log(self, entry: Entry) -> int:
        """Queue a log entry (not while replaying: it is already there); its position."""
        if self.is_replaying:
            return self._replay_position
        self._step_logged = True
        return self._store.append(self.id, dumps(entry))

    def _emit(self, kind: str, body: Message) -> None:
        """Number the next event (``kind``, TableEvent's oneof field, holding ``body``) and
        keep it in the history."""
        self.sequence += 1
        self._step_numbered = True
        self.last_event_at = self._step_time
        message = self._event(kind, body)
        self.history.append(message)
        self._step_events.append(message)

    def _announce(self, kind: str, body: Message) -> None:
        """An event outside the history (presence): shown live with its view but not
        numbered (it repeats the latest sequence), so it is neither logged nor replayed, and
        a restart leaves no hole where it was."""
        self._step_events.append(self._event(kind, body))

    def _event(self, kind: str, body: Message) -> copas_pb2.TableEvent:
        field: dict[str, Any] = {kind: body}  # TableEvent's oneof, by the event's kind
        return copas_pb2.TableEvent(sequence=self.sequence, time=timestamp(self._step_time),
                                    **field)

    def _emit_engine(self, events: list[ev.Event], phase_before: Phase | None = None) -> None:
        """Sequence the engine's events; ``phase_before`` is where a leave happened."""
        n = len(self.seats)
        for event in events:
            kind, body = codec.event_to_pb(event, n)
            if phase_before is not None and isinstance(body, copas_pb2.PlayerLeft):
                body.phase = codec.PHASE_TO_PB[phase_before]
            self._emit(kind, body)
        self._step_engine.extend(events)

    def _end_step(self) -> None:
        """Stage the step's events, with the view after the whole step, for the watchers;
        the store commits them first. Replay only forgets them."""
        events, self._step_events = self._step_events, []
        engine_events, self._step_engine = self._step_engine, []
        logged, self._step_logged = self._step_logged, False
        numbered, self._step_numbered = self._step_numbered, False
        if not events:
            return
        events[-1].is_last_in_action = True
        if self.is_replaying:
            return
        if numbered and not logged:  # numbered events no log entry replays (a seat given
            self._store.note_sequence(self.id, self.sequence)  # up): numbers never go back
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
            shared = views.public_bytes(self)
            self.fanout.stage([(e.sequence, e.SerializeToString()) for e in events],
                              {seat: views.view_bytes(self, shared, seat) for seat in seats},
                              numbered)
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

        def seat_them() -> tuple[int, str]:
            self._host.check_room_for_player()
            token = tokens.new_token()
            sealed = seal(token, JOIN_SCOPE, request_id) if key else ""
            self._seat_person(Joined(self.sequence, seat.number, name,
                                     tokens.hash_token(token), key, fingerprint, sealed,
                                     self._step_time))
            return seat.number, token
        return self._step(seat_them)

    def _seat_person(self, entry: Joined) -> None:
        """Seat a person (only the hash of their token is kept); start when full."""
        seat = self.seats[entry.seat]
        if seat.is_taken:
            raise ReplayMismatch(f"seat {entry.seat} is taken")
        seat.is_taken, seat.name, seat.token_hash = True, entry.name, entry.token_hash
        seat.log_n = self._log(entry)
        self._take_slot(seat)
        if entry.request_key:
            seat.join_key = entry.request_key
            self.join_requests[entry.request_key] = (
                Remembered(entry.fingerprint, entry.seat), entry.sealed_token)
        self._host.token_issued(entry.token_hash, self.id, entry.seat, entry.request_key)
        self._emit("player_joined", copas_pb2.PlayerJoined(seat=entry.seat,
                                                           display_name=entry.name))
        if not self.is_replaying:
            self.log.debug("player_joined", seat=entry.seat)
        if all(s.is_taken for s in self.seats):
            self._start()

    def _give_up_seat(self, seat_number: int, request_id: str = "", *,
                      by_operator: bool = False) -> int:
        """A person leaves before the game starts: the seat is free again, their token and
        its streams end, and their join leaves the log."""
        seat = self.seats[seat_number]
        self._store.delete_entry(self.id, seat.log_n)
        why = "an operator removed you from this table" if by_operator \
            else "you left this table"
        self.fanout.close_token(seat.token_hash, ServiceError.unauthenticated(
            f"{why}: your player token is no longer valid", "TOKEN_REVOKED"))
        self.join_requests.pop(seat.join_key, None)
        self._free_slot(seat_number)
        self.seats[seat_number] = Seat(seat_number)
        self._emit("player_left", copas_pb2.PlayerLeft(
            seat=seat_number, hand_number=-1, phase=copas_pb2.PHASE_WAITING_FOR_PLAYERS))
        if by_operator:
            self._host.token_removed(seat.token_hash, self.id, seat.join_key)
        else:
            self._host.seat_given_up(seat.token_hash, self.id, seat.join_key, request_id,
                                     self.sequence)
        self._arm_watchdog()
        return self.sequence

    def add_watcher(self, seat: int | None, token_hash: str | None) -> Watcher:
        settings = self.settings
        if token_hash is None:
            if self.fanout.spectators() >= settings.max_watchers_per_table:
                raise ServiceError.exhausted("too many spectators on this table",
                                             "TOO_MANY_WATCHERS")
        elif self.fanout.streams_of(token_hash) >= settings.max_streams_per_token:
            raise ServiceError.exhausted(
                f"at most {settings.max_streams_per_token} streams per player; close one first",
                "TOO_MANY_STREAMS")

        def add() -> Watcher:
            watcher = Watcher(seat, token_hash, settings.watcher_queue,
                              settings.watcher_buffer_bytes)
            self.fanout.add(watcher)
            if seat is not None and token_hash is not None \
                    and self.fanout.streams_of(token_hash) == 1:
                self._cancel_watchdog_if_waiting()
                self._announce("player_connection", copas_pb2.PlayerConnection(
                    seat=seat, is_connected=True))
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
                self._announce("player_connection", copas_pb2.PlayerConnection(
                    seat=seat, is_connected=False))
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
            Acted(self.sequence, ev.Close(), "operator", at=self._step_time)))

    def remove_person(self, seat_number: int) -> None:
        """An operator takes the person at ``seat_number`` out: their token is revoked and
        its streams end; in a running game the seat plays as a leaver's, before the game the
        seat is free again.

        :raises ServiceError: INVALID_SEAT, NOT_A_PERSON (free or a bot's), WRONG_PHASE
            (the game is over).
        """
        if not 0 <= seat_number < len(self.seats):
            raise ServiceError.invalid(f"seat must be 0..{len(self.seats) - 1}",
                                       "INVALID_SEAT")
        seat = self.seats[seat_number]
        if not seat.is_taken or seat.is_bot or not seat.token_hash:
            raise ServiceError.precondition(
                f"seat {seat_number} holds no person (it is free, a bot's, or its person "
                "was removed already)", "NOT_A_PERSON")
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
        seat = self.seats[entry.seat]
        token_hash, join_key = seat.token_hash, seat.join_key
        if not token_hash:
            raise ReplayMismatch(f"seat {entry.seat} has no person to remove")
        events: list[ev.Event] = []
        phase_before = game.phase
        if not game.is_over and not game.has_left[entry.seat]:
            events = game.apply(Leave(entry.seat))
        self._log(entry)
        if events:
            if not self.is_replaying:
                self.metrics.leavers.inc()
            self._free_slot(entry.seat)
            self._emit_engine(events, phase_before)
        seat.token_hash = ""
        seat.join_key = ""
        self.join_requests.pop(join_key, None)
        self.fanout.close_token(token_hash, ServiceError.unauthenticated(
            "an operator removed you from this table: your player token is no longer valid",
            "TOKEN_REVOKED"))
        self._host.token_removed(token_hash, self.id, join_key)
        if events:
            self._advance(events)

    def timers(self) -> list[tuple[str, float, list[int]]]:
        """The timers armed now: (kind, when, seats) for an operator's eyes."""
        out: list[tuple[str, float, list[int]]] = []
        game = self.game
        if self.deadline is not None and game is not None and not game.is_over:
            out.append(("turn", self.deadline,
                        [s for s in game.to_act() if not self.seats[s].is_bot]))
        if self.paused_until is not None:
            out.append(("pause", self.paused_until, []))
        if self._bot_timer is not None:
            out.append(("bot", self.now(), []))
        if self._watchdog is not None and self.watchdog_at is not None:
            out.append(("watchdog", self.watchdog_at, []))
        return out

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
            first = self._step(lambda: self._person_acts(seat, action, request_id,
                                                         fingerprint))
        except ServiceError as error:
            if not self.is_replaying:
                self.metrics.actions.labels(kind, error.reason).inc()
            raise
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
        seq = self.sequence
        phase_before = game.phase
        try:
            events = game.apply(action)
        except EngineError as error:
            raise from_engine(error) from None
        self._log(Acted(seq, action, "player", request_id, fingerprint, self._step_time))
        self.last_person_action = self.now()
        if is_leave:
            if not self.is_replaying:
                self.metrics.leavers.inc()
            self._free_slot(seat)
        self._emit_engine(events, phase_before)
        self._advance(events)
        return seq + 1

    # ------------------------------------------------------------ --max-players slots

    def _take_slot(self, seat: Seat) -> None:
        seat.holds_slot = True
        self._host.slot_taken()

    def _free_slot(self, seat_number: int) -> None:
        """The one place a slot is given back."""
        seat = self.seats[seat_number]
        if seat.holds_slot:
            seat.holds_slot = False
            self._host.slot_freed()

    def free_all_slots(self) -> None:
        """The table leaves this node: every slot its people hold goes back."""
        for seat in self.seats:
            self._free_slot(seat.number)

    # ------------------------------------------------------------ the game

    def _start(self) -> None:
        self.game = Game(self.rules, self.seed)
        self._cancel_watchdog()
        self.last_person_action = self.now()
        if not self.is_replaying:
            self.log.debug("game_started")
        self._emit("game_started", copas_pb2.GameStarted())
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
            0.0 if self.has_people else self.settings.bot_table_pace,
            self._timer_step(self._bot_moves))

    @property
    def is_bot_step_pending(self) -> bool:
        return self._bot_timer is not None

    def is_stuck(self, grace: float = STUCK_GRACE) -> bool:
        """No progress for longer than its rules allow: a turn's deadline passed ``grace``
        seconds ago and its timer has not played, or a bot is to act and nothing will make
        it. A game waiting for a person with no timeout is not stuck: its rules allow it."""
        game = self.game
        if game is None or game.is_over or self.paused_until is not None or self.is_released:
            return False
        now = self.now()
        if self.deadline is not None and now > self.deadline + grace:
            return True
        return any(self.seats[s].is_bot for s in game.to_act()) \
            and not self.is_bot_step_pending and now - self._step_time > grace

    def _bot_moves(self) -> None:
        self._bot_timer = None
        game = self.game
        if game is None or game.is_over or self.paused_until is not None:
            return
        bot = next((s for s in game.to_act() if self.seats[s].is_bot), None)
        if bot is None:
            return
        thinker = self._thinker
        if self.bot_policy == AUTO_POLICY or thinker is None:
            began = time.perf_counter()
            action = game.auto_action(bot)
            self.metrics.bot_decision.labels(where="here").observe(time.perf_counter() - began)
            self._apply_automatic(Acted(self.sequence, action, "bot", at=self._step_time))
            return
        # The bot thinks in a worker process; the table goes on meanwhile (a leave, a
        # timeout). Its move is applied only if the table is still where it thought.
        key = self._decision_key(bot)
        seed = zlib.crc32(f"{self.seed}:{self.sequence}".encode())
        began = time.perf_counter()
        decisions = self.metrics.bot_decision.labels(where="pool")

        def decided(action: Action | None) -> None:
            decisions.observe(time.perf_counter() - began)
            self._timer_step(lambda: self._bot_decided(bot, key, action))()

        self._bot_timer = thinker.think(ai.info_from_game(game, bot), self.bot_policy, seed,
                                        decided)

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
        if action is None or action.seat != seat:
            action = game.auto_action(seat)
        try:
            self._apply_automatic(Acted(self.sequence, action, "bot", at=self._step_time))
        except EngineError:  # a policy's mistake must not stop the table
            self.log.error("bot_move_refused", seat=seat)
            self._apply_automatic(Acted(self.sequence, game.auto_action(seat), "bot",
                                        at=self._step_time))

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
        self.paused_until = self.now() + seconds
        self._log(PauseStarted(self.sequence, self.paused_until))
        self._set_timer(seconds, self._timer_step(self._end_pause))

    def _end_pause(self) -> None:
        self._resume(PauseEnded(self.sequence, self._step_time))

    def _resume(self, entry: PauseEnded) -> None:
        self._log(entry)
        self.paused_until = None
        self._emit("pause_ended", copas_pb2.PauseEnded())
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
        self.deadline = self.now() + timeout
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
        actions = tuple(game.auto_action(s) for s in game.to_act() if not self.seats[s].is_bot)
        if actions:
            self._time_out(TimedOut(self.sequence, actions, self._step_time))

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
            self._emit("turn_timed_out", copas_pb2.TurnTimedOut(seat=action.seat,
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
            delay = self.settings.waiting_table_ttl
            check: Callable[[], None] = self._expire_if_idle
        elif self.has_people:
            delay = self.last_person_action + self.settings.abandon_after - self.now()
            check = self._timer_step(self._abandon_if_idle)
        else:
            return
        self._cancel_watchdog()
        self.watchdog_at = self.now() + max(0.0, delay)
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
            self._host.table_idle(self)

    def _abandon_if_idle(self) -> None:
        self._watchdog = None
        game = self.game
        if game is None or game.is_over:
            return
        if self.now() - self.last_person_action < self.settings.abandon_after:
            self._arm_watchdog()
            return
        self._apply_automatic(Acted(self.sequence, ev.Abandon(), "idle", at=self._step_time))

    # ------------------------------------------------------------ the end

    def _finish(self) -> None:
        self._cancel_all_timers()
        self.deadline = None
        self._deadline_key = None
        self.paused_until = None
        self.free_all_slots()
        if self.finished_at is None:
            self.finished_at = self.now()
            if not self.is_replaying:
                self._store.finish_table(self.id, self.record())
                self._host.table_finished(self)

    def record(self) -> GameRecord:
        """The finished game: replayable by the engine (rules, seed, actions) and carrying
        its result, seats and times."""
        game = self.game
        assert game is not None and self.finished_at is not None
        summary = RecordSummary(
            record_id=self.id, table_id=self.id, display_name=self.name, preset=self.preset,
            created=self.created, finished=self.finished_at, seed=self.seed, rules=self.rules,
            seats=tuple(SeatRecord(s.number, s.name, s.is_bot) for s in self.seats),
            result=GameResult.of(game))
        return GameRecord(summary, tuple(game.actions))

    def release(self, error: ServiceError | None = None, *, is_lost: bool = False) -> None:
        """The table goes: timers stop, streams end (with ``error`` when given); ``is_lost``:
        another node holds it now."""
        self.is_released = True
        self.is_lost = is_lost
        self._cancel_all_timers()
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
        self._skip_to(shown)

    def replay(self, entry: Entry, position: int) -> None:
        """Re-apply one log entry (at ``position`` in the log) through the code that wrote
        it (``is_replaying`` set)."""
        self._replay_position = position
        at = None
        if isinstance(entry, StepEntry):
            if entry.seq < self.sequence:
                raise ReplayMismatch(f"entry at sequence {entry.seq} after {self.sequence}")
            self._skip_to(entry.seq)
            at = entry.at or None  # an older log kept no time: its events show the replay's
        self._step(lambda: self._replay(entry), at=at)

    def _skip_to(self, sequence: int) -> None:
        """Replay: the events numbered up to ``sequence`` that it did not rebuild were shown
        but no log entry holds them (a seat given up before the game: its join row went).
        They keep their numbers, and the history starts after them, so a snapshot that reaches
        back past them says ``has_gap`` instead of skipping them."""
        if sequence > self.sequence:
            self.history.clear()
            self.sequence = sequence

    def _replay(self, entry: Entry) -> None:
        match entry:
            case Joined():
                self._seat_person(entry)
            case Acted(by="player"):
                self._person_acts(entry.action.seat, entry.action, entry.request_id,
                                  entry.fingerprint)
                if entry.request_id and self.seats[entry.action.seat].is_taken:
                    self._remember(entry.action.seat, entry.request_id, entry.fingerprint,
                                   entry.seq + 1)
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
            case Removed():
                self._remove(entry)

    def _remember(self, seat: int, request_id: str, fingerprint: str, answer: int) -> None:
        memory = self.seats[seat].requests
        memory[request_id] = Remembered(fingerprint, answer)
        while len(memory) > REQUEST_MEMORY:
            memory.popitem(last=False)

    def resume_after_recovery(self, finished_at: float | None) -> None:
        """After a replay: timers resume from the stored times (at once when past), bots
        move, the watchdog starts over."""
        self.is_replaying = False
        self.last_person_action = self.now()
        game = self.game
        if game is None:
            self._arm_watchdog()
            return
        if game.is_over:
            self.finished_at = finished_at if finished_at is not None else self.finished_at
            return
        now = self.now()
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

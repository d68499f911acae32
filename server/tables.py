"""Tables: the authoritative state of each game, its seats, timers and watchers.

Everything here runs on the server's one asyncio event loop and never awaits while it
changes a table, so the moves of one table are strictly ordered (the loop is the table's
single owner) and tables never block each other.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import itertools
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import structlog
from copas.v1 import copas_pb2
from google.protobuf.timestamp_pb2 import Timestamp

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
    RulesError,
    TrickWon,
    private_view,
    public_view,
)
from engine import actions as ev
from engine.actions import action_from_json, action_to_json
from engine.record import result_of, to_record
from server import codec
from server.config import Config
from server.errors import ServiceError, from_engine
from server.observability import Metrics
from server.storage import Storage

log = structlog.get_logger("copas.table")

REQUEST_MEMORY = 256  # request_ids remembered per seat for idempotent retries
NAME_MAX = 32


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def timestamp(seconds: float) -> Timestamp:
    ts = Timestamp()
    ts.FromNanoseconds(int(seconds * 1e9))
    return ts


@dataclass
class Seat:
    number: int
    name: str = ""
    is_taken: bool = False
    is_bot: bool = False
    token_hash: str = ""
    connections: int = 0
    requests: OrderedDict[str, tuple[int, ServiceError | None]] = field(
        default_factory=OrderedDict)


class Watcher:
    """One WatchTable stream: a bounded queue; falling behind turns the backlog into a
    fresh snapshot."""

    def __init__(self, seat: int | None, limit: int) -> None:
        self.seat = seat
        self.limit = limit
        self.queue: deque[copas_pb2.TableEvent] = deque()
        self.wakeup = asyncio.Event()
        self.needs_snapshot = False
        self.is_closed = False
        self.seen = 0  # the sequence of its last snapshot: older messages are not sent

    def push(self, message: copas_pb2.TableEvent) -> bool:
        """Queue a message; False when the watcher fell behind (backlog dropped)."""
        if self.needs_snapshot or message.sequence <= self.seen:
            return True
        if len(self.queue) >= self.limit:
            self.queue.clear()
            self.needs_snapshot = True
            self.wakeup.set()
            return False
        self.queue.append(message)
        self.wakeup.set()
        return True

    def close(self) -> None:
        self.is_closed = True
        self.wakeup.set()


class Table:
    def __init__(self, manager: TableManager, table_id: str, name: str, preset: str,
                 rules: Rules, seed: int | str, bot_seats: int, order: int) -> None:
        self.manager = manager
        self.metrics = manager.metrics
        self.id = table_id
        self.name = name
        self.preset = preset
        self.rules = rules
        self.rules_pb = codec.rules_to_pb(rules)
        self.seed = seed
        self.order = order
        self.created = manager.clock()
        self.seats = [Seat(i) for i in range(rules.players)]
        self.game: Game | None = None
        self.sequence = 0
        self.history: deque[copas_pb2.TableEvent] = deque(maxlen=manager.config.history)
        self.watchers: set[Watcher] = set()
        self.paused_until: float | None = None
        self.deadline: float | None = None
        self._deadline_key: tuple[Any, ...] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self.finished_at: float | None = None
        self.is_replaying = False
        self._request_id = ""
        # Published but not yet durable: (message, {seat: view}) pairs waiting for the disk.
        self.outbox: list[tuple[copas_pb2.TableEvent, dict[int | None, copas_pb2.TableView]]] = []
        self.log = log.bind(table_id=table_id)
        self.bot_seats = bot_seats
        for seat in self.seats[rules.players - bot_seats:]:
            seat.is_taken, seat.is_bot, seat.name = True, True, f"Bot {seat.number + 1}"

    def meta(self) -> dict[str, Any]:
        """What a restarted server needs to rebuild this table from its log."""
        return {"name": self.name, "preset": self.preset, "rules": self.rules.to_dict(),
                "seed": self.seed, "bots": self.bot_seats, "order": self.order}

    def _log(self, entry: dict[str, Any]) -> None:
        """Queue a log entry; a finished table's log is gone (its record stays)."""
        if not self.is_replaying and self.finished_at is None:
            self.manager.storage.append(self.id, entry)

    # ------------------------------------------------------------ reading

    @property
    def phase(self) -> int:
        if self.game is None:
            return copas_pb2.PHASE_WAITING_FOR_PLAYERS
        return codec.PHASE_TO_PB[self.game.phase]

    @property
    def is_finished(self) -> bool:
        return self.game is not None and self.game.is_over

    def summary(self) -> copas_pb2.TableSummary:
        totals = self.game.totals if self.game else [0] * len(self.seats)
        left = self.game.has_left if self.game else [False] * len(self.seats)
        return copas_pb2.TableSummary(
            table_id=self.id, display_name=self.name, preset=self.preset,
            rules=self.rules_pb, phase=self.phase,  # type: ignore[arg-type]
            hand_number=self.game.hand_number if self.game else -1,
            create_time=timestamp(self.created),
            seats=[copas_pb2.SeatSummary(seat=s.number, display_name=s.name, is_taken=s.is_taken,
                                         is_bot=s.is_bot, is_connected=s.connections > 0,
                                         has_left=left[s.number], total=totals[s.number])
                   for s in self.seats])

    def view(self, seat: int | None) -> copas_pb2.TableView:
        """Everything ``seat`` (None: a spectator) may see, built by the engine's views."""
        return self.seat_view(self.public_view(), seat)

    def seat_view(self, public: copas_pb2.TableView, seat: int | None) -> copas_pb2.TableView:
        """The public view plus what only ``seat`` may see (a copy; ``public`` is untouched)."""
        if seat is None:
            return public
        message = copas_pb2.TableView()
        message.CopyFrom(public)
        message.seat = seat
        if self.game is None:
            return message
        mine = private_view(self.game, seat)
        card_pb = codec.CARD_PB
        message.hand.extend(card_pb[c] for c in mine.hand)
        message.pass_choice.extend(card_pb[c] for c in mine.pass_choice)
        message.received.extend(card_pb[c] for c in mine.received)
        if self.paused_until is None:
            message.legal_cards.extend(card_pb[c] for c in mine.legal_cards)
            message.moon_choices.extend(codec.MOON_CHOICE_TO_PB[c] for c in mine.moon_choices)
        return message

    def public_view(self) -> copas_pb2.TableView:
        """What a spectator may see: built once per change, shared by every seat's view."""
        n = len(self.seats)
        message = copas_pb2.TableView(table_id=self.id, phase=self.phase,  # type: ignore[arg-type]
                                      rules=self.rules_pb, hand_number=-1)
        game = self.game
        if game is None:
            message.players.extend(copas_pb2.PlayerState(
                seat=s.number, display_name=s.name, is_bot=s.is_bot,
                is_connected=s.connections > 0) for s in self.seats)
            return message
        v = public_view(game)
        is_paused = self.paused_until is not None
        message.hand_number = v.hand_number
        message.pass_direction = codec.DIRECTION_TO_PB[v.pass_direction]
        message.hearts_broken = v.hearts_broken
        message.trick_number = v.trick_number
        if v.trick:
            message.trick.CopyFrom(codec.trick_to_pb(v.trick[0][0], v.trick))
        if v.last_trick is not None:
            message.last_trick.CopyFrom(codec.won_trick_to_pb(v.last_trick, n))
            message.last_trick_winner = v.last_trick.winner
        if not is_paused:
            message.to_act.extend(v.to_act)
            if self.deadline is not None:
                message.deadline.CopyFrom(timestamp(self.deadline))
        else:
            assert self.paused_until is not None
            message.paused_until.CopyFrom(timestamp(self.paused_until))
        message.players.extend(copas_pb2.PlayerState(
            seat=s.number, display_name=s.name, is_bot=s.is_bot, is_connected=s.connections > 0,
            has_left=v.has_left[s.number], card_count=v.card_counts[s.number],
            hand_points=v.hand_points[s.number], total=v.totals[s.number],
            has_passed=v.has_passed[s.number]) for s in self.seats)
        if v.moon_shooter is not None:
            message.moon_shooter = v.moon_shooter
        message.standings.extend(codec.standing_to_pb(r) for r in v.standings)
        if game.end_reason is not None:
            message.end_reason = codec.END_REASON_TO_PB[game.end_reason]
        return message

    def snapshot(self, watcher: Watcher, after_sequence: int) -> copas_pb2.TableEvent:
        """A snapshot for ``watcher``: the current view plus the events it missed."""
        watcher.queue.clear()  # the snapshot supersedes anything queued
        watcher.needs_snapshot = False
        watcher.seen = self.sequence
        snap = copas_pb2.Snapshot()
        if after_sequence > 0:
            missed = [e for e in self.history if e.sequence > after_sequence]
            oldest = self.history[0].sequence if self.history else self.sequence + 1
            snap.has_gap = after_sequence + 1 < oldest and after_sequence < self.sequence
            snap.missed_events.extend(missed)
        return copas_pb2.TableEvent(sequence=self.sequence, time=timestamp(self.manager.clock()),
                                    snapshot=snap, view=self.view(watcher.seat))

    # ------------------------------------------------------------ seats and watchers

    def join(self, name: str, seat_number: int | None) -> tuple[int, str]:
        if seat_number is not None:
            if not 0 <= seat_number < len(self.seats):
                raise ServiceError.invalid(f"seat must be 0..{len(self.seats) - 1}", "INVALID_SEAT")
            if self.seats[seat_number].is_taken:
                raise ServiceError.precondition(f"seat {seat_number} is taken", "SEAT_TAKEN")
            seat = self.seats[seat_number]
        else:
            free = [s for s in self.seats if not s.is_taken]
            if not free:
                raise ServiceError.exhausted("the table is full", "TABLE_FULL")
            seat = free[0]
        if self.game is not None:
            raise ServiceError.exhausted("the game has started", "TABLE_FULL")
        token = secrets.token_urlsafe(24)
        self._seat_player(seat.number, name, hash_token(token))
        return seat.number, token

    def _seat_player(self, number: int, name: str, token_hash: str) -> None:
        """Seat a player (only the hash of their token is kept); start when full."""
        seat = self.seats[number]
        seat.is_taken, seat.name, seat.token_hash = True, name, token_hash
        self._log({"k": "join", "seat": number, "name": name, "token": token_hash})
        self.manager.register_token(seat.token_hash, self.id, seat.number)
        self.log.info("player_joined", seat=seat.number)
        self.publish([{"player_joined": copas_pb2.PlayerJoined(seat=seat.number,
                                                               display_name=name)}])
        if all(s.is_taken for s in self.seats):
            self.start()

    # ------------------------------------------------------------ recovery

    def replay(self, entry: dict[str, Any]) -> None:
        """Re-apply one log entry through the same code that wrote it."""
        kind = entry["k"]
        if kind == "join":
            self._seat_player(entry["seat"], entry["name"], entry["token"])
        elif kind == "act":
            action = action_from_json(entry["a"])
            self.act(action.seat, action, entry.get("rid", ""))
        elif kind == "conn":
            self._connect(entry["seat"], entry["d"])
        elif kind == "timeout":
            self._on_timeout()
        elif kind == "resume":
            self._end_pause()
        elif kind == "pause":
            self.paused_until = entry["until"]
        elif kind == "deadline":
            self.deadline = entry["at"]
        else:
            raise ValueError(f"unknown log entry {kind!r}")

    def resume_after_recovery(self) -> None:
        """After a restart nobody is connected; timers resume from the stored times."""
        for seat in self.seats:
            if seat.connections > 0:
                seat.connections = 1
                self._connect(seat.number, -1)
        if self.game is None or self.game.is_over:
            return
        now = self.manager.clock()
        if self.paused_until is not None:
            self._set_timer(self.paused_until - now, self._end_pause)
        elif self.deadline is not None:
            self._set_timer(self.deadline - now, self._on_timeout)

    def start(self) -> None:
        self.game = Game(self.rules, self.seed)
        self.log.info("game_started")
        self.publish([{"game_started": copas_pb2.GameStarted()}])
        self.settle(list(self.game.started_events))

    def add_watcher(self, seat: int | None) -> Watcher:
        if len(self.watchers) >= self.manager.config.max_watchers_per_table:
            raise ServiceError.exhausted("too many watchers on this table", "TOO_MANY_WATCHERS")
        watcher = Watcher(seat, self.manager.config.watcher_queue)
        self.watchers.add(watcher)
        if seat is not None:
            self._connect(seat, +1)
        return watcher

    def _connect(self, seat: int, change: int) -> None:
        """A player's stream opened (+1) or closed (-1); the first and last are events."""
        state = self.seats[seat]
        state.connections += change
        if state.connections == (1 if change > 0 else 0):
            self._log({"k": "conn", "seat": seat, "d": change})
            self.publish([{"player_connection": copas_pb2.PlayerConnection(
                seat=seat, is_connected=change > 0)}])

    def remove_watcher(self, watcher: Watcher) -> None:
        if watcher not in self.watchers:
            return
        self.watchers.discard(watcher)
        if watcher.seat is not None and not self.manager.is_released(self.id) \
                and self.manager.is_accepting:
            self._connect(watcher.seat, -1)

    # ------------------------------------------------------------ actions

    def act(self, seat: int, action: Action, request_id: str) -> int:
        """Apply a player's action; return the sequence of its first event. Idempotent by
        ``request_id``: a retry returns the first answer, error included."""
        memory = self.seats[seat].requests
        if request_id and request_id in memory:
            sequence, error = memory[request_id]
            if error is not None:
                raise error
            return sequence
        kind = type(action).__name__
        self._request_id = request_id
        try:
            sequence = self._act(seat, action)
        except ServiceError as error:
            self.metrics.actions.labels(kind, error.reason).inc()
            self._remember(memory, request_id, (0, error))
            raise
        self.metrics.actions.labels(kind, "OK").inc()
        self._remember(memory, request_id, (sequence, None))
        return sequence

    @staticmethod
    def _remember(memory: OrderedDict[str, tuple[int, ServiceError | None]], request_id: str,
                  answer: tuple[int, ServiceError | None]) -> None:
        if request_id:
            memory[request_id] = answer
            while len(memory) > REQUEST_MEMORY:
                memory.popitem(last=False)

    def _act(self, seat: int, action: Action) -> int:
        game = self.game
        if game is None:
            if isinstance(action, Leave):
                return self._leave_before_start(seat)
            raise ServiceError.precondition("the game has not started: seats are still free",
                                            "GAME_NOT_STARTED")
        if self.paused_until is not None and not isinstance(action, Leave):
            raise ServiceError.precondition("the table is paused; wait for play to resume",
                                            "TABLE_PAUSED")
        try:
            events = game.apply(action)
        except EngineError as error:
            raise from_engine(error) from None
        self._log({"k": "act", "a": action_to_json(action), "rid": self._request_id})
        first = self.sequence + 1
        if isinstance(action, Leave):
            self.metrics.leavers.inc()
        self.settle(events)
        return first

    def _leave_before_start(self, seat_number: int) -> int:
        self._log({"k": "act", "a": {"type": "leave", "seat": seat_number},
                   "rid": self._request_id})
        seat = self.seats[seat_number]
        self.manager.forget_token(seat.token_hash)
        self.seats[seat_number] = Seat(seat_number)
        self.publish([{"player_left": copas_pb2.PlayerLeft(seat=seat_number, hand_number=-1)}])
        return self.sequence

    def settle(self, events: list[ev.Event]) -> None:
        """Let bots act, start a pause or arm the turn timer, until a human must act (or the
        game is over); publish each step once its deadline or pause is known, so every view
        sent carries the right one."""
        game = self.game
        assert game is not None
        while True:
            if game.is_over:
                self._finish()
                self.publish_engine(events)
                return
            pause = self._pause_after(events)
            if pause:
                self._start_pause(pause)
                self.publish_engine(events)
                return
            bot = next((s for s in game.to_act() if self.seats[s].is_bot), None)
            if bot is None:
                self._arm_deadline()
                self.publish_engine(events)
                return
            self._clear_deadline()  # a bot acts at once: no deadline to show
            self.publish_engine(events)
            events = game.apply(game.auto_action(bot), is_automatic=True)

    def _pause_after(self, events: list[ev.Event]) -> float:
        game = self.game
        assert game is not None
        if any(isinstance(e, HandScored) for e in events):
            return self.rules.hand_pause
        if any(isinstance(e, TrickWon) for e in events) and game.phase is Phase.PLAYING:
            return self.rules.trick_pause
        return 0.0

    def _clear_deadline(self) -> None:
        self._cancel_timer()
        self.deadline = None
        self._deadline_key = None

    def _start_pause(self, seconds: float) -> None:
        self._clear_deadline()
        self.paused_until = self.manager.clock() + seconds
        self._log({"k": "pause", "until": self.paused_until})
        self._set_timer(seconds, self._end_pause)

    def _end_pause(self) -> None:
        self._timer = None
        self._log({"k": "resume"})
        self.paused_until = None
        self.publish([{"pause_ended": copas_pb2.PauseEnded()}])
        self.settle([])

    def _arm_deadline(self) -> None:
        game = self.game
        assert game is not None
        if game.phase is Phase.PASSING:
            key: tuple[Any, ...] = (game.phase, game.hand_number)
            timeout = self.rules.pass_timeout
        elif game.phase is Phase.PLAYING:
            key = (game.phase, game.hand_number, game.trick_number, len(game.trick_cards))
            timeout = self.rules.play_timeout
        else:
            key = (game.phase, game.hand_number)
            timeout = self.rules.moon_timeout
        if key == self._deadline_key:
            return  # same turn (e.g. another seat passed): the deadline stands
        self._cancel_timer()
        self._deadline_key = key
        if not timeout:
            self.deadline = None
            return
        self.deadline = self.manager.clock() + timeout
        self._log({"k": "deadline", "at": self.deadline})
        self._set_timer(timeout, self._on_timeout)

    def _set_timer(self, delay: float, callback: Callable[[], None]) -> None:
        """The table's one timer (none while replaying a log: time there is stored)."""
        if not self.is_replaying:
            self._timer = asyncio.get_running_loop().call_later(max(0.0, delay), callback)

    def _on_timeout(self) -> None:
        """Out of time: the engine's automatic choice for every seat that still had to act."""
        self._timer = None
        game = self.game
        if game is None or game.is_over:
            return
        self._log({"k": "timeout"})
        self._deadline_key = None
        phase = game.phase
        for seat in list(game.to_act()):
            if game.phase is not phase or seat not in game.to_act():
                break
            self.metrics.timeouts.labels(phase.value).inc()
            self.log.info("turn_timed_out", seat=seat, phase=phase.value)
            self.publish([{"turn_timed_out": copas_pb2.TurnTimedOut(
                seat=seat, phase=codec.PHASE_TO_PB[phase])}])
            events = game.apply(game.auto_action(seat), is_automatic=True)
            self.settle(events)
            if self.paused_until is not None or game.is_over:
                break

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _finish(self) -> None:
        self._cancel_timer()
        self.deadline = None
        self.paused_until = None
        if self.finished_at is None:
            self.finished_at = self.manager.clock()
            if not self.is_replaying:
                self.manager.storage.finish_table(self.id, self.id, self.finished_at,
                                                  self.record_summary(), self.record())
            self.manager.schedule_release(self)

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

    # ------------------------------------------------------------ publishing

    def publish_engine(self, events: list[ev.Event]) -> None:
        if not events:
            return
        n = len(self.seats)
        for e in events:
            if isinstance(e, MoonShot):
                self.metrics.moons.inc()
            elif isinstance(e, GameOver):
                self.metrics.games_finished.labels(e.reason.value).inc()
            elif isinstance(e, PlayerLeft):
                self.log.info("player_left", seat=e.seat)
        self.publish([codec.event_to_pb(e, n) for e in events], engine_events=events)

    def publish(self, kinds: list[dict[str, Any]], engine_events: list[ev.Event] | None = None
                ) -> None:
        """Give each event a sequence, keep it for reconnects, and send it with the view
        after it to every watcher (views built once per seat)."""
        now = self.manager.clock()
        when = timestamp(now)
        bare = []
        for kind in kinds:
            self.sequence += 1
            message = copas_pb2.TableEvent(sequence=self.sequence, time=when, **kind)
            self.history.append(message)
            bare.append(message)
        self.metrics.events.inc(len(bare))
        if engine_events is not None:
            for e in engine_events:
                self.log.info("game_event", kind=type(e).__name__, **_public_fields(e))
        if not self.watchers or self.is_replaying:
            return
        views: dict[int | None, copas_pb2.TableView] = {}
        public = self.public_view()
        for watcher in self.watchers:
            if watcher.seat not in views and not watcher.needs_snapshot:
                views[watcher.seat] = self.seat_view(public, watcher.seat)
        for message in bare:
            self.outbox.append((message, views))
        self.manager.deliver_when_durable(self)

    def deliver(self, upto: int) -> None:
        """Send the outbox messages up to sequence ``upto`` (now durable) to the watchers."""
        count = 0
        while count < len(self.outbox) and self.outbox[count][0].sequence <= upto:
            count += 1
        ready, self.outbox = self.outbox[:count], self.outbox[count:]
        for watcher in list(self.watchers):
            for message, views in ready:
                view = views.get(watcher.seat)
                if view is None or watcher.needs_snapshot or message.sequence <= watcher.seen:
                    continue
                full = copas_pb2.TableEvent()
                full.CopyFrom(message)
                full.view.CopyFrom(view)
                if not watcher.push(full):
                    self.metrics.snapshots_for_slow.inc()
                    break

    def close_watchers(self) -> None:
        for watcher in list(self.watchers):
            watcher.close()


def _public_fields(event: ev.Event) -> dict[str, Any]:
    """Log fields of an engine event; engine events hold only public information."""
    out: dict[str, Any] = {}
    for key, value in event._asdict().items():
        if key == "standings":
            out[key] = [(r.seat, r.place, r.total) for r in value]
        elif key == "cards":
            out[key] = " ".join(map(str, value))
        elif isinstance(value, Card):
            out[key] = str(value)
        else:
            out[key] = str(value) if not isinstance(value, (int, bool, tuple, type(None))) \
                else value
    return out


def _page_size(requested: int) -> int:
    """A page size from a request: 0 means 20, at most 100."""
    if requested < 0:
        raise ServiceError.invalid("page_size must not be negative")
    return min(requested or 20, 100)


def _make_token(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode()


def _read_token(token: str, parse: Callable[[str], Any]) -> Any:
    """What a page token holds, read by ``parse``; INVALID_ARGUMENT when it is not a token
    this server gave."""
    try:
        return parse(base64.urlsafe_b64decode(token.encode()).decode())
    except ValueError:  # bad base64, bad UTF-8 and a bad number are all ValueErrors
        raise ServiceError.invalid("page_token is not one this server gave",
                                   "INVALID_PAGE_TOKEN") from None


def _record_position(text: str) -> tuple[float, str]:
    finished, _, record_id = text.partition("|")
    return float(finished), record_id


class TableManager:
    """Every table of the server, the player tokens, and the limits."""

    def __init__(self, config: Config, metrics: Metrics, storage: Storage | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.metrics = metrics
        self.storage = storage if storage is not None else Storage()
        self.clock = clock
        self._undelivered: dict[Table, int] = {}
        self._delivery: asyncio.Task[None] | None = None
        self.tables: dict[str, Table] = {}
        self.tokens: dict[str, tuple[str, int]] = {}
        self._order = itertools.count(1)
        self.is_accepting = True
        self._release_handles: dict[str, asyncio.TimerHandle] = {}

    def create(self, *, preset: str, overrides: dict[str, Any], bot_seats: int, name: str,
               seed: str | None) -> Table:
        if not self.is_accepting:
            raise ServiceError.unavailable("the server is shutting down; no new tables")
        if len(self.tables) >= self.config.max_tables:
            raise ServiceError.exhausted("the server has no room for another table",
                                         "SERVER_FULL")
        preset = preset or "online"
        try:
            rules = Rules.preset(preset, **{**self.config.rule_defaults, **overrides})
        except RulesError as error:
            raise from_engine(error) from None
        if not 0 <= bot_seats <= rules.players:
            raise ServiceError.invalid(f"bot_seats must be 0..{rules.players}", "INVALID_BOT_SEATS")
        if len(name) > 64:
            raise ServiceError.invalid("display_name is at most 64 characters", "INVALID_NAME")
        if seed is not None and not self.config.allow_seed:
            raise ServiceError.denied("this server does not accept explicit seeds "
                                      "(start it with --allow-seed)", "SEED_NOT_ALLOWED")
        table_id = "t_" + secrets.token_urlsafe(9)
        table = Table(self, table_id, name or table_id, preset, rules,
                      seed if seed is not None else secrets.randbits(64), bot_seats,
                      next(self._order))
        self.tables[table_id] = table
        self.storage.create_table(table_id, table.created, table.meta())
        table.log.info("table_created", preset=preset, players=rules.players, bots=bot_seats)
        if bot_seats == rules.players:
            table.start()
        return table

    def get(self, table_id: str) -> Table:
        if not table_id:
            raise ServiceError.invalid("table_id is required", "MISSING_TABLE_ID")
        table = self.tables.get(table_id)
        if table is None:
            raise ServiceError.not_found(f"no table {table_id!r}")
        return table

    def page(self, page_size: int, page_token: str) -> tuple[list[Table], str]:
        size = _page_size(page_size)
        newest = sorted(self.tables.values(), key=lambda t: -t.order)
        if page_token:
            before = _read_token(page_token, int)
            newest = [t for t in newest if t.order < before]
        page = newest[:size]
        token = _make_token(str(page[-1].order)) if len(newest) > size else ""
        return page, token

    def join(self, table_id: str, name: str, seat: int | None) -> tuple[Table, int, str]:
        name = name.strip()
        if not 1 <= len(name) <= NAME_MAX:
            raise ServiceError.invalid(f"display_name must be 1..{NAME_MAX} characters",
                                       "INVALID_NAME")
        table = self.get(table_id)
        if self.players_seated() >= self.config.max_players:
            raise ServiceError.exhausted("the server has no room for another player",
                                         "SERVER_FULL")
        seat_number, token = table.join(name, seat)
        return table, seat_number, token

    def authenticate(self, token: str | None, table_id: str) -> tuple[Table, int]:
        """The table and seat a token belongs to."""
        if not token:
            raise ServiceError.unauthenticated(
                "missing player token: send metadata 'authorization: Bearer <token>'")
        entry = self.tokens.get(hash_token(token))
        if entry is None:
            raise ServiceError.unauthenticated("unknown player token")
        if table_id and entry[0] != table_id:
            self.get(table_id)  # NOT_FOUND for an unknown table
            raise ServiceError.denied("this token belongs to another table")
        return self.get(entry[0]), entry[1]

    def seat_for_watch(self, token: str | None, table_id: str) -> tuple[Table, int | None]:
        if not token:
            return self.get(table_id), None
        table, seat = self.authenticate(token, table_id)
        return table, seat

    def register_token(self, token_hash: str, table_id: str, seat: int) -> None:
        self.tokens[token_hash] = (table_id, seat)

    def forget_token(self, token_hash: str) -> None:
        self.tokens.pop(token_hash, None)

    def players_seated(self) -> int:
        return len(self.tokens)

    def schedule_release(self, table: Table) -> None:
        ttl = self.config.finished_table_ttl
        handle = asyncio.get_running_loop().call_later(ttl, self.release, table.id)
        self._release_handles[table.id] = handle

    def is_released(self, table_id: str) -> bool:
        return table_id not in self.tables

    def release(self, table_id: str) -> None:
        """Forget a finished table: its tokens stop working, its watchers are closed."""
        table = self.tables.pop(table_id, None)
        self._release_handles.pop(table_id, None)
        if table is None:
            return
        for seat in table.seats:
            if seat.token_hash:
                self.forget_token(seat.token_hash)
        table.close_watchers()
        table.log.info("table_released")

    def close_all(self) -> None:
        for handle in self._release_handles.values():
            handle.cancel()
        for table in self.tables.values():
            table._cancel_timer()
            table.close_watchers()

    def live(self) -> Iterator[Table]:
        return iter(self.tables.values())

    # ------------------------------------------------------------ durability

    def deliver_when_durable(self, table: Table) -> None:
        """Show a table's new events to its watchers once they are on disk."""
        self._undelivered[table] = table.sequence
        if self._delivery is None:
            self._delivery = asyncio.create_task(self._deliver_loop())

    async def _deliver_loop(self) -> None:
        try:
            while self._undelivered:
                marks, self._undelivered = self._undelivered, {}
                await self.storage.sync()
                for table, upto in marks.items():
                    table.deliver(upto)
        finally:
            self._delivery = None

    def recover(self) -> tuple[int, int]:
        """Rebuild every unfinished table from its log; a table whose log cannot be replayed
        is marked failed and the others still recover. Returns (recovered, failed)."""
        recovered = failed = 0
        for stored in self.storage.load_open_tables():
            table: Table | None = None
            try:
                if stored.error:
                    raise ValueError(stored.error)
                meta = stored.meta
                table = Table(self, stored.table_id, meta["name"], meta["preset"],
                              Rules.from_dict(meta["rules"]), meta["seed"], meta["bots"],
                              meta["order"])
                self._order = itertools.count(max(meta["order"] + 1, next(self._order)))
                table.created = stored.created
                table.is_replaying = True
                self.tables[table.id] = table
                for entry in stored.entries:
                    table.replay(entry)
                table.is_replaying = False
                table.resume_after_recovery()
                recovered += 1
            except Exception as exc:  # any unreadable or inconsistent log
                failed += 1
                self.metrics.tables_failed.inc()
                log.error("table_recovery_failed", table_id=stored.table_id,
                          error=f"{type(exc).__name__}: {exc}")
                self.storage.mark_failed(stored.table_id)
                if table is not None:
                    self.tables.pop(table.id, None)
                    for seat in table.seats:
                        if seat.token_hash:
                            self.forget_token(seat.token_hash)
        log.info("tables_recovered", recovered=recovered, failed=failed)
        return recovered, failed

    def record(self, record_id: str) -> dict[str, Any]:
        if not record_id:
            raise ServiceError.invalid("record_id is required", "MISSING_RECORD_ID")
        found = self.storage.get_record(record_id)
        if found is None:
            raise ServiceError.not_found(f"no game record {record_id!r}", "RECORD_NOT_FOUND")
        return found

    def record_page(self, page_size: int, page_token: str
                    ) -> tuple[list[dict[str, Any]], str]:
        size = _page_size(page_size)
        before = _read_token(page_token, _record_position) if page_token else None
        rows = self.storage.list_records(size + 1, before)
        token = ""
        if len(rows) > size:
            rows = rows[:size]
            token = _make_token(f"{rows[-1][0]!r}|{rows[-1][1]}")
        return [summary for _, _, summary in rows], token

    def prune_records(self) -> int:
        removed = self.storage.prune_records(self.config.keep_records,
                                             self.config.keep_records_days * 86400,
                                             self.clock())
        if removed:
            log.info("records_pruned", removed=removed)
        return removed

"""A table's numbered events: the latest sequence, the recent history a snapshot's missed
events come from, and the events of the step under way, handed over whole at its end."""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass
from typing import Any

import structlog
from copas.v1 import copas_pb2
from google.protobuf.message import Message

from engine import Card, GameOver, MoonShot, Phase, PlayerLeft
from engine import actions as ev
from server import codec
from server.observability import Metrics
from server.wire import timestamp


@dataclass(frozen=True, slots=True)
class StepEvents:
    """What one step made."""

    events: list[copas_pb2.TableEvent]
    """Its events in order, the last marked ``is_last_in_action``."""
    engine: list[ev.Event]
    """The engine's events among them, as the engine told them."""
    is_numbered: bool
    """It numbered an event (else it only announced presence)."""
    is_logged: bool
    """It wrote a log entry (its numbered events replay from it)."""


class TableEvents:
    """The events of one table: numbered ones kept in a bounded history, announced ones
    (presence) shown once; each carries its step's time, kept to the millisecond."""

    __slots__ = ("_engine", "_events", "_is_logged", "_is_numbered", "_players", "history",
                 "last_event_at", "sequence", "step_time")

    def __init__(self, players: int, history: int, created: float) -> None:
        self._players = players
        self.sequence = 0
        self.history: deque[copas_pb2.TableEvent] = deque(maxlen=history)
        self.last_event_at = created  # the time of the latest numbered event
        self.step_time = created  # when the step happened (its events' time, its entry's)
        self._events: list[copas_pb2.TableEvent] = []
        self._engine: list[ev.Event] = []
        self._is_numbered = False
        self._is_logged = False

    def begin(self, at: float) -> None:
        """A step starts at ``at``."""
        self.step_time = round(at, 3)

    def note_logged(self) -> None:
        """The step wrote a log entry."""
        self._is_logged = True

    def number(self, kind: str, body: Message) -> None:
        """Number the next event (``kind``, TableEvent's oneof field, holding ``body``) and
        keep it in the history."""
        self.sequence += 1
        self._is_numbered = True
        self.last_event_at = self.step_time
        message = self._event(kind, body)
        self.history.append(message)
        self._events.append(message)

    def announce(self, kind: str, body: Message) -> None:
        """An event outside the history (presence): shown live with its view but not
        numbered (it repeats the latest sequence), so it is neither logged nor replayed, and
        a restart leaves no hole where it was."""
        self._events.append(self._event(kind, body))

    def number_engine(self, events: list[ev.Event], phase_before: Phase | None = None
                      ) -> None:
        """Number the engine's events; ``phase_before`` is where a leave happened."""
        for event in events:
            kind, body = codec.event_to_pb(event, self._players)
            if phase_before is not None and isinstance(body, copas_pb2.PlayerLeft):
                body.phase = codec.PHASE_TO_PB[phase_before]
            self.number(kind, body)
        self._engine.extend(events)

    def end(self) -> StepEvents | None:
        """The step is over: what it made (None when no event), and a fresh start."""
        events, self._events = self._events, []
        engine, self._engine = self._engine, []
        is_logged, self._is_logged = self._is_logged, False
        is_numbered, self._is_numbered = self._is_numbered, False
        if not events:
            return None
        events[-1].is_last_in_action = True
        return StepEvents(events, engine, is_numbered, is_logged)

    def skip_to(self, sequence: int) -> None:
        """Replay: the events numbered up to ``sequence`` that it did not rebuild were shown
        but no log entry holds them (a seat given up before the game: its join row went).
        They keep their numbers, and the history starts after them, so a snapshot that reaches
        back past them says ``has_gap`` instead of skipping them."""
        if sequence > self.sequence:
            self.history.clear()
            self.sequence = sequence

    def missed_since(self, after_sequence: int) -> copas_pb2.Snapshot:
        """A snapshot's events after ``after_sequence`` (0: none asked), with ``has_gap``
        when the history no longer reaches back to it."""
        snap = copas_pb2.Snapshot()
        if after_sequence > 0:  # the history holds consecutive events ending at the latest
            history = self.history
            oldest = history[0].sequence if history else self.sequence + 1
            snap.has_gap = after_sequence + 1 < oldest and after_sequence < self.sequence
            snap.missed_events.extend(e for e in history if e.sequence > after_sequence)
        return snap

    def _event(self, kind: str, body: Message) -> copas_pb2.TableEvent:
        field: dict[str, Any] = {kind: body}  # TableEvent's oneof, by the event's kind
        return copas_pb2.TableEvent(sequence=self.sequence, time=timestamp(self.step_time),
                                    **field)


def observe(events: list[ev.Event], metrics: Metrics, log: structlog.stdlib.BoundLogger
            ) -> None:
    """Count and log (at debug) the engine's events of a live step."""
    is_debug = log.is_enabled_for(logging.DEBUG)
    for event in events:
        if is_debug:
            log.debug("game_event", kind=type(event).__name__, **_public_fields(event))
        if isinstance(event, MoonShot):
            metrics.moons.inc()
        elif isinstance(event, GameOver):
            metrics.games_finished.labels(event.reason.value.lower()).inc()
        elif isinstance(event, PlayerLeft):
            log.debug("player_left", seat=event.seat)


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

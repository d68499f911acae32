"""A table's numbered events: the latest sequence, the recent history a snapshot's missed
events come from, and the events of the step under way, handed over whole at its end."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from itertools import islice
from typing import Any

from copas.v1 import copas_pb2
from google.protobuf.message import Message

from server.games import GameEvent
from server.wire import field, timestamp, varint

# A game's event as TableEvent's oneof field (``GameModule.event_to_pb``): its name and its
# message, from the event, the number of players and the phase a leave happened in.
EventEncoder = Callable[[GameEvent, int, int | None], tuple[str, Message]]

_HAS_GAP = varint(2 << 3) + varint(1)  # Snapshot.has_gap = true


@dataclass(frozen=True, slots=True)
class ActResult:
    """What a person's action numbered (a retry: what the first one did)."""

    first: int
    """The sequence of its first event."""
    last: int
    """The table's latest sequence after it: its result follows the events up to here."""


@dataclass(frozen=True, slots=True)
class StepEvents:
    """What one step made."""

    events: list[tuple[int, bytes]]
    """Its events in order, serialized with their sequences, the last marked
    ``is_last_in_action``."""
    engine: list[GameEvent]
    """The game's events among them, as its engine told them."""
    numbered: list[tuple[int, bytes]]
    """Its numbered events among them, as the history keeps them (what a snapshot may
    list: not an announced one, which repeats a sequence)."""
    is_logged: bool
    """It wrote a log entry (its numbered events replay from it)."""

    @property
    def is_numbered(self) -> bool:
        """It numbered an event (else it only announced presence)."""
        return bool(self.numbered)


class TableEvents:
    """The events of one table: numbered ones kept in a bounded history, announced ones
    (presence) shown once; each carries its step's time, kept to the millisecond.

    The history holds each event serialized, as it was shown: a parsed TableEvent costs about
    900 bytes of memory, its bytes under 100, and at --history 1,024 a long game's history was
    most of what a table held. The events it holds are consecutive and end at ``_last_kept``,
    so their numbers are not kept beside them (a tuple and an int: 84 bytes an event, nearly
    half of what the history held)."""

    __slots__ = ("_encode", "_engine", "_events", "_is_logged", "_last_kept", "_numbered",
                 "_players", "history", "last_event_at", "sequence", "step_time")

    def __init__(self, players: int, history: int, created: float, encode: EventEncoder
                 ) -> None:
        self._players = players
        self._encode = encode
        self.sequence = 0
        self.history: deque[bytes] = deque(maxlen=history)
        self._last_kept = 0  # the number of the history's latest event
        self.last_event_at = created  # the time of the latest numbered event
        self.step_time = created  # when the step happened (its events' time, its entry's)
        self._events: list[copas_pb2.TableEvent] = []
        self._numbered: list[bool] = []  # each of the step's events: numbered (kept)
        self._engine: list[GameEvent] = []
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
        self.last_event_at = self.step_time
        self._events.append(self._event(kind, body))
        self._numbered.append(True)

    def announce(self, kind: str, body: Message) -> None:
        """An event outside the history (presence): shown live with its view but not
        numbered (it repeats the latest sequence), so it is neither logged nor replayed, and
        a restart leaves no hole where it was."""
        self._events.append(self._event(kind, body))
        self._numbered.append(False)

    def number_engine(self, events: list[GameEvent], phase_before: int | None = None
                      ) -> None:
        """Number the game's events; ``phase_before`` (copas.v1 ``Phase``) is where a leave
        happened."""
        encode, players = self._encode, self._players
        for event in events:
            kind, body = encode(event, players, phase_before)
            self.number(kind, body)
        self._engine.extend(events)

    def end(self) -> StepEvents | None:
        """The step is over: what it made (None when no event), and a fresh start. Its
        numbered events join the history, serialized as they are shown."""
        events, self._events = self._events, []
        numbered, self._numbered = self._numbered, []
        engine, self._engine = self._engine, []
        is_logged, self._is_logged = self._is_logged, False
        if not events:
            return None
        events[-1].is_last_in_action = True
        serialized = [(e.sequence, e.SerializeToString()) for e in events]
        kept = [event for event, is_kept in zip(serialized, numbered, strict=True) if is_kept]
        if kept:
            self.history.extend(event for _, event in kept)
            self._last_kept = kept[-1][0]
        return StepEvents(serialized, engine, kept, is_logged)

    def skip_to(self, sequence: int) -> None:
        """Replay: the events numbered up to ``sequence`` that it did not rebuild were shown
        but no log entry holds them (a seat given up before the game: its join row went).
        They keep their numbers, and the history starts after them, so a snapshot that reaches
        back past them says ``has_gap`` instead of skipping them."""
        if sequence > self.sequence:
            self.history.clear()
            self.sequence = self._last_kept = sequence

    def missed_since(self, after_sequence: int, is_capped: bool = False) -> bytes:
        """A snapshot's events after ``after_sequence`` (0: none asked), as a serialized
        Snapshot, with ``has_gap`` when the history no longer reaches back to it (or
        ``is_capped``: the caller left the earlier ones out)."""
        missed: list[bytes] = []
        has_gap = is_capped
        if after_sequence > 0:  # the history holds consecutive events ending at the latest
            history = self.history
            oldest = self._last_kept - len(history) + 1 if history else self.sequence + 1
            has_gap = has_gap or (after_sequence + 1 < oldest and after_sequence < self.sequence)
            missed = [field(1, e) for e in
                      islice(history, max(0, after_sequence + 1 - oldest), None)]
        return b"".join(missed) + (_HAS_GAP if has_gap else b"")

    def _event(self, kind: str, body: Message) -> copas_pb2.TableEvent:
        field: dict[str, Any] = {kind: body}  # TableEvent's oneof, by the event's kind
        return copas_pb2.TableEvent(sequence=self.sequence, time=timestamp(self.step_time),
                                    **field)


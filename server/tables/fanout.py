"""Fan-out: a table's WatchTable streams, and the events waiting to be shown to them.

A stream belongs to the token that opened it (or to nobody: a spectator). When that token
stops being valid its streams are closed with a status saying why, so no later occupant of
the seat can ever reach them. Each stream's queue is bounded in messages and in bytes; a
stream that falls behind loses its backlog and gets a fresh snapshot instead.

Events reach the streams only once they are durable: a step's events wait in the outbox
until the store has committed them (``deliver``). They travel pre-serialized: each event is
serialized once, each watched seat's view once per step, and a stream's message is their
concatenation (protobuf fields concatenate), shared by every stream of that seat.

A stream gets the steps staged after its snapshot, and none before (the snapshot shows them):
steps are counted, not told apart by sequence, because a presence event (a player's stream
opened or closed) is not numbered: it repeats the table's latest sequence.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

from server.errors import ServiceError
from server.wire import varint

Views = dict[int | None, bytes]  # seat (None: spectator) -> its view, serialized
Staged = list[tuple[int, bytes]]  # (sequence, TableEvent without its view, serialized)


class Watcher:
    """One stream of a table's events (WatchTable or Play): a bounded queue of serialized
    WatchTableResponse messages (the same bytes as a PlayResponse's event); falling behind
    turns the backlog into a fresh snapshot."""

    __slots__ = ("close_error", "is_closed", "last_staged", "max_bytes", "max_messages",
                 "needs_snapshot", "queue", "queued_bytes", "seat", "seen", "shown_step",
                 "token_hash", "wakeup")

    def __init__(self, seat: int | None, token_hash: str | None, max_messages: int,
                 max_bytes: int) -> None:
        self.seat = seat
        self.token_hash = token_hash
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        # (sequence, message, when its step was staged: time.monotonic())
        self.queue: deque[tuple[int, bytes, float]] = deque()
        self.queued_bytes = 0
        self.last_staged = 0.0  # the step of the message popped last: when it was staged
        self.wakeup = asyncio.Event()
        self.needs_snapshot = False
        self.is_closed = False
        self.close_error: ServiceError | None = None
        self.seen = 0  # the sequence of its last snapshot
        self.shown_step = 0  # the last step its snapshot showed: older ones are not sent

    @property
    def is_player(self) -> bool:
        return self.token_hash is not None

    def push(self, sequence: int, message: bytes, staged: float = 0.0) -> bool:
        """Queue a message; False when the watcher fell behind (backlog dropped)."""
        if self.needs_snapshot or self.is_closed:
            return True
        size = len(message)
        if len(self.queue) >= self.max_messages or self.queued_bytes + size > self.max_bytes:
            self.clear()
            self.needs_snapshot = True
            self.wakeup.set()
            return False
        self.queue.append((sequence, message, staged))
        self.queued_bytes += size
        self.wakeup.set()
        return True

    def pop(self) -> tuple[int, bytes]:
        """The oldest queued message, with its event's sequence."""
        sequence, message, self.last_staged = self.queue.popleft()
        self.queued_bytes -= len(message)
        return sequence, message

    def clear(self) -> None:
        self.queue.clear()
        self.queued_bytes = 0

    def close(self, error: ServiceError | None = None) -> None:
        """End the stream: normally (None) or with ``error`` as its status."""
        self.is_closed = True
        self.close_error = error
        self.clear()
        self.wakeup.set()


class Fanout:
    """The streams of one table and its events waiting for the disk."""

    def __init__(self) -> None:
        self.watchers: set[Watcher] = set()
        self._spectators = 0
        self._by_token: dict[str, int] = {}
        # Sequenced but not yet durable: (step, events, views after them) per step.
        self.outbox: list[tuple[int, Staged, Views, float]] = []  # (step, .., staged at)
        self.steps = 0  # steps staged so far (a snapshot shows every one of them)

    def __len__(self) -> int:
        return len(self.watchers)

    def spectators(self) -> int:
        return self._spectators

    def streams_of(self, token_hash: str) -> int:
        return self._by_token.get(token_hash, 0)

    def check_room(self, token_hash: str | None, max_spectators: int, max_per_token: int
                   ) -> None:
        """:raises ServiceError: TOO_MANY_WATCHERS (a spectator, ``token_hash`` None) or
            TOO_MANY_STREAMS (a player) when another stream would pass its bound."""
        if token_hash is None:
            if self._spectators >= max_spectators:
                raise ServiceError.exhausted("too many spectators on this table",
                                             "TOO_MANY_WATCHERS")
        elif self.streams_of(token_hash) >= max_per_token:
            raise ServiceError.exhausted(
                f"at most {max_per_token} streams per player; close one first",
                "TOO_MANY_STREAMS")

    def add(self, watcher: Watcher) -> None:
        self.watchers.add(watcher)
        if watcher.token_hash is None:
            self._spectators += 1
        else:
            self._by_token[watcher.token_hash] = self._by_token.get(watcher.token_hash, 0) + 1

    def remove(self, watcher: Watcher) -> bool:
        """Forget a stream; False when it was already gone (closed by the table)."""
        if watcher not in self.watchers:
            return False
        self.watchers.discard(watcher)
        if watcher.token_hash is None:
            self._spectators -= 1
        else:
            left = self._by_token[watcher.token_hash] - 1
            if left:
                self._by_token[watcher.token_hash] = left
            else:
                del self._by_token[watcher.token_hash]
        return True

    def close_token(self, token_hash: str, error: ServiceError) -> int:
        """Close (and forget) every stream of a token that is no longer valid."""
        doomed = [w for w in self.watchers if w.token_hash == token_hash]
        for watcher in doomed:
            self.remove(watcher)
            watcher.close(error)
        return len(doomed)

    def close_all(self, error: ServiceError | None = None) -> None:
        for watcher in list(self.watchers):
            self.remove(watcher)
            watcher.close(error)
        self.outbox.clear()

    def snapshot_sent(self, watcher: Watcher, sequence: int) -> None:
        """``watcher`` gets a snapshot as of ``sequence``: it supersedes anything queued and
        shows every step staged so far."""
        watcher.clear()
        watcher.needs_snapshot = False
        watcher.seen = sequence
        watcher.shown_step = self.steps

    def seats_watching(self) -> set[int | None]:
        """The views a new step needs: one per watched seat (None: the spectators')."""
        return {w.seat for w in self.watchers if not w.needs_snapshot}

    def stage(self, events: Staged, views: Views) -> None:
        self.steps += 1
        self.outbox.append((self.steps, events, views, time.monotonic()))

    def deliver(self, upto: int, on_resync: Callable[[], None]) -> None:
        """Send the staged events up to sequence ``upto`` (now durable) to the streams."""
        count = 0
        while count < len(self.outbox) and self.outbox[count][1][-1][0] <= upto:
            count += 1
        if not count:
            return
        ready, self.outbox = self.outbox[:count], self.outbox[count:]
        if not self.watchers:
            return
        for step, events, views, staged in ready:
            built: dict[int | None, list[bytes]] = {}
            for watcher in list(self.watchers):
                if watcher.needs_snapshot or step <= watcher.shown_step:
                    continue
                messages = built.get(watcher.seat)
                if messages is None:
                    view = views.get(watcher.seat)
                    if view is None:
                        continue
                    messages = built[watcher.seat] = [response(event, view)
                                                      for _, event in events]
                for (sequence, _), message in zip(events, messages, strict=True):
                    if not watcher.push(sequence, message, staged):
                        on_resync()
                        break


_VIEW_TAG = varint(3 << 3 | 2)  # TableEvent.view
_EVENT_TAG = varint(1 << 3 | 2)  # WatchTableResponse.event


def response(event: bytes, view: bytes) -> bytes:
    """A serialized WatchTableResponse: the event with its view, by concatenation."""
    full = event + _VIEW_TAG + varint(len(view)) + view
    return _EVENT_TAG + varint(len(full)) + full

"""Fan-out: a table's WatchTable streams, and the events waiting to be shown to them.

A stream belongs to the token that opened it (or to nobody: a spectator). When that token
stops being valid its streams are closed with a status saying why, so no later occupant of
the seat can ever reach them. Each stream's queue is bounded in messages and in bytes; a
stream that falls behind loses its backlog and gets a fresh snapshot instead.

Events reach the streams only once they are durable: a step's events wait in the outbox
until the store has committed them (``deliver``). They travel pre-serialized: each event is
serialized once, each watched seat's view once per step, and a stream's message is their
concatenation (protobuf fields concatenate), shared by every stream of that seat.

A stream opened with ``is_batched`` gets one message per commit instead (issue 29): an
EventBatch of every event of the commit's steps it has not seen, in order, the view after
the last step on the last event only; built once per seat (and per first step shown) and
shared like the others. Its first message is the snapshot as a batch's only event.

A stream gets the steps staged after its snapshot, and none before (the snapshot shows them):
steps are counted, not told apart by sequence, because a presence event (a player's stream
opened or closed) is not numbered: it repeats the table's latest sequence.

Spectators cost the players little: their updates are coalesced per table. A step that comes
after a quiet ``spectator_tick`` goes to them at once, as to the players; the steps that come
sooner wait for the tick's end and then go as **one** message for all of them, built once: a
snapshot whose missed events are the steps' numbered events (the ones the history keeps: never
a presence event or a reaction, which repeat a sequence, even in a step that numbered others)
and whose view is the latest. So a spectator costs at most one write per tick, however fast the
table plays.

A snapshot is charged for what it lists: a spectator's lists at most ``snapshot_max_events``
missed events (the latest, then ``has_gap``), and the serialized list is cached until the
table's next numbered event, so many opens with the same ``after_sequence`` build it once.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from copas.v1 import copas_pb2

from server.errors import ServiceError
from server.wakeup import Wakeup
from server.wire import field, timestamp, varint

Views = dict[int | None, bytes]  # seat (None: spectator) -> its view, serialized
Staged = list[tuple[int, bytes]]  # (sequence, TableEvent without its view, serialized)
SNAPSHOT_CACHE = 16  # serialized lists of missed events kept per table (for one sequence)


class Watcher:
    """One stream of a table's events (WatchTable or Play): a bounded queue of serialized
    WatchTableResponse messages (the same bytes as a PlayResponse's event); falling behind
    turns the backlog into a fresh snapshot."""

    __slots__ = ("close_error", "is_batched", "is_closed", "last_staged", "max_bytes",
                 "max_messages", "needs_snapshot", "queue", "queued_bytes", "seat", "seen",
                 "shown_step", "token_hash", "wakeup")

    def __init__(self, seat: int | None, token_hash: str | None, max_messages: int,
                 max_bytes: int, is_batched: bool = False) -> None:
        self.seat = seat
        self.token_hash = token_hash
        self.is_batched = is_batched  # one EventBatch per commit instead of one per event
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        # (sequence, message, when its step was staged: time.monotonic()). A list, not a
        # deque: it holds 0 or 1 most of the time, and an empty deque takes 600 bytes (a
        # list 56); taking from its front moves at most ``max_messages`` pointers.
        self.queue: list[tuple[int, bytes, float]] = []
        self.queued_bytes = 0
        self.last_staged = 0.0  # the step of the message popped last: when it was staged
        self.wakeup = Wakeup()  # its one task's: Play's writer, WatchTable's
        self.needs_snapshot = False
        self.is_closed = False
        self.close_error: ServiceError | None = None
        self.seen = 0  # the sequence of its last snapshot
        self.shown_step = 0  # the last step its snapshot showed: older ones are not sent

    @property
    def is_player(self) -> bool:
        return self.token_hash is not None

    def opening(self, event: bytes) -> bytes:
        """A snapshot (a serialized TableEvent) as this stream's message: a WatchTableResponse
        (or PlayResponse) with it as its event, or its batch's only event."""
        message = event_response(event)
        return batch_response(message) if self.is_batched else message

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
        sequence, message, self.last_staged = self.queue.pop(0)
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

    def __init__(self, spectator_tick: float = 0.0, snapshot_max_events: int = 0,
                 clock: Callable[[], float] = time.time,
                 on_list_built: Callable[[], object] = lambda: None) -> None:
        """``spectator_tick``: seconds spectators' updates are coalesced over (0: not);
        ``snapshot_max_events``: missed events a spectator's snapshot lists at most (0: all
        kept); ``clock``: the table's time (a coalesced snapshot's); ``on_list_built``:
        called for each list of missed events serialized (not found in the cache)."""
        self.watchers: set[Watcher] = set()
        self._spectators = 0
        self._by_token: dict[str, int] = {}
        # Sequenced but not yet durable: (step, events, views after them, when staged, its
        # numbered events among them) per step.
        self.outbox: list[tuple[int, Staged, Views, float, Staged]] = []
        self.steps = 0  # steps staged so far (a snapshot shows every one of them)
        self.spectator_tick = spectator_tick
        self.snapshot_max_events = snapshot_max_events
        self._clock = clock
        self._on_list_built = on_list_built
        # Durable steps waiting for the spectators' tick: (step, events, their view,
        # staged at, its numbered events).
        self._batch: list[tuple[int, Staged, bytes, float, Staged]] = []
        self._next_flush = 0.0  # loop time before which spectators' steps wait
        self._timer: asyncio.TimerHandle | None = None
        self._on_resync: Callable[[], None] = lambda: None
        self._lists: dict[tuple[int, bool], bytes] = {}  # (after, is_capped) -> list
        self._lists_sequence = -1  # the table's sequence the cached lists end at
        self._live: set[int] = set()  # staged or batched steps that are reactions (issue 30)

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
        self._batch.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

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

    def stage(self, events: Staged, views: Views, numbered: Staged | None = None) -> None:
        """A step's events and the views after it, until the store commits them;
        ``numbered``: its numbered events among them (None: all of them), the others
        (presence) repeat a sequence and no snapshot lists them."""
        self.steps += 1
        self.outbox.append((self.steps, events, views, time.monotonic(),
                            events if numbered is None else numbered))

    def stage_live(self, event: tuple[int, bytes], views: Views) -> None:
        """A reaction (issue 30): a step of its own, not numbered (it repeats the latest
        sequence), shown as it comes; coalesced spectators get it after their snapshot."""
        self.stage([event], views, numbered=[])
        self._live.add(self.steps)

    def deliver(self, upto: int, on_resync: Callable[[], None]) -> None:
        """Send the staged events up to sequence ``upto`` (now durable) to the streams."""
        count = 0
        while count < len(self.outbox) and self.outbox[count][1][-1][0] <= upto:
            count += 1
        if not count:
            return
        ready, self.outbox = self.outbox[:count], self.outbox[count:]
        try:
            self._deliver(ready, on_resync)
        finally:  # a reaction is kept no longer than its step
            if self._live:
                self._live -= {r[0] for r in ready} - {b[0] for b in self._batch}

    def _deliver(self, ready: list[tuple[int, Staged, Views, float, Staged]],
                 on_resync: Callable[[], None]) -> None:
        if not self.watchers:
            return
        coalesce = self.spectator_tick > 0 and self._spectators > 0
        batched: dict[tuple[int | None, int], tuple[int, bytes, float] | None] = {}
        for watcher in list(self.watchers):
            if not watcher.is_batched or watcher.needs_snapshot \
                    or (coalesce and watcher.token_hash is None):
                continue
            key = (watcher.seat, watcher.shown_step)
            if key not in batched:
                batched[key] = _commit_batch(ready, watcher.seat, watcher.shown_step)
            found = batched[key]
            if found is not None and not watcher.push(*found):
                on_resync()
        for step, events, views, staged, numbered in ready:
            built: dict[int | None, list[bytes]] = {}
            for watcher in list(self.watchers):
                if watcher.needs_snapshot or step <= watcher.shown_step or watcher.is_batched:
                    continue
                if coalesce and watcher.token_hash is None:
                    continue  # a spectator: the batch below
                messages = built.get(watcher.seat)
                if messages is None:
                    view = views.get(watcher.seat)
                    if view is None:
                        continue
                    messages = built[watcher.seat] = [response(event, view)
                                                      for _, event in events]
                _push_all(watcher, events, messages, staged, on_resync)
            spectators_view = views.get(None)
            if coalesce and spectators_view is not None:
                self._batch.append((step, events, spectators_view, staged, numbered))
        if self._batch:
            self._on_resync = on_resync
            self._schedule()

    def _schedule(self) -> None:
        """The spectators' batch goes now after a quiet tick, else at the tick's end."""
        if self._timer is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a unit test): at once
            self._flush()
            return
        if loop.time() >= self._next_flush:
            self._flush()
        else:
            self._timer = loop.call_at(self._next_flush, self._flush)

    def _flush(self) -> None:
        """Send the batch to the spectators: one step as the players get it, more as one
        snapshot (built once for all of them, from the steps each has not seen)."""
        self._timer = None
        batch, self._batch = self._batch, []
        with contextlib.suppress(RuntimeError):  # no loop (a unit test): nothing to time
            self._next_flush = asyncio.get_running_loop().time() + self.spectator_tick
        if not batch:
            return
        made: dict[int, tuple[int, list[bytes], float]] = {}  # first step -> messages
        for watcher in [w for w in self.watchers if w.token_hash is None]:
            if watcher.needs_snapshot:
                continue
            first = next((i for i, entry in enumerate(batch)
                          if entry[0] > watcher.shown_step), None)
            if first is None:
                continue
            key = -first - 1 if watcher.is_batched else first
            found = made.get(key)
            if found is None:
                found = made[key] = self._coalesced(batch[first:], watcher.is_batched)
            sequence, messages, staged = found
            for message in messages:
                if not watcher.push(sequence, message, staged):
                    self._on_resync()
                    break
        if self._live:
            self._live -= {entry[0] for entry in batch}

    def _coalesced(self, steps: list[tuple[int, Staged, bytes, float, Staged]],
                   is_batched: bool = False) -> tuple[int, list[bytes], float]:
        """The messages showing ``steps``: one step's own, or one snapshot of them all
        (their numbered events, the view after the last). With the last's sequence and
        when the first was staged. ``is_batched``: as one EventBatch."""
        _, events, view, staged, _ = steps[0]
        if len(steps) == 1:
            if is_batched:
                return (events[-1][0], [batch_response(batch_body(
                    [event for _, event in events], view))], staged)
            return events[-1][0], [response(event, view) for _, event in events], staged
        missed = [event for _, _, _, _, numbered in steps for _, event in numbered]
        sequence = steps[-1][1][-1][0]
        view = steps[-1][2]
        message = snapshot_response(sequence, self._clock(), missed, view)
        # Reactions are not history: after the snapshot, each as it would have come.
        live = [event for step, step_events, _, _, _ in steps if step in self._live
                for _, event in step_events]
        if is_batched:
            return sequence, [batch_response(message), *(
                [batch_response(batch_body(live, view))] if live else [])], staged
        return sequence, [message, *(response(event, view) for event in live)], staged

    def missed_list(self, missed_since: Callable[[int, bool], bytes], sequence: int,
                    after_sequence: int, is_spectator: bool) -> tuple[bytes, bool]:
        """A snapshot's Snapshot message (serialized) for ``after_sequence``: the kept events
        after it (``missed_since``; a spectator's: at most ``snapshot_max_events``, the latest,
        then ``has_gap``). Cached until the table's next numbered event (``sequence``); True
        when found in the cache."""
        limit = self.snapshot_max_events if is_spectator else 0
        after_sequence = min(after_sequence, sequence)  # later ones all list nothing
        is_capped = bool(limit) and sequence - after_sequence > limit
        key = (-1 if is_capped else after_sequence, is_capped)
        if self._lists_sequence != sequence:
            self._lists.clear()
            self._lists_sequence = sequence
        known = self._lists.get(key)
        if known is not None:
            return known, True
        # Capped: the events before the latest ``limit`` are left out (has_gap).
        body = missed_since(sequence - limit if is_capped else after_sequence, is_capped)
        if len(self._lists) >= SNAPSHOT_CACHE:
            self._lists.clear()
        self._lists[key] = body
        self._on_list_built()
        return body, False

    def snapshot(self, watcher: Watcher, after_sequence: int,
                 missed_since: Callable[[int, bool], bytes], sequence: int, now: float,
                 view: bytes) -> bytes:
        """A snapshot for ``watcher`` as a serialized TableEvent: ``view`` (the current one)
        plus the events it missed after ``after_sequence`` (none when 0; ``missed_list``)."""
        self.snapshot_sent(watcher, sequence)
        snap = b""
        if after_sequence > 0:
            snap, _ = self.missed_list(missed_since, sequence, after_sequence,
                                       watcher.token_hash is None)
        return _snapshot_event(sequence, now, snap, view)

    def listed(self, sequence: int, after_sequence: int, is_spectator: bool) -> int:
        """How many missed events a snapshot for ``after_sequence`` lists at most (what a
        quota charges before it is built)."""
        if after_sequence <= 0:
            return 0
        count = max(0, sequence - after_sequence)
        if is_spectator and self.snapshot_max_events:
            count = min(count, self.snapshot_max_events)
        return count


def _commit_batch(ready: list[tuple[int, Staged, Views, float, Staged]], seat: int | None,
                  shown_step: int) -> tuple[int, bytes, float] | None:
    """The EventBatch (serialized, as a response) showing a seat the steps of one commit it
    has not seen: their events in order, the view after the last on the last event. With
    the last event's sequence and when the first step was staged; None when none is new."""
    events: list[bytes] = []
    view = b""
    sequence, staged = 0, 0.0
    for step, step_events, views, step_staged, _ in ready:
        if step <= shown_step:
            continue
        seat_view = views.get(seat)
        if seat_view is None:
            continue
        if not events:
            staged = step_staged
        events.extend(event for _, event in step_events)
        view, sequence = seat_view, step_events[-1][0]
    if not events:
        return None
    return sequence, batch_response(batch_body(events, view)), staged


def _push_all(watcher: Watcher, events: Staged, messages: list[bytes], staged: float,
              on_resync: Callable[[], None]) -> None:
    for (sequence, _), message in zip(events, messages, strict=True):
        if not watcher.push(sequence, message, staged):
            on_resync()
            break


_VIEW_TAG = varint(3 << 3 | 2)  # TableEvent.view
_EVENT_TAG = varint(1 << 3 | 2)  # WatchTableResponse.event, EventBatch.events
_BATCH_TAG = varint(3 << 3 | 2)  # WatchTableResponse.batch, PlayResponse.batch
_RESULT_TAG = varint(2 << 3 | 2)  # EventBatch.results
_IS_LAST = varint(4 << 3) + varint(1)  # TableEvent.is_last_in_action = true


def response(event: bytes, view: bytes) -> bytes:
    """A serialized WatchTableResponse: the event with its view, by concatenation."""
    full = event + _VIEW_TAG + varint(len(view)) + view
    return _EVENT_TAG + varint(len(full)) + full


def batch_body(events: list[bytes], view: bytes) -> bytes:
    """A serialized EventBatch of ``events`` (serialized TableEvents without their view),
    ``view`` on the last one."""
    last = events[-1] + _VIEW_TAG + varint(len(view)) + view
    return b"".join([*(_EVENT_TAG + varint(len(e)) + e for e in events[:-1]),
                     _EVENT_TAG, varint(len(last)), last])


def batch_response(body: bytes) -> bytes:
    """A serialized EventBatch as a WatchTableResponse (or PlayResponse: the same field)."""
    return _BATCH_TAG + varint(len(body)) + body


def with_results(message: bytes | None, results: list[bytes]) -> bytes:
    """A batch response (``batch_response``; None: one without events) with serialized
    PlayResults appended to its batch."""
    body = b""
    if message is not None:  # skip the tag (one byte) and the length's varint
        start = 1
        while message[start] & 0x80:
            start += 1
        body = message[start + 1:]
    return batch_response(body + b"".join(_RESULT_TAG + varint(len(r)) + r for r in results))


def _snapshot_event(sequence: int, now: float, snapshot: bytes, view: bytes,
                    is_last_in_action: bool = False) -> bytes:
    """A serialized TableEvent holding a snapshot (its fields in their numbers' order)."""
    head = copas_pb2.TableEvent(sequence=sequence, time=timestamp(now)).SerializeToString()
    return (head + _VIEW_TAG + varint(len(view)) + view
            + (_IS_LAST if is_last_in_action else b"") + field(10, snapshot))


def snapshot_response(sequence: int, now: float, missed: list[bytes], view: bytes) -> bytes:
    """A serialized WatchTableResponse: the snapshot of coalesced steps, their serialized
    numbered events ``missed`` and ``view`` after the last (the moment to draw it:
    ``is_last_in_action``)."""
    body = b"".join(field(1, e) for e in missed)
    return field(1, _snapshot_event(sequence, now, body, view, is_last_in_action=True))


def event_response(event: bytes) -> bytes:
    """A serialized TableEvent as a WatchTableResponse (or PlayResponse: the same field)."""
    return _EVENT_TAG + varint(len(event)) + event

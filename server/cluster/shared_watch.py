"""Spectators' WatchTable streams relayed to one table's owner share one upstream stream: the
owner sends every message once to this node, which fans it out to its own watchers.

Only spectator streams (no player token) of one table share: they see the same view, so
nothing one of them may not see reaches it; a player's stream (its own view, its own hand) is
relayed on its own. The upstream asks the owner for every event it keeps; each watcher then
gets a snapshot made here, as the owner would make it: the latest view the upstream carried
(every live event carries the view after its action) and the events it missed since its
``after_sequence`` from the numbered events kept here (at most ``--history``). One that asks
for events from before what is kept is relayed on its own, so the owner answers it. A
watcher that falls more than ``--watcher-queue`` messages behind gets a fresh snapshot, as at
the owner. Batched streams (``is_batched``: one EventBatch per commit, the view on its last
event) share an upstream of their own, batched too, so each gets the owner's batches as they
were. At most ``--max-watchers-per-table`` share one upstream. The upstream ends when its
last watcher leaves; its end (or the owner's refusal) ends every watcher's.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
from copas.v1 import copas_pb2
from google.protobuf import timestamp_pb2

from server.errors import ServiceError

Context = grpc.aio.ServicerContext[Any, Any]
PRESENCE = ("snapshot", "player_connection")  # not numbered: they repeat the latest sequence


@dataclass(eq=False)
class LocalWatcher:
    """One local stream on a shared upstream: what it has yet to be sent."""

    queue: deque[bytes] = field(default_factory=deque)
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    needs_snapshot: bool = False  # fell behind: a fresh snapshot replaces its queue


class SharedWatch:
    """One upstream WatchTable stream of one table, and the local watchers it feeds."""

    def __init__(self, history: int, queue: int, is_batched: bool = False) -> None:
        self.is_batched = is_batched  # its messages are EventBatches (one per commit)
        self.watchers: set[LocalWatcher] = set()
        self._history: deque[copas_pb2.TableEvent] = deque(maxlen=max(1, history))
        self._queue = max(1, queue)
        self.sequence = 0  # the latest sequence the upstream carried
        self._view: copas_pb2.TableView | None = None  # the latest view it carried
        self.ready = asyncio.Event()  # its first snapshot arrived (or it ended)
        self.joining = 0  # watchers waiting for it to be ready
        self.ended = False
        self.error: grpc.aio.AioRpcError | None = None  # how the upstream ended, if failed
        self.task: asyncio.Task[None] | None = None

    def snapshot(self, after_sequence: int) -> bytes | None:
        """A serialized WatchTableResponse snapshot for a watcher joining now, as the owner
        would make it; None when it asks for events from before the kept ones."""
        snap = copas_pb2.Snapshot()
        if 0 < after_sequence < self.sequence:
            oldest = self._history[0].sequence if self._history else self.sequence + 1
            if after_sequence + 1 < oldest:
                return None
            snap.missed_events.extend(e for e in self._history if e.sequence > after_sequence)
        now = timestamp_pb2.Timestamp()
        now.GetCurrentTime()
        now.nanos -= now.nanos % 1_000_000  # milliseconds, as the owner's times
        event = copas_pb2.TableEvent(sequence=self.sequence, time=now, snapshot=snap,
                                     view=self._view)
        if self.is_batched:
            return copas_pb2.WatchTableResponse(batch=copas_pb2.EventBatch(events=[event])
                                                ).SerializeToString()
        return copas_pb2.WatchTableResponse(event=event).SerializeToString()

    def take(self, raw: bytes) -> None:
        """One upstream message: kept (its view, and its event if numbered), then queued for
        every watcher."""
        response = copas_pb2.WatchTableResponse.FromString(raw)
        for event in response.batch.events if self.is_batched else [response.event]:
            self._keep(event)
        for watcher in self.watchers:
            if watcher.needs_snapshot:
                continue  # its fresh snapshot, made when it is sent, will show this
            if len(watcher.queue) >= self._queue:
                watcher.queue.clear()
                watcher.needs_snapshot = True
            else:
                watcher.queue.append(raw)
            watcher.wakeup.set()

    def _keep(self, event: copas_pb2.TableEvent) -> None:
        """What one upstream event tells: the history (if numbered), the latest view."""
        kind = event.WhichOneof("kind")
        if kind == "snapshot":
            missed = event.snapshot.missed_events
            follows = (missed[0].sequence == self.sequence + 1 if missed
                       else event.sequence == self.sequence)  # (the owner's coalesced ones)
            if event.snapshot.has_gap or not follows:
                self._history.clear()  # what came between is not known here
            self._history.extend(missed)
        elif kind not in PRESENCE:
            kept = copas_pb2.TableEvent()
            kept.CopyFrom(event)
            kept.ClearField("view")  # missed events come without views, as the owner's
            self._history.append(kept)
        self.sequence = event.sequence
        if event.HasField("view"):
            self._view = event.view

    def end(self, error: grpc.aio.AioRpcError | None) -> None:
        self.ended = True
        self.error = error
        self.ready.set()
        for watcher in self.watchers:
            watcher.wakeup.set()


Opener = Callable[[str, str, bytes, Context, str],
                  tuple[Any, Callable[[grpc.aio.AioRpcError | None], None]]]
"""Opens an upstream stream (address, table, request, a watcher's context, its client):
the call, and what to call when it ended (how, if it failed): it gives the connection back
and lets go of an owner that went away."""


class SharedWatches:
    """This node's shared upstreams, one per (owner address, table, batched or not), each
    given back when its last watcher leaves (so at most two per table watched through this
    node)."""

    def __init__(self, open_upstream: Opener, history: int = 1024, queue: int = 512,
                 max_watchers: int = 64) -> None:
        self._open = open_upstream
        self._history = history
        self._queue = queue
        self._max_watchers = max_watchers
        self._shared: dict[tuple[str, str, bool], SharedWatch] = {}
        self.opened = 0  # upstreams opened so far

    def upstreams(self) -> int:
        return len(self._shared)

    def watchers(self) -> int:
        return sum(len(s.watchers) for s in self._shared.values())

    async def watch(self, address: str, table_id: str, raw: bytes, context: Context,
                    client: str, alone: Callable[[], Awaitable[int]]) -> int:
        """Serve one spectator's WatchTable from the table's shared upstream (``alone``:
        relay it on its own instead); returns how many messages it was sent.

        :raises ServiceError: INVALID_SEQUENCE, TOO_MANY_WATCHERS.
        """
        request = copas_pb2.WatchTableRequest.FromString(raw)
        after_sequence = request.after_sequence
        if after_sequence < 0:
            raise ServiceError.invalid("after_sequence must not be negative",
                                       "INVALID_SEQUENCE")
        key = (address, table_id, request.is_batched)
        shared = self._shared.get(key)
        if shared is None or shared.ended:
            shared = self._start(key, context, client)
        if len(shared.watchers) + shared.joining >= self._max_watchers:
            raise ServiceError.exhausted("too many spectators on this table",
                                         "TOO_MANY_WATCHERS")
        watcher = LocalWatcher()
        first: bytes | None = None
        shared.joining += 1
        try:
            await shared.ready.wait()
        finally:
            shared.joining -= 1
            if not shared.ready.is_set():  # it left while the upstream opened
                self._leave(key, shared)
        if not shared.ended:
            first = shared.snapshot(after_sequence)
            if first is None:  # from before what is kept here: the owner answers it
                self._leave(key, shared)
                return await alone()
        shared.watchers.add(watcher)
        try:
            return await self._serve(shared, watcher, first, context)
        finally:
            shared.watchers.discard(watcher)
            self._leave(key, shared)

    def _leave(self, key: tuple[str, str, bool], shared: SharedWatch) -> None:
        """A watcher left (or went elsewhere): the upstream goes with the last one."""
        if shared.watchers or shared.joining:
            return
        if self._shared.get(key) is shared:
            del self._shared[key]
        if shared.task is not None:
            shared.task.cancel()

    def _start(self, key: tuple[str, str, bool], context: Context, client: str
               ) -> SharedWatch:
        """Open the table's upstream, asking for every event the owner keeps (after the
        first): a joining watcher's missed events are then listed here."""
        shared = self._shared[key] = SharedWatch(self._history, self._queue, key[2])
        request = copas_pb2.WatchTableRequest(table_id=key[1], after_sequence=1,
                                              is_batched=key[2])
        call, ended = self._open(key[0], key[1], request.SerializeToString(), context, client)
        self.opened += 1

        async def pump() -> None:
            failure: grpc.aio.AioRpcError | None = None
            try:
                async for message in call:
                    shared.take(message)
                    shared.ready.set()
            except grpc.aio.AioRpcError as error:
                failure = error
            finally:
                shared.end(failure)
                call.cancel()
                ended(failure)
                if self._shared.get(key) is shared:
                    del self._shared[key]

        shared.task = asyncio.get_running_loop().create_task(pump())
        return shared

    async def _serve(self, shared: SharedWatch, watcher: LocalWatcher, first: bytes | None,
                     context: Context) -> int:
        sent = 0
        if first is not None:
            await context.write(first)
            sent += 1
        while True:
            if watcher.needs_snapshot:  # the snapshot supersedes anything queued
                watcher.needs_snapshot = False
                watcher.queue.clear()
                fresh = shared.snapshot(0)
                assert fresh is not None
                await context.write(fresh)
                sent += 1
            while watcher.queue and not watcher.needs_snapshot:
                await context.write(watcher.queue.popleft())
                sent += 1
            if shared.ended and not watcher.queue:
                if shared.error is not None:
                    await relay_error(shared.error, context)
                return sent
            if not watcher.queue and not watcher.needs_snapshot:
                watcher.wakeup.clear()
                await watcher.wakeup.wait()


async def relay_error(error: grpc.aio.AioRpcError, context: Context) -> None:
    """The owner's refusal, as it was (code, message, details)."""
    code = error.code()
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED) \
            and not error.trailing_metadata():
        # The owner went away mid-call (or stopped, cancelling its calls; or this node
        # closed its relays to fail-stop): say so in the contract's words.
        await context.abort_with_status(
            ServiceError.table_moved("the table's node went away").to_status())
    trailing = tuple((k, v) for k, v in (error.trailing_metadata() or ())
                     if k == "grpc-status-details-bin")
    await context.abort(code, error.details() or "", trailing)

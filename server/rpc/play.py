"""A seated player's Play stream: actions in, events and one result per action out.

Two halves run on one stream. The *reader* takes each action from the client, charges its
quota and applies it to the table exactly as the unary call does (``Table.act``: idempotency
by request_id, the same fingerprint, the same refusals); it never waits for the disk. The
*writer* sends the seat's events as WatchTable would (the same snapshot, sequences and
pre-serialized bytes: a WatchTableResponse and a PlayResponse carry the event in the same
field) and each result in its place: once the last event its action caused is sent, and
before any later one. That event is sent only after the commit that holds the action (events
are delivered after their commit), so a result never runs ahead of the disk, and no action
costs a wait of its own.

A stream is paced by its quota: while the caller's buckets (its token's, its address's) are
empty the reader does not read the next action, so HTTP/2 flow control holds a flooding client
back for free instead of the server answering each action with a refusal; and
``--play-max-refusals-in-a-row`` refused actions in a row end the stream (RESOURCE_EXHAUSTED
TOO_MANY_REFUSALS, after their results).

Batched (the opening's ``is_batched``), each message is one EventBatch: one commit's events
for the seat (the fan-out's, shared by every batched stream of the seat), and appended to it
the results whose events are all sent once it is (the mover's in the same message as its
action's events); a result with no event to ride on (a refusal) goes as a batch without
events, at once.

What a client can make the stream hold is bounded: the events by the watcher's queue (a client
that does not read gets a fresh snapshot instead of the backlog), the results by
``PENDING_RESULTS`` (beyond it the reader stops reading, and HTTP/2 flow control holds the
client back).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from copas.v1 import copas_pb2

from server.errors import ServiceError
from server.rpc import inputs
from server.rpc.actions import METHODS
from server.rpc.gateway import Caller
from server.rpc.quotas import Quotas
from server.store.base import StorageFailed
from server.tables.fanout import Watcher, with_results
from server.tables.idempotency import fingerprint
from server.tables.registry import TableRegistry
from server.tables.table import Table
from server.wakeup import Wakeup

PENDING_RESULTS = 64  # actions taken but not yet answered on one stream
Context = grpc.aio.ServicerContext[Any, Any]


@dataclass(slots=True)
class _Result:
    request_id: str
    after: int = 0  # the last event its action caused: the result is sent once that one is
    sequence: int = 0
    error: ServiceError | None = None


class PlayStream:
    def __init__(self, registry: TableRegistry, quotas: Quotas, table: Table, seat: int,
                 found: Caller, context: Context) -> None:
        self._registry = registry
        self._delivery = registry.delivery  # the barrier: shown, answered once committed
        self._quotas = quotas
        self._table = table
        self._seat = seat
        self._caller = found
        self._context = context
        self._results: list[_Result] = []  # at most PENDING_RESULTS (a deque takes 600 B)
        self._room = Wakeup()  # the results fell below PENDING_RESULTS (the reader's)
        self._room.set()
        self._ended: BaseException | None = None  # why the reader stopped, when it failed
        self._refused = 0  # refused actions in a row
        self._watcher: Watcher | None = None
        self._written = 0  # the sequence of the last event written (the writer's)

    async def run(self, requests: AsyncIterator[bytes], parse: Callable[[bytes], Any],
                  after_sequence: int, is_batched: bool = False) -> None:
        """Serve the stream until the client goes, the table does, or the stream is
        malformed (INVALID_ARGUMENT). ``requests`` are the client's messages after its
        opening, as bytes; ``parse`` reads one (INVALID_ARGUMENT for garbage);
        ``is_batched``: one EventBatch per commit, its results in it."""
        table, found = self._table, self._caller
        watcher = self._watcher = table.add_watcher(self._seat, found.token_hash, is_batched)
        reader = asyncio.get_running_loop().create_task(self._read(requests, parse))
        try:
            # The snapshot as of now, written once now is durable (later steps follow it).
            first = table.snapshot(watcher, after_sequence)
            await self._delivery.committed()  # show only what is durable
            if not watcher.is_closed:  # the token may have been revoked meanwhile
                await self._write(watcher.opening(first))  # PlayResponse.event (.batch)
            del first  # not held for the stream's life
            written = self._written = watcher.seen
            while True:
                written = await self._flush(watcher, written)
                if watcher.is_closed or self._ended is not None:
                    await self._last_results(written)
                    if self._ended is not None:
                        raise self._ended
                    if watcher.close_error is not None:
                        raise watcher.close_error
                    return
                await watcher.wakeup.wait()
                watcher.wakeup.clear()
                if watcher.needs_snapshot and not watcher.is_closed:
                    await self._write(watcher.opening(table.snapshot(watcher, 0)))
                    written = self._written = watcher.seen
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader
            table.remove_watcher(watcher)

    def results_waiting(self) -> int:
        """Actions taken whose result is not sent yet (at most PENDING_RESULTS)."""
        return len(self._results)

    async def _write(self, message: copas_pb2.PlayResponse | bytes) -> None:
        await self._context.write(message)
        self._caller.sent += 1

    async def _flush(self, watcher: Watcher, written: int) -> int:
        """Send what may go now, in order: the queued events, and each result once the
        events up to its action's last are sent. Returns the last sequence sent."""
        results = self._results
        queue = watcher.queue
        write = self._context.write
        move_to_view = self._registry.metrics.move_to_view
        is_batched = watcher.is_batched
        while not watcher.is_closed:
            if results and results[0].after <= written:
                if is_batched:
                    await self._write_results(written)
                else:
                    await self._write_result(results.pop(0), written)
                continue
            if not queue:
                break
            sequence, message = watcher.pop()
            if is_batched and results and results[0].after <= sequence:
                message = with_results(message, self._take_results(sequence))
            await write(message)
            move_to_view.observe(time.monotonic() - watcher.last_staged)
            self._caller.sent += 1
            written = self._written = sequence
        return written

    async def _last_results(self, written: int) -> None:
        """The stream ends (the table went, the token was given up, the stream was
        malformed): the results of the actions taken so far still go out, in order, each
        once the store holds what it did (or with the store's failure)."""
        if not self._results:
            return
        failure: ServiceError | None = None
        try:
            await self._delivery.committed(self._table)  # TABLE_MOVED if another node has it
        except StorageFailed:
            failure = ServiceError.storage_failed()
        except ServiceError as error:
            failure = error
        for result in self._results:
            if result.after > written and result.error is None and failure is not None:
                result.error, result.sequence = failure, 0
            result.after = min(result.after, written)
        if self._watcher is not None and self._watcher.is_batched:
            await self._write_results(written)
            return
        while self._results:
            await self._write_result(self._results.pop(0), written)

    async def _write_result(self, result: _Result, written: int) -> None:
        await self._write(copas_pb2.PlayResponse(result=_answer(result, written)))
        if len(self._results) < PENDING_RESULTS:
            self._room.set()

    def _take_results(self, written: int) -> list[bytes]:
        """The waiting results whose events are all sent by ``written``, serialized."""
        results, taken = self._results, []
        while results and results[0].after <= written:
            taken.append(_answer(results.pop(0), written).SerializeToString())
        if len(results) < PENDING_RESULTS:
            self._room.set()
        return taken

    async def _write_results(self, written: int) -> None:
        """Batched: the results that may go now, as one EventBatch without events."""
        await self._write(with_results(None, self._take_results(written)))

    async def _read(self, requests: AsyncIterator[bytes], parse: Callable[[bytes], Any]
                    ) -> None:
        try:
            async for raw in requests:
                while len(self._results) >= PENDING_RESULTS:  # the client does not read
                    self._room.clear()
                    await self._room.wait()
                await self._pace()
                self._act(parse(raw))
        except asyncio.CancelledError:
            raise
        except BaseException as error:  # a malformed stream, or a bug
            self._ended = error
            if self._watcher is not None:
                self._watcher.wakeup.set()

    async def _pace(self) -> None:
        """Wait until the caller's quota has room for the next action (not reading it
        meanwhile: HTTP/2 flow control holds the client)."""
        quotas, found = self._quotas, self._caller
        while (wait := quotas.delay(found.peer, found.token_hash)) > 0.0:
            await asyncio.sleep(wait)

    def _act(self, request: copas_pb2.PlayRequest) -> None:
        """Apply one action now; its result waits in line for the events it caused."""
        kind = request.WhichOneof("kind")
        if kind is None or kind == "open":
            raise ServiceError.invalid(
                "a Play stream opens once; then each message is one action",
                "INVALID_PLAY_STREAM")
        action = getattr(request, kind)
        table = self._table
        if action.table_id and action.table_id != table.id:
            raise ServiceError.invalid("this Play stream is for another table",
                                       "INVALID_PLAY_STREAM")
        method = METHODS[kind]
        result = _Result(action.request_id)
        self._results.append(result)
        try:
            inputs.check_length("request_id", action.request_id, inputs.ID_MAX,
                                "INVALID_REQUEST_ID")
            self._quotas.admit(method, self._caller.peer, self._caller.token_hash)
            make, content = table.game_module.decode_action(method, action)
            acted = table.act(
                self._seat, make(self._seat), action.request_id,
                fingerprint(method, table.id, content) if action.request_id else "")
            result.sequence, result.after = acted.first, acted.last
            self._refused = 0
        except ServiceError as error:
            result.error = error
            result.after = table.sequence  # a refusal changed nothing: it follows what is shown
            self._refused += 1
        if self._watcher is not None and result.after <= self._written:
            self._watcher.wakeup.set()  # it may go now (else its events wake the writer)
        limit = self._quotas.max_refusals_in_a_row
        if limit and self._refused >= limit:
            raise ServiceError.exhausted(
                f"{self._refused} actions in a row were refused: this stream ends (read each "
                "result before sending more)", "TOO_MANY_REFUSALS")


def _answer(result: _Result, written: int) -> copas_pb2.PlayResult:
    answer = copas_pb2.PlayResult(request_id=result.request_id, sequence=result.sequence,
                                  last_sequence=written)
    if result.error is not None:
        answer.error.CopyFrom(result.error.to_status_pb())
    return answer

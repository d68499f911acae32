"""A seated player's Play stream: actions in, events and one result per action out.

Two halves run on one stream. The *reader* takes each action from the client, charges its
quota (over it: a RESOURCE_EXHAUSTED result at once, never a held stream), applies it to the
table exactly as the unary call does (``Table.act``: idempotency by request_id, the same
fingerprint, the same refusals) and, once the store has it, makes its result. The *writer*
sends the seat's events as WatchTable would (the same snapshot, sequences and pre-serialized
bytes: a WatchTableResponse and a PlayResponse carry the event in the same field) and each
result in its place: after the last event its action caused, before any later one.

What a client can make the stream hold is bounded: the events by the watcher's queue (a client
that does not read gets a fresh snapshot instead of the backlog), the results by
``PENDING_RESULTS`` (beyond it the reader stops reading, and HTTP/2 flow control holds the
client back).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import grpc
from copas.v1 import copas_pb2

from server.errors import ServiceError
from server.rpc import inputs
from server.rpc.actions import METHODS, decode_action
from server.rpc.gateway import Caller
from server.rpc.quotas import Quotas
from server.store.base import StorageFailed
from server.tables.fanout import Watcher
from server.tables.idempotency import fingerprint
from server.tables.registry import TableRegistry
from server.tables.table import Table

PENDING_RESULTS = 64  # actions taken but not yet answered on one stream
Context = grpc.aio.ServicerContext[Any, Any]


@dataclass(slots=True)
class _Result:
    request_id: str
    after: int  # the last event its action caused: the result is sent after it
    sequence: int = 0
    error: ServiceError | None = None
    is_ready: bool = False


class PlayStream:
    def __init__(self, registry: TableRegistry, quotas: Quotas, table: Table, seat: int,
                 found: Caller, context: Context) -> None:
        self._registry = registry
        self._quotas = quotas
        self._table = table
        self._seat = seat
        self._caller = found
        self._context = context
        self._results: deque[_Result] = deque()
        self._room = asyncio.Event()  # the results fell below PENDING_RESULTS
        self._room.set()
        self._ended: BaseException | None = None  # why the reader stopped, when it failed
        self._watcher: Watcher | None = None

    async def run(self, requests: AsyncIterator[copas_pb2.PlayRequest],
                  after_sequence: int) -> None:
        """Serve the stream until the client goes, the table does, or the stream is
        malformed (INVALID_ARGUMENT)."""
        table, found = self._table, self._caller
        watcher = self._watcher = table.add_watcher(self._seat, found.token_hash)
        reader = asyncio.get_running_loop().create_task(self._read(requests))
        try:
            await self._registry.durable()  # show only what is durable
            if not watcher.is_closed:  # the token may have been revoked meanwhile
                await self._write_event(copas_pb2.PlayResponse(
                    event=table.snapshot(watcher, after_sequence)))
            written = watcher.seen
            while True:
                written = await self._flush(watcher, written)
                if watcher.is_closed or self._ended is not None:
                    await self._last_results(watcher, written)
                    if self._ended is not None:
                        raise self._ended
                    if watcher.close_error is not None:
                        raise watcher.close_error
                    return
                await watcher.wakeup.wait()
                watcher.wakeup.clear()
                if watcher.needs_snapshot and not watcher.is_closed:
                    await self._write_event(copas_pb2.PlayResponse(
                        event=table.snapshot(watcher, 0)))
                    written = watcher.seen
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader
            table.remove_watcher(watcher)

    def results_waiting(self) -> int:
        """Actions taken whose result is not sent yet (at most PENDING_RESULTS)."""
        return len(self._results)

    async def _write_event(self, message: copas_pb2.PlayResponse | bytes) -> None:
        await self._context.write(message)
        self._caller.sent += 1

    async def _flush(self, watcher: Watcher, written: int) -> int:
        """Send what may go now, in order: queued events, each result once the events up to
        its action's last are sent (and it is ready). Returns the last sequence sent."""
        results = self._results
        while not watcher.is_closed:
            if results and results[0].is_ready and results[0].after <= written:
                await self._write_result(results.popleft(), written)
                continue
            if not watcher.queue:
                break
            sequence = watcher.queue[0][0]
            if results and results[0].after < sequence:  # its result goes first
                if not results[0].is_ready:
                    break  # the action is not durable yet: wait for it
                await self._write_result(results.popleft(), written)
                continue
            await self._write_event(watcher.pop()[1])
            written = sequence
        return written

    async def _last_results(self, watcher: Watcher, written: int) -> None:
        """The stream ends (the table went, the token was given up, the stream was
        malformed): the results of the actions taken so far still go out, in order."""
        while self._results:
            while not self._results[0].is_ready:
                watcher.wakeup.clear()
                await watcher.wakeup.wait()
            await self._write_result(self._results.popleft(), written)

    async def _write_result(self, result: _Result, written: int) -> None:
        answer = copas_pb2.PlayResult(request_id=result.request_id, sequence=result.sequence,
                                      last_sequence=written)
        if result.error is not None:
            answer.error.CopyFrom(result.error.to_status_pb())
        await self._write_event(copas_pb2.PlayResponse(result=answer))
        if len(self._results) < PENDING_RESULTS:
            self._room.set()

    def _wake(self) -> None:
        if self._watcher is not None:
            self._watcher.wakeup.set()

    async def _read(self, requests: AsyncIterator[copas_pb2.PlayRequest]) -> None:
        try:
            async for request in requests:
                while len(self._results) >= PENDING_RESULTS:  # the client does not read
                    self._room.clear()
                    await self._room.wait()
                await self._act(request)
        except asyncio.CancelledError:
            raise
        except BaseException as error:  # a malformed stream, the store failed, or a bug
            if not isinstance(error, ServiceError):  # no answer can be trusted: none is sent
                self._results = deque(r for r in self._results if r.is_ready)
            self._ended = error
            self._wake()

    async def _act(self, request: copas_pb2.PlayRequest) -> None:
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
        result = _Result(action.request_id, table.sequence)
        self._results.append(result)
        try:
            inputs.check_length("request_id", action.request_id, inputs.ID_MAX,
                                "INVALID_REQUEST_ID")
            self._quotas.admit(method, self._caller.peer, self._caller.token_hash)
            make, content = decode_action(method, action)
            result.sequence = table.act(
                self._seat, make(self._seat), action.request_id,
                fingerprint(method, table.id, content) if action.request_id else "")
            result.after = table.sequence
            await self._registry.durable(table)
        except ServiceError as error:
            result.error = error
            if error.reason in ("STORAGE_FAILED", "TABLE_MOVED"):
                self._finish(result)
                raise
        except StorageFailed:
            result.error = ServiceError.storage_failed()
            self._finish(result)
            raise result.error from None
        self._finish(result)

    def _finish(self, result: _Result) -> None:
        result.is_ready = True
        self._wake()

"""Group commit, shared by the durable stores: the table code queues writes synchronously (so
their order is the table's order), one writer thread commits whatever is queued in one
transaction, and ``sync`` resolves once everything queued before it is on disk.

At a human pace most commits hold one move, so the hand-off is what a commit costs beside the
database: no task and no executor per commit, one queue put to a thread that lives as long
as the store and one ``call_soon_threadsafe`` back (issue 42).

A subclass gives the database's own ``_commit`` (its explicit SQL) and its reads; the
storage contract test (tests/test_store_contract.py) runs the same checks against each, so
the two databases cannot drift apart.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
from collections.abc import Callable
from typing import Generic

from server.store.base import (
    Append,
    Batch,
    CreateTable,
    DeleteEntry,
    FinishTable,
    GameRecord,
    ReleaseTable,
    RewriteRecord,
    StorageFailed,
    TableMeta,
    W,
    Write,
)

CommitObserver = Callable[[float, int], None]
"""Told after each commit: how long it took (seconds) and how many writes it held."""


class GroupCommitStore(Generic[W]):
    """Queued writes, one writer thread, fail-stop. ``W`` is what a batch of this store
    holds (the common ``Write`` kinds, and a cluster's own)."""

    def __init__(self, on_commit: CommitObserver | None = None) -> None:
        self._on_commit = on_commit  # told each commit's seconds and writes (metrics)
        self._batch: Batch[W | Write] = Batch()
        self._counters: dict[str, int] = {}  # each table's last log position
        self._failure: StorageFailed | None = None
        self._failed = asyncio.Event()
        # The batch the writer thread commits now: its writes, its waiters, when it began.
        self._in_flight: tuple[Batch[W | Write], asyncio.Future[None], float] | None = None
        self._batch_done: asyncio.Future[None] | None = None  # the next batch's waiters
        # What the writer thread is handed: a batch and the loop to answer (None: stop).
        self._jobs: queue.SimpleQueue[tuple[Batch[W | Write], asyncio.AbstractEventLoop] | None]
        self._jobs = queue.SimpleQueue()
        self._thread: threading.Thread | None = None  # started by the first commit
        self.commits = 0

    # -- writes, queued in order by the (synchronous) table code
    @property
    def failure(self) -> StorageFailed | None:
        return self._failure

    def check_writable(self) -> None:
        if self._failure is not None:
            raise self._failure

    def _queue(self, write: W | Write) -> None:
        """The one way a write enters the store: refused once the store has failed."""
        self.check_writable()
        self._batch.writes.append(write)

    def create_table(self, table_id: str, created: float, meta: TableMeta) -> None:
        self._queue(CreateTable(table_id, created, meta))
        self._counters[table_id] = 0

    def append(self, table_id: str, entry: str) -> int:
        n = self._counters.get(table_id, 0) + 1
        self._queue(Append(table_id, n, entry))
        self._counters[table_id] = n
        return n

    def delete_entry(self, table_id: str, n: int) -> None:
        self._queue(DeleteEntry(table_id, n))

    def note_sequence(self, table_id: str, sequence: int) -> None:
        self._batch.sequences[table_id] = sequence

    def finish_table(self, table_id: str, record: GameRecord) -> None:
        self._queue(FinishTable(table_id, record))

    def rewrite_record(self, record: GameRecord) -> None:
        self._queue(RewriteRecord(record))

    def release_table(self, table_id: str) -> None:
        self._queue(ReleaseTable(table_id))
        self._counters.pop(table_id, None)

    @property
    def has_pending(self) -> bool:
        return bool(self._batch.writes or self._batch.sequences)

    # -- group commit
    def fail(self, error: BaseException) -> StorageFailed:
        """Enter the failed state (once); ``failed()`` resolves."""
        if self._failure is None:
            self._failure = StorageFailed(f"the store failed: {type(error).__name__}: {error}")
            self._failed.set()
        return self._failure

    async def failed(self) -> StorageFailed:
        await self._failed.wait()
        assert self._failure is not None
        return self._failure

    async def sync(self) -> None:
        self.check_writable()
        if self.has_pending:
            if self._batch_done is None:
                self._batch_done = asyncio.get_running_loop().create_future()
            waiter = self._batch_done
            self._start()
        elif self._in_flight is not None:
            waiter = self._in_flight[1]
        else:
            return
        await asyncio.shield(waiter)

    def _start(self) -> None:
        """Hand the queued writes to the writer thread as one batch, unless it is committing
        one already (its end starts the next) or the store failed. The loop's side of the
        hand-off: one queue put; the writer's: one ``call_soon_threadsafe`` per commit."""
        if self._in_flight is not None or self._failure is not None or not self.has_pending:
            return
        loop = asyncio.get_running_loop()
        if self._batch_done is None:
            self._batch_done = loop.create_future()
        batch, self._batch = self._batch, Batch()
        self._in_flight = (batch, self._batch_done, time.perf_counter())
        self._batch_done = None
        if self._thread is None:
            self._thread = threading.Thread(target=self._write_batches, name="copas-db",
                                            daemon=True)
            self._thread.start()
        self._jobs.put((batch, loop))

    def _write_batches(self) -> None:
        """The writer thread: commit each batch handed over, tell its loop how it went."""
        while (job := self._jobs.get()) is not None:
            batch, loop = job
            error: BaseException | None = None
            try:
                self._commit(batch)
            except BaseException as exc:  # the disk said no: nothing in the batch is durable
                error = exc
            try:
                loop.call_soon_threadsafe(self._committed, error)
            except RuntimeError:  # its loop is closed: nothing waits there any more, and
                self._in_flight = None  # nothing runs there to race with this
                if error is not None:
                    with contextlib.suppress(RuntimeError):  # waiters of the closed loop
                        self.fail(error)

    def _committed(self, error: BaseException | None) -> None:
        """The batch in flight is committed (or ``error`` refused it): resolve its waiters,
        and start the next batch when writes came meanwhile."""
        assert self._in_flight is not None
        batch, done, began = self._in_flight
        self._in_flight = None
        if error is not None:
            failure = self.fail(error)
            for waiter in (done, self._batch_done):
                if waiter is not None and not waiter.done():
                    waiter.set_exception(failure)
                    waiter.exception()  # retrieved: every caller re-raises its own
            self._batch_done = None
            return
        self.commits += 1
        if self._on_commit is not None:
            self._on_commit(time.perf_counter() - began,
                            len(batch.writes) + len(batch.sequences))
        if not done.done():
            done.set_result(None)
        if self.has_pending:
            self._start()
        elif self._batch_done is not None:  # asked for while nothing new was queued
            pending, self._batch_done = self._batch_done, None
            if not pending.done():
                pending.set_result(None)

    def _commit(self, batch: Batch[W | Write]) -> None:
        """Commit the batch in one transaction (in the writer thread); raises when the
        database refused it."""
        raise NotImplementedError

    async def _stop_writer(self) -> None:
        """Commit what is queued (unless the store failed), then stop the writer."""
        if self._failure is None and (self.has_pending or self._in_flight is not None):
            with contextlib.suppress(StorageFailed):
                await self.sync()
        elif self._in_flight is not None:  # failed meanwhile: let the thread finish it
            with contextlib.suppress(StorageFailed):
                await asyncio.shield(self._in_flight[1])
        thread, self._thread = self._thread, None
        if thread is not None:
            self._jobs.put(None)
            await asyncio.to_thread(thread.join)

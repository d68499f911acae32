"""Group commit, shared by the durable stores: the table code queues writes synchronously (so
their order is the table's order), one writer thread commits whatever is queued in one
transaction, and ``sync`` resolves once everything queued before it is on disk.

A subclass gives the database's own ``_commit`` (its explicit SQL) and its reads; the
storage contract test (tests/test_store_contract.py) runs the same checks against each, so
the two databases cannot drift apart.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
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
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="copas-db")
        self._batch_done: asyncio.Future[None] | None = None
        self._flushing: asyncio.Task[None] | None = None
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
        if not self.has_pending and self._flushing is None:
            return
        loop = asyncio.get_running_loop()
        if self._batch_done is None:
            self._batch_done = loop.create_future()
        waiter = self._batch_done
        if self._flushing is None:
            self._flushing = asyncio.create_task(self._flush_loop(),
                                                 context=contextvars.Context())
        await asyncio.shield(waiter)

    async def _flush_loop(self) -> None:
        """Commit batch after batch while writes keep coming; each batch resolves the waiters
        that queued before it started."""
        loop = asyncio.get_running_loop()
        try:
            while self.has_pending and self._failure is None:
                batch, self._batch = self._batch, Batch()
                done, self._batch_done = self._batch_done, None
                began = time.perf_counter()
                try:
                    await loop.run_in_executor(self._writer, self._commit, batch)
                except Exception as exc:  # the disk said no: nothing in the batch is durable
                    failure = self.fail(exc)
                    for waiter in (done, self._batch_done):
                        if waiter is not None and not waiter.done():
                            waiter.set_exception(failure)
                            waiter.exception()  # retrieved: every caller re-raises its own
                    return
                self.commits += 1
                if self._on_commit is not None:
                    self._on_commit(time.perf_counter() - began,
                                    len(batch.writes) + len(batch.sequences))
                if done is not None and not done.done():
                    done.set_result(None)
        finally:
            self._flushing = None
            if self._batch_done is not None and not self.has_pending:
                pending, self._batch_done = self._batch_done, None
                if not pending.done():
                    if self._failure is not None:
                        pending.set_exception(self._failure)
                        pending.exception()
                    else:
                        pending.set_result(None)

    def _commit(self, batch: Batch[W | Write]) -> None:
        """Commit the batch in one transaction (in the writer thread); raises when the
        database refused it."""
        raise NotImplementedError

    async def _stop_writer(self) -> None:
        """Commit what is queued (unless the store failed), then stop the writer."""
        if self._flushing is not None:
            await asyncio.shield(self._flushing)
        if self._failure is None and self.has_pending:
            with contextlib.suppress(StorageFailed):
                await self.sync()
        self._writer.shutdown(wait=True)

"""A running server's lifecycle: each part's close pushed on one ``AsyncExitStack`` as the
part is made (``server.main.start``), so that a start that fails gives back exactly what it
made and a stop is that stack unwound, the serving itself first, the store and the ports last;
its background tasks in one owned set; and fail-stop when the store says no."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog
from grpc_health.v1 import health

from server.cluster.build import ClusterNode
from server.errors import ServiceError
from server.listen import Bound
from server.observability import Metrics
from server.rpc.gateway import CallsInFlight
from server.rpc.quotas import Quotas
from server.store import Storage, StorageFailed
from server.tables.records import Records
from server.tables.registry import TableRegistry

if TYPE_CHECKING:  # imported only when a page is served (start-up)
    from server.rpc import web

log = structlog.get_logger("copas.server")
CALLS_LULL = 0.1  # seconds without a new call before a failed node stops (``end_all``)
# Seconds a failed node's stop gives its answers, at least (grpc cancels what is left: a
# bare UNAVAILABLE "Cancelling all calls"). It returns as soon as none is left; 0.5 s was
# once too little beside the whole suite on 2 cores (two clients got grpc's bare answer).
CALLS_ANSWER_FLOOR = 2.0


class Tasks:
    """The server's background tasks, each kept until it ends; ``close`` cancels and awaits
    them all (one that fails says so in the log)."""

    def __init__(self) -> None:
        self._running: set[asyncio.Task[None]] = set()

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(
            work, name=getattr(work, "__qualname__", None))
        self._running.add(task)
        task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        if not task.cancelled() and (error := task.exception()) is not None:
            log.error("background_task_failed", task=task.get_name(),
                      error=f"{type(error).__name__}: {error}"[:200])

    async def close(self) -> None:
        for task in self._running:
            task.cancel()
        await asyncio.gather(*self._running, return_exceptions=True)


async def close_store(store: Storage) -> None:
    """What the store holds is made durable (unless it failed), then it closes."""
    if store.failure is None:
        with contextlib.suppress(StorageFailed):
            await store.sync()
    await store.close()


YOUNG_COLLECTION_EVERY = 2000  # allocations between two young collections (CPython's: 700)
FULL_COLLECTION_EVERY = 100  # middle collections between two full ones (CPython's: 10)


def run(serving: Coroutine[Any, Any, int], event_loop: str = "uvloop") -> int:
    """Run the server on its event loop: uvloop's (libuv's loop in Cython: measured, about a
    tenth less of the server's CPU per move over the Play stream than asyncio's own, whose
    loop is Python; `make bench`), or ``asyncio``'s with ``--event-loop asyncio``."""
    if event_loop == "uvloop":
        import uvloop

        return uvloop.run(serving)
    return asyncio.run(serving)


def settle_collector() -> None:
    """Once serving. What start-up made (modules, the recovered tables) lives as long as the
    process: moved out of the collector's reach, a full collection scans only what came after
    (~1 ms instead of 25-33 ms with the loop held, measured under a refused-call flood). And
    full collections come ten times less often than CPython's default: each holds the loop
    for as long as it takes to scan every object it reaches (at 1,000 tables at a human pace,
    `make bench-pace`: 4,000 open Play streams, each with gRPC's pending read, its tasks and
    coroutines, 350,000 objects, 250-290 ms), and at the default they set the p99 of a move's
    way to its players. Garbage cycles that outlive two young collections are found that
    much later; refcounting frees the rest at once, as before. Young collections come every
    2,000 allocations, not 700: more of what a move allocates is freed by refcounting before
    one looks at it, about 5% less CPU per card over the batched Play stream (`make bench`'s
    cpu_per_move, alternating rounds), and `make bench-pace`'s steady p99 stays <= 25 ms.

    Tried and left: freezing what each of our own full collections (every 10 s) left, so
    the next scans only what came after (25-65 ms there): a live object frozen that later
    becomes a garbage cycle is never found, and under a flood of refused calls the server
    grew 11 MB in a few seconds (tests/test_address_limits_and_floods.py). Young
    collections every 10,000 allocations: about a tenth less CPU per card, but each middle
    one (ten young ones' survivors) took 20-40 ms at 1,000 tables."""
    gc.collect()
    gc.freeze()
    _, middle, _ = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_EVERY, middle, FULL_COLLECTION_EVERY)


@dataclass
class RunningServer:
    """A server serving, and its one ``stop``."""

    port: int
    metrics_port: int
    internal_port: int  # the port the other nodes relay calls to (0: none)
    registry: TableRegistry
    store: Storage
    records: Records
    quotas: Quotas
    metrics: Metrics
    health: health.aio.HealthServicer
    page: web.WebServer | None  # the web page, when --web-port is set
    cluster: ClusterNode | None  # a node among others sharing one PostgreSQL
    calls: CallsInFlight  # the calls the gateways are answering now
    failed: asyncio.Event  # set once the store failed (``failure``)
    parts: contextlib.AsyncExitStack  # every part's close, pushed as the part was made
    failure: StorageFailed | None = None
    grace: float = field(default=0.0, init=False)  # what the stop under way gives calls

    async def stop(self, grace: float) -> None:
        """Health NOT_SERVING, no new tables, running RPCs given ``grace`` seconds to finish,
        then every part given back in the reverse order of its making."""
        self.grace = grace
        await self.parts.aclose()

    async def stop_serving(self, bound: Bound) -> None:
        """The first step of a stop (pushed last): refuse new tables, health NOT_SERVING,
        the web page's calls and then the gRPC calls given what is left of ``grace``."""
        self.registry.stop_accepting()
        if bound.page is not None:
            bound.page.begin_stop()
        await self.health.enter_graceful_shutdown()
        self.registry.close_all()
        began = time.monotonic()
        if bound.page is not None:  # the browsers' calls first: they are relayed to gRPC
            await bound.page.stop(self.grace)
        left = max(0.0, self.grace - (time.monotonic() - began))
        await asyncio.gather(bound.server.stop(left), *(
            [bound.internal.stop(left)] if bound.internal is not None else []))

    async def stop_failed(self, grace: float) -> None:
        """The stop after a fail-stop, every call answered with its reason within ``grace``:
        the relays closed first (their calls end with TABLE_MOVED), the calls in flight given
        half of it to end by themselves (commits fail at once, streams end with the failure)
        and the clients to send their last call (held: ``CallsInFlight``), the others ended
        (a call waiting on a database thread: STORAGE_FAILED), then the stop, left no call
        for grpc to cancel."""
        began = time.monotonic()
        if self.cluster is not None:
            await self.cluster.relay.close()
        ended = await self.calls.end_all(grace / 2, CALLS_LULL)
        if ended:
            log.warning("calls_ended_at_fail_stop", count=ended)
        # At least CALLS_ANSWER_FLOOR for the stop: the calls just ended (and those refused
        # meanwhile) write their answers on a loop that a busy machine may have kept late.
        await self.stop(max(CALLS_ANSWER_FLOOR, grace - (time.monotonic() - began)))

    async def watch_store(self) -> None:
        await self.fail_stop(await self.store.failed())

    async def fail_stop(self, failure: StorageFailed) -> None:
        """The store failed: stop believing memory. Health NOT_SERVING, no new work, every
        stream ends with UNAVAILABLE, every new call waits to be refused so by the stop;
        ``serve`` then stops (``stop_failed``) and exits non-zero."""
        if self.failure is not None:
            return
        self.failure = failure
        self.calls.refuse(ServiceError.storage_failed())
        log.error("storage_failed", error=str(failure),
                  detail="not serving; restart the server to recover from the log")
        await self.health.enter_graceful_shutdown()
        self.registry.fail_all(ServiceError.storage_failed())
        self.failed.set()

"""This node's ownership of its tables among the nodes sharing one PostgreSQL: its lease, and
taking over the tables of nodes whose lease ran out.

- ``Lease``: the node renews ``nodes.lease_until`` (the database's clock) every third of
  ``--lease``, and keeps a local, conservative deadline (monotonic clock): past it (the process
  was paused, the database is slow), the node serves none of its tables until it has renewed
  and re-checked which it still owns.
- ``Takeovers``: every half lease the node claims tables whose owner's lease ran out (epoch + 1,
  one claimant wins), replays each from its log and re-arms its timers; a call for such a
  table claims it at once (``claim``).
- Versions: the database refuses a node the tables whose log is newer than it reads
  (``server.store.postgres``); these are left for a node that reads them, the call is told
  TABLE_MOVED (retry), and the operator is told once per table. At its start and every
  renewal the node compares its log format with the other nodes': an older one alive, or a
  newer one, means a rolling upgrade is not finished (told once per node).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections import OrderedDict

import structlog

from server.cluster.queries import ClusterQueries
from server.errors import ServiceError
from server.tables.recovery import adopt_all
from server.tables.registry import TableRegistry

log = structlog.get_logger("copas.cluster")

TAKEOVER_BATCH = 100  # tables claimed and replayed per step of a takeover
MAX_CLAIMING = 1_000  # single-table takeovers in progress at once
LEASE_MARGIN = 0.8  # of the lease the database grants, believed locally (clocks may drift)
UNREADABLE_TOLD = 10_000  # tables left to a newer node that the operator was told of, kept
UNREADABLE_BATCH = 100  # such tables looked for at a sweep
ROLL_ADVICE = "finish the rolling upgrade (docs/OPERATING.md, \"Upgrades\")"


class Lease:
    """Whether this node may serve its tables now."""

    def __init__(self, queries: ClusterQueries) -> None:
        self._queries = queries
        self.seconds = queries.node.lease_seconds
        self.deadline = 0.0  # monotonic: past it, this node serves none of its tables
        self.renewed_at = 0.0  # monotonic: the last renewal sent that the database took
        # The renewal has a thread (and a database connection) of its own: never queued
        # behind requests' lookups in the default pool, however many a flood makes.
        self._thread = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="copas-lease")

    async def renew(self) -> float:
        """Renew the lease; returns the local deadline it gives (not yet applied)."""
        sent = time.monotonic()
        seconds = await asyncio.get_running_loop().run_in_executor(
            self._thread, self._queries.heartbeat)
        self.renewed_at = sent
        return sent + seconds * LEASE_MARGIN

    def is_valid(self) -> bool:
        return time.monotonic() < self.deadline

    def extend(self, deadline: float) -> None:
        """A renewal's local deadline (``renew``) now holds."""
        self.deadline = deadline

    def check(self) -> None:
        """:raises ServiceError: TABLE_MOVED while the lease is not known to hold."""
        if not self.is_valid():
            raise ServiceError.table_moved("this node is renewing its lease")


class Takeovers:
    """The lease's renewal and the sweeps that claim other nodes' orphaned tables."""

    def __init__(self, registry: TableRegistry, queries: ClusterQueries, lease: Lease) -> None:
        self._registry = registry
        self._queries = queries
        self._lease = lease
        self._tasks: list[asyncio.Task[None]] = []
        self._claiming: dict[str, asyncio.Future[None]] = {}
        self.taken_over = 0  # tables this node took from nodes whose lease ran out
        self._older_told: set[str] = set()  # live nodes of an older log format, told of
        self._newer_told: set[str] = set()  # nodes of a newer log format, told of
        # Tables a newer node wrote, that this node leaves (the operator told once each).
        self._unreadable_told: OrderedDict[str, None] = OrderedDict()

    async def start(self) -> None:
        """The first renewal (before serving), then the renewals' and sweeps' tasks."""
        self._lease.extend(await self._lease.renew())
        await self.compare_formats()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._heartbeats()), loop.create_task(self._sweeps())]

    async def _heartbeats(self) -> None:
        while True:
            await asyncio.sleep(self._lease.seconds / 3)
            was_valid = self._lease.is_valid()
            try:
                deadline = await self._lease.renew()
                if not was_valid:  # paused or cut off past the lease: which tables are ours?
                    await self._recheck()  # before serving any of them again
            except Exception as exc:  # the database is away: the lease runs out by itself
                log.error("lease_renewal_failed", error=str(exc)[:200])
                continue
            self._lease.extend(deadline)
            await self.compare_formats()

    async def compare_formats(self) -> None:
        """Tell the operator, once per node, of a live node that writes an older log format
        than this one (it cannot take over the tables this node writes) and of any node that
        writes a newer one (this node cannot take over its tables): a rolling upgrade is not
        finished."""
        try:
            rows = await asyncio.to_thread(self._queries.node_formats)
        except Exception:  # the database is away: the lease's renewal says so
            return
        node = self._queries.node
        older = {n: f for n, f, alive in rows if alive and f < node.log_format}
        for node_id in sorted(older.keys() - self._older_told):
            log.warning("node_runs_older_copas", node_id=node_id, log_format=older[node_id],
                        this_log_format=node.log_format,
                        detail=f"node {node_id} runs an older Copas: it takes over none of "
                        f"the tables this node writes; upgrade it: {ROLL_ADVICE}")
        self._older_told = set(older)
        newer = {n: f for n, f, _ in rows if f > node.log_format}
        for node_id in sorted(newer.keys() - self._newer_told):
            log.warning("node_runs_newer_copas", node_id=node_id, log_format=newer[node_id],
                        this_log_format=node.log_format,
                        detail=f"node {node_id} runs a newer Copas: this node takes over none "
                        f"of the tables it writes; upgrade this node: {ROLL_ADVICE}")
        self._newer_told = set(newer)

    async def tell_unreadable(self, table_id: str | None = None) -> None:
        """Tell the operator, once per table, of the orphaned tables (or of ``table_id``)
        this node leaves because a newer node wrote them. Looked for only once a node of a
        newer format was seen (no other node can have written one)."""
        if not self._newer_told or table_id in self._unreadable_told:
            return
        try:
            rows = await asyncio.to_thread(self._queries.unreadable_orphans, table_id,
                                           UNREADABLE_BATCH)
        except Exception:  # the database is away: told at a later sweep
            return
        mine = self._queries.node.log_format
        for unreadable, owner, log_format in rows:
            if unreadable in self._unreadable_told:
                continue
            self._unreadable_told[unreadable] = None
            while len(self._unreadable_told) > UNREADABLE_TOLD:
                self._unreadable_told.popitem(last=False)
            whose = f"node {owner}" if owner else "a node (it gave the table up)"
            log.warning("table_left_to_a_newer_node", table_id=unreadable, owner=owner,
                        log_format=log_format, this_log_format=mine,
                        detail=f"{whose} wrote this table's log in a newer format than this "
                        f"node reads: it waits for a node of that release (start {owner or 'one'}"
                        f" again, or upgrade this node); its calls are told to retry; "
                        f"{ROLL_ADVICE}")

    async def _recheck(self) -> None:
        held = self._queries.held()
        current = await asyncio.to_thread(self._queries.epochs_of, list(held))
        me = self._queries.node.node_id
        lost = {t for t, epoch in held.items() if current.get(t) != (me, epoch)}
        if lost:
            log.warning("tables_lost", count=len(lost))
            owners = await asyncio.to_thread(self._queries.public_owners_of, list(lost))
            self.tables_lost(lost, owners)

    async def _sweeps(self) -> None:
        while True:
            await asyncio.sleep(self._lease.seconds / 2)
            if self._lease.is_valid() and not self._registry.is_draining:
                await self.take_over_orphans()
                await self.tell_unreadable()

    async def take_over_orphans(self) -> int:
        """Claim every table whose owner's lease ran out, a batch at a time (the loop runs
        between batches); returns how many now run here."""
        total = 0
        while self._lease.is_valid():
            try:
                claimed = await asyncio.to_thread(self._queries.claim, limit=TAKEOVER_BATCH)
            except Exception as exc:
                log.error("takeover_failed", error=str(exc)[:200])
                break
            if not claimed:
                break
            count = adopt_all(self._registry, claimed)
            total += count
            self.taken_over += count
            log.info("tables_taken_over", count=count)
            await asyncio.sleep(0)  # calls and timers run between batches
            if len(claimed) < TAKEOVER_BATCH:
                break
        return total

    async def claim(self, table_id: str) -> bool:
        """Take over one table whose owner is gone (once, however many calls ask); whether
        it runs here now."""
        if self._registry.is_draining:
            return False  # a draining node hands tables over; it takes none
        if table_id in self._unreadable_told:
            return False  # a newer node wrote it: this node can never take it
        pending = self._claiming.get(table_id)
        if pending is not None:
            await asyncio.shield(pending)
            return self._registry.holds(table_id)
        if len(self._claiming) >= MAX_CLAIMING:
            raise ServiceError.table_moved("this node is busy taking tables over")
        done = asyncio.get_running_loop().create_future()
        self._claiming[table_id] = done
        try:
            claimed = await asyncio.to_thread(self._queries.claim, table_id=table_id)
            if claimed:
                self.taken_over += adopt_all(self._registry, claimed)
                log.info("table_taken_over", table_id=table_id)
        finally:
            del self._claiming[table_id]
            done.set_result(None)
        if not self._registry.holds(table_id):
            await self.tell_unreadable(table_id)  # (the caller is told TABLE_MOVED: retry)
        return self._registry.holds(table_id)

    async def drain(self) -> list[str]:
        """An operator's Drain: claim nothing more, and hand every table this node holds to
        the others (after what is done so far is committed); returns those that went."""
        self._registry.set_draining(True)
        await self._registry.delivery.committed()
        held = [table.id for table in self._registry.live()]
        handed = await asyncio.to_thread(self._queries.hand_over, held) if held else []
        for table_id in held:
            self._queries.forget(table_id)
            self._registry.drop(table_id, ServiceError.table_moved(
                "this node is draining: the table moved to another node"))
        log.info("tables_handed_over", count=len(handed))
        return handed

    def tables_lost(self, lost: set[str], owners: dict[str, str] | None = None) -> None:
        """Another node owns these tables now: drop them here, unseen; their streams end
        with UNAVAILABLE TABLE_MOVED, naming the new owner's public address where ``owners``
        has it, and clients come back to the owner (directly, or through any node)."""
        for table_id in lost:
            self._queries.forget(table_id)
            self._registry.drop(table_id, ServiceError.table_moved(
                "this table moved to another node", (owners or {}).get(table_id, "")))

    def claims_in_progress(self) -> int:
        return len(self._claiming)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

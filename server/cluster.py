"""This node among others sharing one PostgreSQL: its lease, taking over tables whose owner
died, and routing calls for tables another node owns.

- Lease: the node renews ``nodes.lease_until`` (the database's clock) every third of
  ``--lease``. It also keeps a local, conservative deadline (monotonic clock): when that
  passes without a renewal (the process was paused, the database is slow), the node stops
  serving its tables until it has renewed and re-checked which it still owns.
- Takeover: every half lease the node claims tables whose owner's lease ran out (epoch + 1,
  one claimant wins), replays each from its log and re-arms its timers; a call for such a
  table claims it at once.
- Routing: a call for a table this node does not hold is forwarded, as it came (bytes and
  metadata), to the owner's advertised address, unary or stream; tokens, the lobby and the
  records come from the database, so a client may call any node.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import grpc
import structlog

from server.errors import ServiceError
from server.pg_storage import Owner, PgStorage

if TYPE_CHECKING:
    from server.registry import TableManager

log = structlog.get_logger("copas.cluster")

CALLS_PER_CONNECTION = 100  # forwarded calls at once on one connection to another node
TAKEOVER_BATCH = 100  # tables claimed and replayed per step of a takeover
OWNER_SECONDS = 30.0  # a live owner, as read, is believed this long (or until a forward fails)
OWNER_CACHE = 100_000  # owners and tokens' tables remembered
MAX_CLAIMING = 1_000  # single-table takeovers in progress at once
HOPS = "x-copas-hops"  # a forwarded call carries it: it is never forwarded again
CLUSTER_KEY = "x-copas-cluster-key"  # a node's word about the client (x-forwarded-for)
FORWARDED_METADATA = ("authorization", "x-forwarded-for")


class Forward(Exception):
    """The call belongs to another node: the gateway relays it there as it came."""

    def __init__(self, address: str, table_id: str) -> None:
        super().__init__(address)
        self.address = address
        self.table_id = table_id


@dataclass
class _Known:
    owner: Owner
    until: float


class Cluster:
    def __init__(self, tables: TableManager, storage: PgStorage) -> None:
        self.tables = tables
        self.storage = storage
        self.node = storage.node
        self.key = ""
        self._owners: OrderedDict[str, _Known] = OrderedDict()  # table -> owner, as last read
        self._reading: dict[str, asyncio.Future[Owner | None]] = {}
        self._token_tables: OrderedDict[str, str] = OrderedDict()  # token hash -> table
        self._channels: dict[str, list[list[Any]]] = {}  # address -> [channel, calls]
        self._tasks: list[asyncio.Task[None]] = []
        self.lease_deadline = 0.0  # monotonic: past it, this node serves none of its tables
        self._claiming: dict[str, asyncio.Future[None]] = {}

    # ---------------------------------------------------------------- lease and takeovers

    async def start(self) -> None:
        self.key = await asyncio.to_thread(self.storage.cluster_key)
        self.lease_deadline = await self._renew()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._heartbeats()), loop.create_task(self._takeovers())]

    async def _renew(self) -> float:
        """Renew the lease; returns the local deadline it gives (not yet applied)."""
        sent = time.monotonic()
        seconds = await asyncio.to_thread(self.storage.heartbeat)
        return sent + seconds * 0.8  # conservative: clocks may drift

    def lease_ok(self) -> bool:
        return time.monotonic() < self.lease_deadline

    async def _heartbeats(self) -> None:
        while True:
            await asyncio.sleep(self.node.lease_seconds / 3)
            was_ok = self.lease_ok()
            try:
                deadline = await self._renew()
                if not was_ok:  # paused or cut off past the lease: which tables are ours?
                    await self._recheck()  # before serving any of them again
            except Exception as exc:  # the database is away: the lease runs out by itself
                log.error("lease_renewal_failed", error=str(exc)[:200])
                continue
            self.lease_deadline = deadline

    async def _recheck(self) -> None:
        held = dict(self.storage.epochs)
        current = await asyncio.to_thread(self.storage.epochs_of, list(held))
        lost = {t for t, epoch in held.items() if current.get(t) != (self.node.node_id, epoch)}
        if lost:
            log.warning("tables_lost", count=len(lost))
            self.tables_lost(lost)

    async def _takeovers(self) -> None:
        while True:
            await asyncio.sleep(self.node.lease_seconds / 2)
            if not self.lease_ok():
                continue
            await self.take_over_orphans()

    async def take_over_orphans(self) -> int:
        """Claim every table whose owner's lease ran out, a batch at a time (the loop runs
        between batches); returns how many now run here."""
        from server.recovery import adopt_all

        total = 0
        while self.lease_ok():
            try:
                claimed = await asyncio.to_thread(self.storage.claim, limit=TAKEOVER_BATCH)
            except Exception as exc:
                log.error("takeover_failed", error=str(exc)[:200])
                break
            if not claimed:
                break
            count = adopt_all(self.tables, claimed)
            total += count
            log.info("tables_taken_over", count=count)
            await asyncio.sleep(0)  # calls and timers run between batches
            if len(claimed) < TAKEOVER_BATCH:
                break
        return total

    def tables_lost(self, lost: set[str]) -> None:
        """The store refused our writes for these tables: another node owns them now. Drop
        them here, unseen: their streams end with UNAVAILABLE and clients come back through
        any node to the owner."""
        for table_id in lost:
            self.storage.forget(table_id)
            self.tables.drop(table_id, ServiceError.unavailable(
                "this table moved to another node: reconnect", "TABLE_MOVED"))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for pool in self._channels.values():
            for channel, _ in pool:
                await channel.close(None)

    # ---------------------------------------------------------------- routing

    async def locate(self, table_id: str, token_hash: str | None,
                     metadata: tuple[tuple[str, Any], ...]) -> None:
        """Make sure the table the call is about is held here, or raise Forward to its
        owner; nothing happens for a table nobody has (the caller answers NOT_FOUND)."""
        if table_id and table_id in self.tables.tables:
            return self.check_lease()
        if not table_id and token_hash is not None and token_hash in self.tables.tokens:
            return self.check_lease()
        if not table_id and token_hash is not None:
            table_id = self._token_tables.get(token_hash, "")
            if not table_id:
                found = await asyncio.to_thread(self.storage.table_of_token, token_hash)
                if found is None:
                    return None
                table_id = found[0]
                self._token_tables[token_hash] = table_id  # a token never changes table
                while len(self._token_tables) > OWNER_CACHE:
                    self._token_tables.popitem(last=False)
            if table_id in self.tables.tables:
                return self.check_lease()
        if not table_id:
            return None
        owner = await self._owner(table_id)
        if owner is None:
            return None
        if owner.node_id == self.node.node_id:
            return None  # ours, not served: quarantined (the service says so) or gone
        if not owner.is_alive:
            self.check_lease()
            await self._claim(table_id)  # its owner is gone (or it is ours from before)
            if table_id in self.tables.tables:
                return None
            self.forget_owner(table_id)  # another node claimed it first: ask again
            owner = await self._owner(table_id)
            if owner is None:
                return None
        if owner.is_alive and owner.node_id != self.node.node_id \
                and not any(key == HOPS for key, _ in metadata):
            raise Forward(owner.address, table_id)
        self.forget_owner(table_id)
        raise ServiceError.unavailable("the table is moving between nodes: retry",
                                       "TABLE_MOVED")

    def check_lease(self) -> None:
        if not self.lease_ok():
            raise ServiceError.unavailable("this node is renewing its lease: retry",
                                           "TABLE_MOVED")

    async def _owner(self, table_id: str) -> Owner | None:
        """The table's owner as last read (kept until a forward to it fails, or for at most
        OWNER_SECONDS); one database read at a time per table however many calls ask."""
        known = self._owners.get(table_id)
        if known is not None and known.until > time.monotonic():
            return known.owner
        pending = self._reading.get(table_id)
        if pending is None:
            pending = asyncio.ensure_future(asyncio.to_thread(self.storage.owner_of, table_id))
            self._reading[table_id] = pending
            try:
                owner = await asyncio.shield(pending)
            finally:
                del self._reading[table_id]
            if owner is not None:
                self._owners[table_id] = _Known(owner, time.monotonic() + (
                    OWNER_SECONDS if owner.is_alive else 0.2))
                self._owners.move_to_end(table_id)
                while len(self._owners) > OWNER_CACHE:
                    self._owners.popitem(last=False)
            return owner
        return await asyncio.shield(pending)

    def forget_owner(self, table_id: str) -> None:
        """What we knew of the table's owner is stale (a forward to it failed)."""
        self._owners.pop(table_id, None)

    async def _claim(self, table_id: str) -> None:
        """Take over one table whose owner is gone (once, however many calls ask)."""
        pending = self._claiming.get(table_id)
        if pending is not None:
            await asyncio.shield(pending)
            return
        if len(self._claiming) >= MAX_CLAIMING:
            raise ServiceError.unavailable("this node is busy taking tables over: retry",
                                           "TABLE_MOVED")
        done = asyncio.get_running_loop().create_future()
        self._claiming[table_id] = done
        try:
            claimed = await asyncio.to_thread(self.storage.claim, table_id=table_id)
            if claimed:
                from server.recovery import adopt_all

                adopt_all(self.tables, claimed)
                log.info("table_taken_over", table_id=table_id)
            self.forget_owner(table_id)
        finally:
            del self._claiming[table_id]
            done.set_result(None)

    # ---------------------------------------------------------------- forwarding

    def _acquire(self, address: str) -> list[Any]:
        """A connection to ``address`` with room for one more call: a node's connection
        carries at most --max-concurrent-streams calls, and forwarded streams last, so the
        calls to one node are spread over as many connections as they need."""
        pool = self._channels.setdefault(address, [])
        for entry in pool:
            if entry[1] < CALLS_PER_CONNECTION:
                entry[1] += 1
                return entry
        channel = grpc.aio.insecure_channel(address, options=[
            ("grpc.use_local_subchannel_pool", 1)])  # a connection of its own
        entry = [channel, 1]
        pool.append(entry)
        return entry

    def metadata(self, context: grpc.aio.ServicerContext[Any, Any], client: str
                 ) -> tuple[tuple[str, str], ...]:
        """What a forwarded call carries: the caller's token, who the client is (vouched
        for by the cluster key), and that it was forwarded once."""
        carried = [(k, v) for k, v in context.invocation_metadata() or ()
                   if k == "authorization" and isinstance(v, str)]
        return (*carried, ("x-forwarded-for", client), (CLUSTER_KEY, self.key), (HOPS, "1"))

    def _close_idle(self, address: str, own: list[Any]) -> None:
        """A node that did not answer (gone, or restarted on another port): its idle
        connections go (and the failed call's, when it was alone on it), so addresses of
        nodes long gone are not kept."""
        pool = self._channels.get(address, [])
        idle = [entry for entry in pool if entry[1] == 0 or (entry is own and entry[1] == 1)]
        for entry in idle:
            pool.remove(entry)
            asyncio.get_running_loop().create_task(entry[0].close(None))
        if not pool:
            self._channels.pop(address, None)

    async def forward_unary(self, hop: Forward, path: str, raw: bytes,
                            context: grpc.aio.ServicerContext[Any, Any], client: str) -> bytes:
        address = hop.address
        entry = self._acquire(address)
        try:
            answer: bytes = await entry[0].unary_unary(path)(
                raw, metadata=self.metadata(context, client), timeout=_timeout(context))
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.UNAVAILABLE:
                self.forget_owner(hop.table_id)  # gone, or the table moved on
                self._close_idle(hop.address, entry)
            await _relay_error(error, context)
            raise
        finally:
            entry[1] -= 1
        return answer

    async def forward_stream(self, hop: Forward, path: str, raw: bytes,
                             context: grpc.aio.ServicerContext[Any, Any], client: str) -> int:
        entry = self._acquire(hop.address)
        call = entry[0].unary_stream(path)(raw, metadata=self.metadata(context, client))
        sent = 0
        try:
            async for message in call:
                await context.write(message)
                sent += 1
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.UNAVAILABLE:
                self.forget_owner(hop.table_id)
                self._close_idle(hop.address, entry)
            await _relay_error(error, context)
            raise
        finally:
            call.cancel()
            entry[1] -= 1
        return sent


def _timeout(context: grpc.aio.ServicerContext[Any, Any]) -> float:
    """The client's deadline, passed on (at most 30 s)."""
    left = context.time_remaining()
    return 30.0 if left is None else max(0.001, min(30.0, left))


async def _relay_error(error: grpc.aio.AioRpcError, context: grpc.aio.ServicerContext[Any, Any]
                       ) -> None:
    """The owner's refusal, as it was (code, message, details)."""
    code = error.code()
    if code == grpc.StatusCode.UNAVAILABLE and not error.trailing_metadata():
        # The owner went away mid-call: say so in the contract's words.
        failure = ServiceError.unavailable("the table's node went away: retry",
                                           "TABLE_MOVED")
        await context.abort_with_status(failure.to_status())
    trailing = tuple((k, v) for k, v in (error.trailing_metadata() or ())
                     if k == "grpc-status-details-bin")
    await context.abort(code, error.details() or "", trailing)


"""What the admin service asks of a cluster: the other live nodes (from the database), the
tables nobody holds, where one table is, relaying an operator's call there, and a drain that
hands this node's tables to the others."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import grpc
from copas.admin.v1 import admin_pb2
from copas.v1 import copas_pb2

from server.cluster.forwarding import Forwarder
from server.cluster.ownership import Lease, Takeovers
from server.cluster.routing import Router
from server.store.postgres import PgStore

Context = grpc.aio.ServicerContext[Any, Any]


class ClusterAdmin:
    def __init__(self, store: PgStore, lease: Lease, router: Router, forwarder: Forwarder,
                 takeovers: Takeovers) -> None:
        self._store = store
        self._lease = lease
        self._router = router
        self._forwarder = forwarder
        self._takeovers = takeovers
        self.node_id = store.node.node_id

    async def route(self, table_id: str, relayed: bool) -> str | None:
        # A call about one table goes where GetTable of copas.v1 would.
        return await self._router.route("GetTable", table_id, None, relayed)

    async def other_nodes(self) -> list[str]:
        nodes = await asyncio.to_thread(self._store.nodes)
        return [address for node_id, address, alive in nodes
                if alive and node_id != self.node_id]

    async def orphans(self, limit: int) -> list[admin_pb2.AdminTable]:
        rows = await asyncio.to_thread(self._store.orphan_rows, limit)
        return [_orphan(created, summary, owner) for created, _, summary, owner in rows]

    async def relay(self, address: str, table_id: str, path: str, raw: bytes,
                    context: Context) -> bytes:
        return await self._forwarder.unary(address, table_id, path, raw, context,
                                           context.peer())

    async def drain(self) -> int:
        """Hand this node's tables to the others; with no other node alive they stay, and
        their games finish here."""
        if not await self.other_nodes():
            self._takeovers.is_draining = True
            return 0
        return await self._takeovers.drain()

    def undrain(self) -> None:
        self._takeovers.is_draining = False

    def lease_state(self) -> tuple[str, float]:
        age = time.monotonic() - self._lease.renewed_at
        return ("held" if self._lease.is_valid() else "renewing"), age


def _orphan(created: float, summary: bytes, owner: str) -> admin_pb2.AdminTable:
    """A table no live node holds, from its last summary in the database: stuck."""
    parsed = copas_pb2.TableSummary.FromString(summary)
    now = time.time()
    return admin_pb2.AdminTable(
        table_id=parsed.table_id, display_name=parsed.display_name, preset=parsed.preset,
        phase=parsed.phase, hand_number=parsed.hand_number, create_time=parsed.create_time,
        age_seconds=max(0.0, now - created), idle_seconds=0.0, owner_node=owner,
        bot_policy=parsed.bot_policy, is_stuck=True, rules=parsed.rules,
        seats=[admin_pb2.AdminSeat(
            seat=s.seat, display_name=s.display_name, is_taken=s.is_taken, is_bot=s.is_bot,
            has_left=s.has_left, total=s.total) for s in parsed.seats])

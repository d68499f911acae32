"""What the admin service asks of a cluster: the other live nodes (from the database), the
tables nobody holds, relaying an operator's call to another node, and a drain that hands this
node's tables to the others at once. It is the gateway's forwarder for the admin service (a
call about one table goes to its owner: ``server.cluster.routing.AdminRouter``).

An operator's call is relayed on a channel of its own (not the players' Forwarder, which ends
the caller's call on a refusal): the refusal comes back as an error, so a listing over every
node can name a node that did not answer instead of failing, and the audit line names the
owner's reason. The relayed call carries the operator's ``authorization`` as it came (the
other node checks it), the cluster key and the hop mark, and the operator's name for that
node's audit line."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
from copas.admin.v1 import admin_pb2
from copas.v1 import copas_pb2
from google.rpc import error_details_pb2, status_pb2

from server.cluster.keys import ClusterKeys
from server.cluster.ownership import Lease, Takeovers
from server.cluster.queries import ClusterQueries
from server.cluster.routing import Router
from server.errors import ServiceError
from server.metadata import ADMIN_BY, CLUSTER_KEY, HOPS

Context = grpc.aio.ServicerContext[Any, Any]

NODES_SECONDS = 1.0  # the live nodes, as read from the database, are kept this long
CHANNELS_MAX = 64  # channels to other nodes kept open
NUDGES_AT_ONCE = 16  # a drain's calls asking other nodes to take its tables, in flight


class ClusterAdmin:
    def __init__(self, queries: ClusterQueries, lease: Lease, router: Router, takeovers: Takeovers,
                 keys: ClusterKeys, answer_within: float,
                 credentials: grpc.ChannelCredentials | None = None) -> None:
        self._queries = queries
        self._lease = lease
        self._router = router
        self._takeovers = takeovers
        self._keys = keys
        self._credentials = credentials  # mutual TLS to the other nodes' internal ports
        self._answer_within = answer_within
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._closing: set[asyncio.Task[None]] = set()  # the oldest channels being closed
        self._nodes: tuple[float, list[tuple[str, str]]] = (0.0, [])
        self.node_id = queries.node.node_id

    async def other_nodes(self) -> list[tuple[str, str]]:
        read_at, nodes = self._nodes
        if time.monotonic() - read_at > NODES_SECONDS:
            rows = await asyncio.to_thread(self._queries.nodes)
            nodes = [(node_id, address) for node_id, address, alive in rows
                     if alive and node_id != self.node_id]
            self._nodes = (time.monotonic(), nodes)
        return nodes

    async def orphans(self, limit: int, after_created: float | None
                      ) -> list[admin_pb2.AdminTable]:
        rows = await asyncio.to_thread(self._queries.orphan_rows, limit, after_created)
        return [_orphan(created, summary, owner) for created, _, summary, owner in rows]

    def _channel(self, address: str) -> grpc.aio.Channel:
        channel = self._channels.get(address)
        if channel is None:
            if len(self._channels) >= CHANNELS_MAX:
                oldest = self._channels.pop(next(iter(self._channels)))
                closing = asyncio.get_running_loop().create_task(oldest.close(None))
                self._closing.add(closing)
                closing.add_done_callback(self._closing.discard)
            channel = self._channels[address] = \
                grpc.aio.secure_channel(address, self._credentials) \
                if self._credentials is not None else grpc.aio.insecure_channel(address)
        return channel

    def _metadata(self, context: Context | None, who: str) -> tuple[tuple[str, str], ...]:
        carried = [(k, v) for k, v in (context.invocation_metadata() or ()) if
                   k == "authorization" and isinstance(v, str)] if context is not None else []
        return (*carried, (CLUSTER_KEY, self._keys.current), (HOPS, "1"), (ADMIN_BY, who))

    async def relay(self, address: str, path: str, raw: bytes, context: Context,
                    who: str) -> bytes:
        left = context.time_remaining()
        timeout = self._answer_within if left is None else min(left, self._answer_within)
        call = self._channel(address).unary_unary(
            path, request_serializer=_as_is, response_deserializer=_as_is)
        answer: bytes = await call(raw, metadata=self._metadata(context, who),
                                   timeout=max(0.001, timeout))
        return answer

    async def unary(self, address: str, table_id: str, path: str, raw: bytes,
                    context: Context, client: str) -> bytes:
        """An operator's call about one table, relayed to its owner (``client``: the
        operator's name).

        :raises ServiceError: the owner's refusal; TABLE_MOVED when it did not answer in time
            (its address is then read again).
        """
        try:
            return await self.relay(address, path, raw, context, client)
        except grpc.aio.AioRpcError as error:
            refusal = _refusal(error)
            if refusal.reason == "TABLE_MOVED":
                self._router.forget_owner(table_id)
            raise refusal from None

    async def stream(self, address: str, table_id: str, path: str, raw: bytes,
                     context: Context, client: str) -> int:
        raise RuntimeError("the admin service has no streams")

    async def bidi(self, address: str, table_id: str, path: str, first: bytes,
                   rest: AsyncIterator[bytes], context: Context, client: str) -> int:
        raise RuntimeError("the admin service has no streams")

    async def drain(self) -> int:
        """Hand this node's tables to the others, then ask them to take each at once (a
        GetTable relayed to one of them claims it; one the quotas refuse is taken at that
        node's next sweep). With no other node alive they stay, and their games finish
        here."""
        others = await self.other_nodes()
        if not others:  # (draining all the same: the registry's flag, set by the caller)
            return 0
        handed = await self._takeovers.drain()
        room = asyncio.Semaphore(NUDGES_AT_ONCE)

        async def nudge(table_id: str, address: str) -> None:
            call = self._channel(address).unary_unary(
                "/copas.v1.CopasService/GetTable",
                request_serializer=copas_pb2.GetTableRequest.SerializeToString,
                response_deserializer=copas_pb2.GetTableResponse.FromString)
            # A refusal: that node's sweep takes it over.
            async with room:
                with contextlib.suppress(grpc.aio.AioRpcError):
                    await call(copas_pb2.GetTableRequest(table_id=table_id),
                               metadata=self._metadata(None, "drain"),
                               timeout=self._answer_within)
        await asyncio.gather(*(nudge(t, others[i % len(others)][1])
                               for i, t in enumerate(handed)))
        return len(handed)

    def lease_state(self) -> tuple[str, float]:
        age = time.monotonic() - self._lease.renewed_at
        return ("held" if self._lease.is_valid() else "renewing"), age

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close(None)
        self._channels.clear()
        await asyncio.gather(*self._closing)


def _as_is(data: bytes) -> bytes:
    return data


def _refusal(error: grpc.aio.AioRpcError) -> ServiceError:
    """Another node's refusal of a relayed call, with its reason (or, when it did not
    answer, TABLE_MOVED)."""
    reason = ""
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin" and isinstance(value, bytes):
            for detail in status_pb2.Status.FromString(value).details:
                info = error_details_pb2.ErrorInfo()
                if detail.Unpack(info):
                    reason = info.reason
    try:
        return ServiceError(error.code(), reason, error.details() or "")
    except ValueError:  # no reason: the node did not answer (in time)
        return ServiceError.table_moved("the table's node did not answer in time")


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

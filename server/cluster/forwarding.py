"""Relaying a call to the node that owns its table: the request's bytes and the caller's
token as they came, the client's address vouched for by the cluster key (so the owner's
quotas count the real client), and a mark that it was relayed once (``HOPS``: never again).
The owner's answer, or its refusal (code, message, details), comes back as it was.

A node's connection carries at most ``--max-concurrent-streams`` calls, and relayed streams
last, so the calls to one node are spread over as many connections as they need; the idle
connections of a node that stopped answering are closed.

A node that stops answering without going away (SIGSTOP, a stall, a partition that drops
packets) is noticed within ``answer_within`` seconds (half the lease): a relayed call gets
no longer than that, and the connections ping it as often (HTTP/2 keepalive), so a relayed
stream to it ends too. Then the table's owner is read again, and once the frozen node's
lease has lapsed the table is claimed or found where another node took it.

Spectators' WatchTable streams of one table share one upstream stream to its owner
(``server.cluster.shared_watch``); every other stream is relayed on its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import grpc

from server.cluster.keys import ClusterKeys
from server.cluster.shared_watch import SharedWatches, relay_error
from server.errors import ServiceError
from server.metadata import CLUSTER_KEY, FORWARDED_FOR, HOPS

Context = grpc.aio.ServicerContext[Any, Any]
WATCH_TABLE = "/copas.v1.CopasService/WatchTable"
REFUSED_RETRIES = 5  # a call the owner refused unread is sent again up to this many times
REFUSED_PAUSE = 0.05  # seconds before the first such retry (doubling after: 1.55 s in all)


@dataclass
class _Connection:
    channel: grpc.aio.Channel
    calls: int = 0


class Forwarder:
    def __init__(self, keys: ClusterKeys, on_unreachable: Callable[[str], None],
                 calls_per_connection: int = 100, answer_within: float = 5.0,
                 credentials: grpc.ChannelCredentials | None = None, history: int = 1024,
                 watcher_queue: int = 512, max_watchers_per_table: int = 64) -> None:
        self.keys = keys  # the cluster key presented is the current one (it rotates)
        self._credentials = credentials  # mutual TLS to the internal ports (None: plaintext)
        self.answer_within = answer_within  # seconds a node has to answer (see above)
        # At most the streams a node takes at once on one connection (--max-concurrent-
        # streams): beyond them a call would wait for a free one, a stream forever.
        self.calls_per_connection = max(1, calls_per_connection)
        self._on_unreachable = on_unreachable  # a table's owner did not answer
        self._connections: dict[str, list[_Connection]] = {}  # address -> connections
        self._closing: set[asyncio.Task[None]] = set()  # idle connections being closed
        self.relayed = 0  # calls and streams relayed so far
        self.shared = SharedWatches(self._open_shared, history, watcher_queue,
                                    max_watchers_per_table)

    def _acquire(self, address: str) -> _Connection:
        """A connection to ``address`` with room for one more call."""
        self.relayed += 1
        pool = self._connections.setdefault(address, [])
        for connection in pool:
            if connection.calls < self.calls_per_connection:
                connection.calls += 1
                return connection
        within = max(1, int(self.answer_within * 1000))
        options = [
            ("grpc.use_local_subchannel_pool", 1),  # a connection of its own
            # grpc-core waits for a ping's answer ping_timeout_ms (60 s by default), not
            # keepalive_timeout_ms: both, so a frozen node is let go of within two periods.
            ("grpc.keepalive_time_ms", within), ("grpc.keepalive_timeout_ms", within),
            ("grpc.http2.ping_timeout_ms", within),
            ("grpc.http2.max_pings_without_data", 0)]  # a quiet stream is pinged too
        connection = _Connection(
            grpc.aio.secure_channel(address, self._credentials, options=options)
            if self._credentials is not None else
            grpc.aio.insecure_channel(address, options=options), 1)
        pool.append(connection)
        return connection

    def connections(self) -> int:
        """Connections held to other nodes."""
        return sum(len(pool) for pool in self._connections.values())

    def calls_in_flight(self) -> int:
        """Calls being relayed now."""
        return sum(c.calls for pool in self._connections.values() for c in pool)

    def _metadata(self, context: Context, client: str) -> tuple[tuple[str, str], ...]:
        carried = [(k, v) for k, v in context.invocation_metadata() or ()
                   if k == "authorization" and isinstance(v, str)]
        return (*carried, (FORWARDED_FOR, client), (CLUSTER_KEY, self.keys.current),
                (HOPS, "1"))

    def _unreachable(self, address: str, table_id: str, own: _Connection) -> None:
        """A node that did not answer (gone, or restarted on another port): the table's owner
        is read again next time, and its idle connections go (and the failed call's, when it
        was alone on it), so addresses of nodes long gone are not kept."""
        self._on_unreachable(table_id)
        pool = self._connections.get(address, [])
        idle = [c for c in pool if c.calls == 0 or (c is own and c.calls == 1)]
        for connection in idle:
            pool.remove(connection)
            closing = asyncio.get_running_loop().create_task(connection.channel.close(None))
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)
        if not pool:
            self._connections.pop(address, None)

    async def unary(self, address: str, table_id: str, path: str, raw: bytes,
                    context: Context, client: str) -> bytes:
        for attempt in range(REFUSED_RETRIES):  # a refused stream was not processed
            try:
                return await self._unary(address, table_id, path, raw, context, client,
                                         is_last=False)
            except _Refused:
                await asyncio.sleep(REFUSED_PAUSE * 2 ** attempt)
        return await self._unary(address, table_id, path, raw, context, client, is_last=True)

    async def _unary(self, address: str, table_id: str, path: str, raw: bytes,
                     context: Context, client: str, is_last: bool) -> bytes:
        connection = self._acquire(address)
        try:
            answer = await connection.channel.unary_unary(
                path, request_serializer=_as_is, response_deserializer=_as_is)(
                raw, metadata=self._metadata(context, client),
                timeout=min(_timeout(context), self.answer_within))
        except grpc.aio.AioRpcError as error:
            if not is_last and is_refused_stream(error) and _client_has_time(context):
                raise _Refused() from error
            if error.code() == grpc.StatusCode.UNAVAILABLE:
                self._unreachable(address, table_id, connection)
            elif error.code() == grpc.StatusCode.DEADLINE_EXCEEDED \
                    and _client_has_time(context):  # our deadline, not the client's
                self._unreachable(address, table_id, connection)
                await context.abort_with_status(ServiceError.table_moved(
                    "the table's node did not answer in time").to_status())
            await relay_error(error, context)
            raise
        finally:
            connection.calls -= 1
        return answer

    async def stream(self, address: str, table_id: str, path: str, raw: bytes,
                     context: Context, client: str) -> int:
        """Relay a server stream (a spectator's WatchTable: on its table's shared upstream);
        returns how many messages it passed on."""
        if path == WATCH_TABLE and not _has_token(context):
            return await self.shared.watch(
                address, table_id, raw, context, client,
                lambda: self._stream(address, table_id, path, raw, context, client))
        return await self._stream(address, table_id, path, raw, context, client)

    def _open_shared(self, address: str, table_id: str, raw: bytes, context: Context,
                     client: str) -> tuple[Any, Callable[[grpc.aio.AioRpcError | None], None]]:
        """A shared upstream WatchTable (see ``SharedWatches``), and what to do at its end."""
        connection = self._acquire(address)
        call = connection.channel.unary_stream(
            WATCH_TABLE, request_serializer=_as_is, response_deserializer=_as_is)(
                raw, metadata=self._metadata(context, client))

        def ended(error: grpc.aio.AioRpcError | None) -> None:
            if error is not None and error.code() == grpc.StatusCode.UNAVAILABLE:
                self._unreachable(address, table_id, connection)
            connection.calls -= 1

        return call, ended

    async def _stream(self, address: str, table_id: str, path: str, raw: bytes,
                      context: Context, client: str) -> int:
        connection = self._acquire(address)
        call = connection.channel.unary_stream(
            path, request_serializer=_as_is, response_deserializer=_as_is)(
                raw, metadata=self._metadata(context, client))
        return await self._pass_down(call, connection, address, table_id, context)

    async def bidi(self, address: str, table_id: str, path: str, first: bytes,
                   rest: AsyncIterator[bytes], context: Context, client: str) -> int:
        """Relay a bidirectional stream as one stream: the client's messages up (the first
        already read), the owner's down; returns how many messages it passed down."""
        connection = self._acquire(address)

        async def upward() -> AsyncIterator[bytes]:
            yield first
            async for message in rest:
                yield message

        call = connection.channel.stream_stream(
            path, request_serializer=_as_is, response_deserializer=_as_is)(
                upward(), metadata=self._metadata(context, client))
        return await self._pass_down(call, connection, address, table_id, context)

    async def _pass_down(self, call: Any, connection: _Connection, address: str,
                         table_id: str, context: Context) -> int:
        """The owner's messages to the client, as they come, until the owner's stream
        ends (or fails: its error relayed); returns how many were passed on."""
        sent = 0
        try:
            async for message in call:
                await context.write(message)
                sent += 1
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.UNAVAILABLE:
                self._unreachable(address, table_id, connection)
            await relay_error(error, context)
            raise
        finally:
            call.cancel()
            connection.calls -= 1
        return sent

    async def close(self) -> None:
        for pool in self._connections.values():
            for connection in pool:
                await connection.channel.close(None)
        self._connections.clear()
        await asyncio.gather(*self._closing)


class _Refused(Exception):
    """The owner refused the call's stream (HTTP/2 REFUSED_STREAM): it did not see it."""


def is_refused_stream(error: grpc.aio.AioRpcError) -> bool:
    """grpc-core's UNAVAILABLE for a stream the peer refused before reading it (RST_STREAM
    REFUSED_STREAM, HTTP/2's code 7): by HTTP/2's rule the call was not processed, so it is
    safe to send again (grpc says so only in its message)."""
    return error.code() == grpc.StatusCode.UNAVAILABLE and \
        "RST_STREAM with error code 7" in (error.details() or "")


def _as_is(data: bytes) -> bytes:
    """A relayed message stays as it came: bytes."""
    return data


def _has_token(context: Context) -> bool:
    """The call carries a player token (its own view: never shared)."""
    return any(k == "authorization" for k, _ in context.invocation_metadata() or ())


def _client_has_time(context: Context) -> bool:
    left = context.time_remaining()
    return left is None or left > 0


def _timeout(context: Context) -> float:
    """The client's deadline, passed on (at most 30 s)."""
    left = context.time_remaining()
    return 30.0 if left is None else max(0.001, min(30.0, left))

"""The gRPC servicer: decode, call the tables, encode. Nothing else lives here."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc
import structlog
from copas.v1 import copas_pb2, copas_pb2_grpc

from engine import ChooseMoon, Leave, PassCards, PlayCard
from server import codec
from server.errors import ServiceError
from server.observability import Metrics
from server.tables import TableManager

log = structlog.get_logger("copas.rpc")
T = TypeVar("T")
REQUEST_ID_MAX = 64


def bearer_token(context: grpc.aio.ServicerContext[Any, Any]) -> str | None:
    for key, value in context.invocation_metadata() or ():
        if key == "authorization":
            text = value.decode() if isinstance(value, bytes) else value
            scheme, _, token = text.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise ServiceError.unauthenticated(
                    "authorization metadata must be 'Bearer <token>'")
            return token.strip()
    return None


def _request_id(request: Any) -> str:
    request_id: str = request.request_id
    if len(request_id) > REQUEST_ID_MAX:
        raise ServiceError.invalid(f"request_id is at most {REQUEST_ID_MAX} characters",
                                   "INVALID_REQUEST_ID")
    if request_id:
        structlog.contextvars.bind_contextvars(request_id=request_id)
    return request_id


class CopasService(copas_pb2_grpc.CopasServiceServicer):
    def __init__(self, tables: TableManager) -> None:
        self.tables = tables

    async def CreateTable(self, request: copas_pb2.CreateTableRequest,
                          context: grpc.aio.ServicerContext[Any, Any]
                          ) -> copas_pb2.CreateTableResponse:
        table = self.tables.create(
            preset=request.preset, overrides=codec.rules_overrides(request.rules),
            bot_seats=request.bot_seats, name=request.display_name,
            seed=request.seed if request.HasField("seed") else None)
        structlog.contextvars.bind_contextvars(table_id=table.id)
        await self.tables.storage.sync()
        return copas_pb2.CreateTableResponse(table=table.summary())

    async def ListTables(self, request: copas_pb2.ListTablesRequest,
                         context: grpc.aio.ServicerContext[Any, Any]
                         ) -> copas_pb2.ListTablesResponse:
        page, token = self.tables.page(request.page_size, request.page_token)
        return copas_pb2.ListTablesResponse(tables=[t.summary() for t in page],
                                            next_page_token=token)

    async def GetTable(self, request: copas_pb2.GetTableRequest,
                       context: grpc.aio.ServicerContext[Any, Any]) -> copas_pb2.GetTableResponse:
        return copas_pb2.GetTableResponse(table=self.tables.get(request.table_id).summary())

    async def JoinTable(self, request: copas_pb2.JoinTableRequest,
                        context: grpc.aio.ServicerContext[Any, Any]
                        ) -> copas_pb2.JoinTableResponse:
        structlog.contextvars.bind_contextvars(table_id=request.table_id)
        table, seat, token = self.tables.join(
            request.table_id, request.display_name,
            request.seat if request.HasField("seat") else None)
        structlog.contextvars.bind_contextvars(seat=seat)
        await self.tables.storage.sync()  # the seat is durable before the token is given
        return copas_pb2.JoinTableResponse(seat=seat, player_token=token, table=table.summary())

    async def _act(self, request: Any, context: grpc.aio.ServicerContext[Any, Any],
                   make: Callable[[int], Any]) -> int:
        """Authenticate, apply, and answer once the action is durable."""
        structlog.contextvars.bind_contextvars(table_id=request.table_id)
        request_id = _request_id(request)
        table, seat = self.tables.authenticate(bearer_token(context), request.table_id)
        structlog.contextvars.bind_contextvars(seat=seat)
        sequence = table.act(seat, make(seat), request_id)
        await self.tables.storage.sync()
        return sequence

    async def PassCards(self, request: copas_pb2.PassCardsRequest,
                        context: grpc.aio.ServicerContext[Any, Any]
                        ) -> copas_pb2.PassCardsResponse:
        cards = tuple(codec.card_from_pb(c) for c in request.cards)
        sequence = await self._act(request, context, lambda seat: PassCards(seat, cards))
        return copas_pb2.PassCardsResponse(sequence=sequence)

    async def PlayCard(self, request: copas_pb2.PlayCardRequest,
                       context: grpc.aio.ServicerContext[Any, Any]) -> copas_pb2.PlayCardResponse:
        card = codec.card_from_pb(request.card)
        sequence = await self._act(request, context, lambda seat: PlayCard(seat, card))
        return copas_pb2.PlayCardResponse(sequence=sequence)

    async def ChooseMoon(self, request: copas_pb2.ChooseMoonRequest,
                         context: grpc.aio.ServicerContext[Any, Any]
                         ) -> copas_pb2.ChooseMoonResponse:
        choice = codec.MOON_CHOICE_FROM_PB.get(request.choice)
        if choice is None:
            raise ServiceError.invalid("choice must be MOON_CHOICE_SUBTRACT_FROM_SELF or "
                                       "MOON_CHOICE_ADD_TO_OTHERS", "INVALID_MOON_CHOICE")
        sequence = await self._act(request, context, lambda seat: ChooseMoon(seat, choice))
        return copas_pb2.ChooseMoonResponse(sequence=sequence)

    async def LeaveTable(self, request: copas_pb2.LeaveTableRequest,
                         context: grpc.aio.ServicerContext[Any, Any]
                         ) -> copas_pb2.LeaveTableResponse:
        sequence = await self._act(request, context, Leave)
        return copas_pb2.LeaveTableResponse(sequence=sequence)

    async def WatchTable(self, request: copas_pb2.WatchTableRequest,
                         context: grpc.aio.ServicerContext[Any, Any]
                         ) -> AsyncIterator[copas_pb2.WatchTableResponse]:
        structlog.contextvars.bind_contextvars(table_id=request.table_id)
        if request.after_sequence < 0:
            raise ServiceError.invalid("after_sequence must not be negative")
        table, seat = self.tables.seat_for_watch(bearer_token(context), request.table_id)
        if seat is not None:
            structlog.contextvars.bind_contextvars(seat=seat)
        watcher = table.add_watcher(seat)
        try:
            await self.tables.storage.sync()  # show only what is durable
            yield copas_pb2.WatchTableResponse(
                event=table.snapshot(watcher, request.after_sequence))
            while not watcher.is_closed:
                await watcher.wakeup.wait()
                watcher.wakeup.clear()
                if watcher.needs_snapshot:
                    yield copas_pb2.WatchTableResponse(event=table.snapshot(watcher, 0))
                while watcher.queue:
                    yield copas_pb2.WatchTableResponse(event=watcher.queue.popleft())
        finally:
            table.remove_watcher(watcher)


    async def GetGameRecord(self, request: copas_pb2.GetGameRecordRequest,
                            context: grpc.aio.ServicerContext[Any, Any]
                            ) -> copas_pb2.GetGameRecordResponse:
        data = await asyncio.to_thread(self.tables.record, request.record_id)
        return copas_pb2.GetGameRecordResponse(record=codec.record_to_pb(data, with_json=True))

    async def ListGameRecords(self, request: copas_pb2.ListGameRecordsRequest,
                              context: grpc.aio.ServicerContext[Any, Any]
                              ) -> copas_pb2.ListGameRecordsResponse:
        rows, token = await asyncio.to_thread(self.tables.record_page, request.page_size,
                                              request.page_token)
        return copas_pb2.ListGameRecordsResponse(
            records=[codec.record_to_pb(r, with_json=False) for r in rows],
            next_page_token=token)


# ---------------------------------------------------------------- interceptor


class ObservabilityInterceptor(grpc.aio.ServerInterceptor):
    """One log line and one latency sample per RPC; turns ServiceError into its status."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    async def intercept_service(
            self, continuation: Callable[[grpc.HandlerCallDetails],
                                         Awaitable[grpc.RpcMethodHandler]],
            details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        method_path: str = details.method  # type: ignore[attr-defined]
        if handler is None or not method_path.startswith("/copas.v1."):
            return handler
        method = method_path.rsplit("/", 1)[-1]
        metrics = self.metrics

        def finish(start: float, code: str, error: ServiceError | None,
                   stream_messages: int | None = None) -> None:
            elapsed = time.perf_counter() - start
            metrics.rpc_latency.labels(method, code).observe(elapsed)
            fields: dict[str, Any] = {"code": code, "duration_ms": round(elapsed * 1000, 3)}
            if error is not None:
                fields["reason"] = error.reason
                fields["error"] = error.message
            if stream_messages is not None:
                fields["messages"] = stream_messages
            log.info("rpc", **fields)

        if handler.unary_unary is not None:
            inner_unary = handler.unary_unary

            async def unary(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
                structlog.contextvars.clear_contextvars()
                structlog.contextvars.bind_contextvars(rpc=method)
                start = time.perf_counter()
                try:
                    response = await inner_unary(request, context)
                except ServiceError as error:
                    finish(start, error.code.name, error)
                    await context.abort_with_status(error.to_status())
                    raise  # abort_with_status raises; this is never reached
                except Exception:
                    finish(start, _code_name(context, "UNKNOWN"), None)
                    raise
                finish(start, "OK", None)
                return response

            return grpc.unary_unary_rpc_method_handler(
                unary, request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer)

        if handler.unary_stream is not None:
            inner_stream = handler.unary_stream

            async def stream(request: Any, context: grpc.aio.ServicerContext[Any, Any]
                             ) -> AsyncIterator[Any]:
                structlog.contextvars.clear_contextvars()
                structlog.contextvars.bind_contextvars(rpc=method)
                start = time.perf_counter()
                sent = 0
                try:
                    async for message in inner_stream(request, context):
                        sent += 1
                        yield message
                except ServiceError as error:
                    finish(start, error.code.name, error, sent)
                    await context.abort_with_status(error.to_status())
                    raise
                except BaseException:
                    finish(start, _code_name(context, "CANCELLED"), None, sent)
                    raise
                finish(start, "OK", None, sent)

            return grpc.unary_stream_rpc_method_handler(
                stream, request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer)
        return handler


def _code_name(context: grpc.aio.ServicerContext[Any, Any], default: str) -> str:
    try:
        code = context.code()
    except Exception:
        return default
    if isinstance(code, grpc.StatusCode):
        return code.name
    return default

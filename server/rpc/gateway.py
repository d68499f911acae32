"""The gateway every call passes first: each method's handler, wrapped once.

For each call it: reads the caller (client address, player token from ``authorization:
Bearer``) into a context variable, so servicer methods never parse metadata; applies the
per-client quotas before the request is even decoded; decodes the request itself (bytes
that are not the method's message get INVALID_ARGUMENT, not UNKNOWN); routes it (a call for a
table another node of the cluster owns is relayed there, decided here for every method, so
no servicer method can forget; the answers that name a table tell the client its owner,
``x-copas-owner``); turns a ``ServiceError`` (or the store's failure) into its
status with details; and writes one log line and one latency sample per call (streams:
their lifetime, in a metric of their own). Unary calls and streams share one outcome path
(``_finish``).

Another service goes through the same gateway with a ``Routing`` of its own: its router (from
its own route table), its forwarder and its own check of every call (the admin service's
operator credential), made before the call is routed; such a service records each call's end
itself (its audit line) instead of the gateway's log line and latency sample.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, TypeVar

import grpc
import structlog
from google.protobuf.message import DecodeError

from server.cluster.destination import HERE, Destination
from server.errors import ServiceError
from server.metadata import OWNER
from server.observability import Metrics
from server.rpc.peers import PeerTrust, bearer_token_hash, bears_access_token
from server.rpc.quotas import Quotas
from server.store.base import StorageError, StoreUnreachable

log = structlog.get_logger("copas.rpc")
Context = grpc.aio.ServicerContext[Any, Any]
Metadata = Iterable[tuple[str, str | bytes]]
Handler: TypeAlias = "grpc.RpcMethodHandler[Any, Any]"  # generic in the stubs only
S = TypeVar("S")


HELD_PER_CLIENT = 64  # refusals of one client held back at once (as its calls in flight)
HELD_IN_ALL = 4096  # refusals of all clients held back at once


@dataclass(slots=True)
class Caller:
    method: str
    peer: str  # the client's quota key (its address, or its IPv6 /64)
    token_hash: str | None  # SHA-256 of the bearer token, when one was sent
    sent: int = 0  # messages a stream wrote (the servicer counts them)
    who: str = ""  # who a service's own check found calling (``CallCheck``)
    has_access_token: bool = False  # the bearer token is an account's access token


TABLES_SERVICE = "copas.v1.CopasService"  # routed by the gateway's own router (its tables)

CALLER: contextvars.ContextVar[Caller] = contextvars.ContextVar("copas_caller")


def caller() -> Caller:
    return CALLER.get()


class CallRouter(Protocol):
    """Where a call is served: here, or relayed to the node owning its table."""

    async def route(self, method: str, table_id: str, token_hash: str | None,
                    relayed: bool) -> Destination:
        """``relayed``: another node of the cluster relayed this call (its cluster key and
        its hop mark are both there): it is never relayed again."""


class ImpliedTables(Protocol):
    """The table a call means without naming it (a quick match's, a retried request's),
    wherever in the cluster it is: "" for none (served here)."""

    async def implied_table(self, method: str, request: Any) -> str: ...


class CallForwarder(Protocol):
    """Relays a call, as it came, to another node (``client``: the client's address, or who
    a service's own check found calling). A refusal comes back as the owner gave it (or,
    read by the forwarder, as a ``ServiceError``)."""

    async def unary(self, address: str, table_id: str, path: str, raw: bytes,
                    context: Context, client: str) -> bytes: ...

    async def stream(self, address: str, table_id: str, path: str, raw: bytes,
                     context: Context, client: str) -> int: ...

    async def bidi(self, address: str, table_id: str, path: str, first: bytes,
                   rest: AsyncIterator[bytes], context: Context, client: str) -> int: ...


class ServeHere:
    """One process: every call is served here, nothing is relayed."""

    async def route(self, method: str, table_id: str, token_hash: str | None,
                    relayed: bool) -> Destination:
        return HERE

    async def implied_table(self, method: str, request: Any) -> str:
        return ""

    async def unary(self, address: str, table_id: str, path: str, raw: bytes,
                    context: Context, client: str) -> bytes:
        raise RuntimeError("one process relays nothing")

    async def stream(self, address: str, table_id: str, path: str, raw: bytes,
                     context: Context, client: str) -> int:
        raise RuntimeError("one process relays nothing")

    async def bidi(self, address: str, table_id: str, path: str, first: bytes,
                   rest: AsyncIterator[bytes], context: Context, client: str) -> int:
        raise RuntimeError("one process relays nothing")


SERVE_HERE = ServeHere()


class CallCheck(Protocol):
    """A service's own check of every call, before it is routed (served here or relayed),
    and its own record of how each call ended."""

    def check(self, method: str, context: Context) -> str:
        """Who is calling (``Caller.who``; what a relay of the call names as its client).

        :raises ServiceError: the call is refused.
        """

    def ended(self, method: str, request: Any, who: str, context: Context, code: str,
              error: ServiceError | None) -> None:
        """Record the call's end (``request``: None when it could not be read; ``who``: ''
        when the check refused it)."""


@dataclass(frozen=True, slots=True)
class Routing:
    """How the gateway serves one service's calls."""

    router: CallRouter = SERVE_HERE
    """Where each call goes, from the service's route table."""
    forwarder: CallForwarder = SERVE_HERE
    """What relays a call to another node."""
    implied: ImpliedTables = SERVE_HERE
    """The table a call means without naming it."""
    check: CallCheck | None = None
    """The service's own check and record of each call (then a player's token is not
    read: the service has callers of its own); None: the gateway's log line and sample."""


class CallsInFlight:
    """The calls a node's gateways are answering now, each by its task. A node that
    fail-stops (``refuse``) answers every call with its reason (``end_all``: STORAGE_FAILED,
    a relayed call TABLE_MOVED) rather than leave it to grpc, which cancels with no reason
    what still runs at the end of a stop's grace (UNAVAILABLE "Cancelling all calls"), and
    what it took but handed to no handler yet when the stop begins (CANCELLED). A call that
    comes after ``refuse`` is refused at once, but while ``end_all`` runs it waits to be
    answered with the others, so that a client waiting for its answer sends no new call into
    grpc's stop. A call waiting on a database thread holds no answer hostage."""

    def __init__(self) -> None:
        self._running: set[asyncio.Task[Any]] = set()
        self._held: set[asyncio.Task[Any]] = set()  # came while ``end_all`` runs: ``hold``
        self._ending: set[asyncio.Task[Any]] = set()  # cancelled by ``end_all``
        self._arrived = 0.0  # when the last call came (perf_counter)
        self.is_holding = False  # ``end_all`` runs: a new call waits for its end
        self.refusal: ServiceError | None = None  # set: every call is answered so

    def count(self) -> int:
        return len(self._running)

    def enter(self, start: float) -> asyncio.Task[Any]:
        """The calling task (the call came at ``start``), counted until ``leave``."""
        task = asyncio.current_task()
        assert task is not None
        self._running.add(task)
        self._arrived = start
        return task

    def leave(self, task: asyncio.Task[Any]) -> None:
        self._running.discard(task)
        self._held.discard(task)
        self._ending.discard(task)

    async def hold(self, task: asyncio.Task[Any]) -> None:
        """A call after ``refuse``: refused at once, or, while ``end_all`` runs, when it ends.

        :raises ServiceError: the refusal.
        """
        assert self.refusal is not None
        if not self.is_holding:
            raise self.refusal
        self._held.add(task)
        await asyncio.get_running_loop().create_future()  # until end_all cancels it

    def refuse(self, error: ServiceError) -> None:
        """Every call from now on is answered with ``error`` (by ``end_all``)."""
        self.refusal = error

    def ended(self, task: asyncio.Task[Any], relaying: bool) -> ServiceError | None:
        """What a call whose task was cancelled answers: ``end_all``'s reason for it, or
        None (the client or grpc cancelled it)."""
        if task not in self._ending or self.refusal is None:
            return None
        task.uncancel()
        return ServiceError.table_moved("this node stopped") if relaying else self.refusal

    async def end_all(self, within: float, lull: float) -> int:
        """Give the calls that came before ``refuse`` up to ``within`` seconds to end by
        themselves (a commit fails at once, a stream ends with the failure), and the clients
        that long to have sent their last call (none came for ``lull`` seconds); then end
        every call still running, each answering what ``ended`` says; returns how many."""
        self.is_holding = True
        deadline = time.perf_counter() + within
        while (now := time.perf_counter()) < deadline and (
                len(self._running) > len(self._held) or now - self._arrived < lull):
            await asyncio.sleep(min(lull / 2, deadline - now))
        self.is_holding = False
        ending = [task for task in self._running if not task.done()]
        self._ending.update(ending)
        for task in ending:
            task.cancel()
        return len(ending)


class _Collector:
    """Stands in for a server while generated code adds a service to it."""

    def __init__(self) -> None:
        self.services: dict[str, dict[str, Handler]] = {}

    def add_generic_rpc_handlers(self, handlers: object) -> None:
        return None  # the same handlers come by name below

    def add_registered_method_handlers(self, name: str,
                                       handlers: dict[str, Handler]) -> None:
        self.services[name] = dict(handlers)


def service_handlers(add_to_server: Callable[[S, Any], None], servicer: S
                     ) -> dict[str, dict[str, Handler]]:
    """A generated ``add_XServicer_to_server``'s method handlers, by service name."""
    collector = _Collector()
    add_to_server(servicer, collector)
    return collector.services


class Gateway:
    """Caller context, quotas, decoding, routing, errors, metrics per call; a log line per
    refused or failed call and per stream end (a call answered OK: at debug). It wraps each
    method's handler once, when the services are installed."""

    def __init__(self, metrics: Metrics, quotas: Quotas,
                 is_valid_token: Callable[[str], bool], trust: PeerTrust,
                 router: CallRouter = SERVE_HERE, forwarder: CallForwarder = SERVE_HERE,
                 implied: ImpliedTables = SERVE_HERE,
                 others: dict[str, Routing] | None = None,
                 calls: CallsInFlight | None = None) -> None:
        """``router``, ``forwarder`` and ``implied``: copas.v1's; ``others``: the other
        services served wholly, by full name (the admin service); ``calls``: the node's
        calls in flight, shared by its gateways."""
        self.metrics = metrics
        self.quotas = quotas
        self.is_valid_token = is_valid_token
        self.trust = trust
        self.router = router
        self.forwarder = forwarder
        self.implied = implied
        self.others = others or {}
        self.calls = calls if calls is not None else CallsInFlight()
        self._latency: dict[tuple[str, str], Callable[[float], None]] = {}
        self._refusals: dict[str, Callable[[], None]] = {}
        self._held: dict[str, int] = {}  # refusals held back (their penalty), by client
        self._held_in_all = 0

    def install(self, server: grpc.aio.Server,
                services: dict[str, dict[str, Handler]]) -> None:
        """Serve ``services`` on ``server``, every call through the gateway: copas.v1's and
        ``others`` wholly, the standard ones (health, reflection) under the same quotas."""
        for name, handlers in services.items():
            routing = Routing(self.router, self.forwarder, self.implied) \
                if name == TABLES_SERVICE else self.others.get(name)
            wrapped = {method: self._wrap(name, method, handler, routing)
                       if routing is not None else self._wrap_other(handler)
                       for method, handler in handlers.items()}
            server.add_generic_rpc_handlers(
                (grpc.method_handlers_generic_handler(name, wrapped),))
            server.add_registered_method_handlers(name, wrapped)

    def _client(self, context: Context) -> str:
        return self.trust.client_of(context.peer(), context.invocation_metadata() or ())

    async def _refuse(self, error: ServiceError, context: Context) -> None:
        """Answer a quota refusal (at once, or after its penalty, jittered)."""
        self._count_refusal(error.reason)
        await self._hold(error, context)
        await context.abort_with_status(error.to_status())

    async def _hold(self, error: ServiceError, context: Context) -> None:
        """A refusal's penalty (--quota-penalty, jittered), for every RESOURCE_EXHAUSTED over
        a quota (the accounts' too: TOO_MANY_ACCOUNTS, TOO_MANY_SIGN_INS): a client that asks
        again as soon as it is answered (a flood) is slowed to its calls at once over the
        penalty, and the server is spared their CPU (a call costs about 0.5 ms, served or
        refused). Bounded: at most ``HELD_PER_CLIENT`` refusals of one client and
        ``HELD_IN_ALL`` of everyone are held at once; beyond, a refusal is answered at once."""
        penalty = error.penalty or (self.quotas.penalty if error.is_quota else 0.0)
        if not penalty or self._held_in_all >= HELD_IN_ALL:
            return
        client = self._client(context)
        held = self._held.get(client, 0)
        if held >= HELD_PER_CLIENT:
            return
        self._held[client] = held + 1
        self._held_in_all += 1
        try:
            await asyncio.sleep(penalty * _spread())
        finally:
            self._held_in_all -= 1
            left = self._held[client] - 1
            if left:
                self._held[client] = left
            else:
                del self._held[client]

    def _count_refusal(self, reason: str) -> None:
        count = self._refusals.get(reason)
        if count is None:
            count = self._refusals[reason] = self.metrics.quota_refusals.labels(reason).inc
        count()

    def _wrap_other(self, handler: Handler) -> Handler:
        """Quotas for the standard services: calls per address, streams per address."""
        quotas = self.quotas

        if handler.unary_unary is not None:
            inner_unary = _async(handler.unary_unary)

            async def unary(request: Any, context: Context) -> Any:
                peer = self._client(context)
                try:
                    quotas.begin_call(peer)
                except ServiceError as error:
                    await self._refuse(error, context)
                try:
                    quotas.admit("", peer, None)
                except ServiceError as error:
                    quotas.end_call(peer)
                    await self._refuse(error, context)
                try:
                    return await inner_unary(request, context)
                finally:
                    quotas.end_call(peer)

            return grpc.unary_unary_rpc_method_handler(
                unary, request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer)
        streaming: Any = handler.unary_stream or handler.stream_stream  # async, generated or not
        if streaming is None:
            return handler
        is_unary_request = handler.unary_stream is not None

        async def admit(context: Context) -> str:
            peer = self._client(context)
            try:
                quotas.admit("", peer, None)
                quotas.open_stream(peer)
            except ServiceError as error:
                await self._refuse(error, context)
            return peer

        async def generated(request: Any, context: Context) -> AsyncIterator[Any]:
            peer = await admit(context)
            try:
                async for message in streaming(request, context):
                    yield message
            finally:
                quotas.close_stream(peer)

        async def written(request: Any, context: Context) -> Any:
            peer = await admit(context)  # a handler that writes with context.write()
            try:
                return await streaming(request, context)
            finally:
                quotas.close_stream(peer)

        make = (grpc.unary_stream_rpc_method_handler if is_unary_request
                else grpc.stream_stream_rpc_method_handler)
        return make(generated if inspect.isasyncgenfunction(streaming) else written,
                    request_deserializer=handler.request_deserializer,
                    response_serializer=_or_bytes(handler.response_serializer))

    def _enter(self, method: str, context: Context, in_flight: bool = False,
               reads_token: bool = True) -> Caller:
        """The caller, admitted by the quotas (``in_flight``: also counted among its
        address's calls in flight, first, until ``Quotas.end_call``; ``reads_token``: a
        player's token counts for its quotas)."""
        structlog.contextvars.clear_contextvars()
        structlog.contextvars.bind_contextvars(rpc=method)
        metadata = context.invocation_metadata() or ()
        peer = self.trust.client_of(context.peer(), metadata)
        if in_flight:
            self.quotas.begin_call(peer)
            try:
                return self._admitted(method, peer, metadata, reads_token)
            except BaseException:
                self.quotas.end_call(peer)
                raise
        return self._admitted(method, peer, metadata, reads_token)

    def _admitted(self, method: str, peer: str, metadata: Metadata,
                  reads_token: bool = True) -> Caller:
        try:
            token_hash = bearer_token_hash(metadata) if reads_token else None
        except ServiceError:
            self.quotas.admit(method, peer, None)  # a broken header still counts
            raise
        valid = token_hash if token_hash is not None and self.is_valid_token(token_hash) \
            else None
        self.quotas.admit(method, peer, valid)
        found = Caller(method, peer, token_hash,
                       has_access_token=token_hash is not None and bears_access_token(metadata))
        CALLER.set(found)
        return found

    def _finish(self, method: str, start: float, code: str, error: ServiceError | None,
                stream_messages: int | None = None) -> None:
        """The one outcome of every call: its metric sample, and its log line unless it
        was answered OK (debug) or refused by a quota (counted)."""
        if error is not None and error.is_quota:  # over a quota: counted, not logged
            self._count_refusal(error.reason)
            return
        elapsed = time.perf_counter() - start
        if stream_messages is None:
            sample = self._latency.get((method, code))
            if sample is None:
                sample = self._latency[method, code] = self.metrics.rpc_latency.labels(
                    method, code).observe
            sample(elapsed)
            if code == "OK":  # the common case: counted above, a line only at debug
                if log.is_enabled_for(logging.DEBUG):
                    log.debug("rpc", code=code, duration_ms=round(elapsed * 1000, 3))
                return
        else:
            self.metrics.stream_lifetime.labels(method, code).observe(elapsed)
        fields: dict[str, Any] = {"code": code, "duration_ms": round(elapsed * 1000, 3)}
        if stream_messages is not None:
            fields["messages"] = stream_messages
        if error is not None:
            fields["reason"] = error.reason  # not the message: it may name the caller's cards
        log.info("rpc", **fields)

    async def _fail(self, method: str, start: float, failure: Exception, context: Context,
                    stream_messages: int | None,
                    record: Callable[[str, ServiceError], None] | None = None) -> None:
        """A refusal or failure: its outcome (``record``: a service's own), then the status
        (this raises)."""
        error = failure if isinstance(failure, ServiceError) else ServiceError.unavailable(
            "the database cannot be reached right now; retry shortly", "STORAGE_FAILED") \
            if isinstance(failure, StoreUnreachable) else ServiceError.storage_failed()
        if record is None:
            self._finish(method, start, error.code.name, error, stream_messages)
        else:
            record(error.code.name, error)
        await self._hold(error, context)
        await context.abort_with_status(error.to_status())

    def _wrap(self, service: str, method: str, handler: Handler, routing: Routing) -> Handler:
        path = f"/{service}/{method}"
        decode = handler.request_deserializer
        finish = self._finish
        enter = self._enter
        router, forwarder, check = routing.router, routing.forwarder, routing.check
        if check is not None and handler.unary_unary is None:
            raise RuntimeError(f"{service}/{method}: a service with its own check has only "
                               "unary methods (a stream would pass unchecked)")

        def parse(raw: bytes) -> Any:
            try:
                return decode(raw) if decode is not None else raw
            except (DecodeError, ValueError, TypeError):
                raise ServiceError.invalid(f"the request is not a valid {method} request "
                                           "message", "MALFORMED_REQUEST") from None

        implied = routing.implied

        async def destination(found: Caller, request: Any, context: Context
                              ) -> tuple[str | None, str]:
            """Where the call is served (None: here) and the table it is for, the table's
            owner told to the client; a call that names none may mean one (a quick match, a
            retry) unless another node relayed it."""
            relayed = trust.is_relayed(context.invocation_metadata() or ())
            table_id: str = getattr(request, "table_id", "")
            if not table_id and not relayed:
                table_id = await implied.implied_table(method, request)
            return await with_owner(await router.route(method, table_id, found.token_hash, relayed),
                              context), table_id

        quotas, trust, calls = self.quotas, self.trust, self.calls
        if handler.unary_unary is not None:
            inner_unary = _async(handler.unary_unary)

            async def unary(raw: bytes, context: Context) -> Any:
                """Counted among its address's calls in flight from before its request is
                decoded until it is answered."""
                start = time.perf_counter()
                try:
                    found = enter(method, context, in_flight=True, reads_token=check is None)
                except (ServiceError, StorageError) as failure:
                    await self._fail(method, start, failure, context, None)
                    raise  # abort_with_status raises; this is never reached
                task = calls.enter(start)
                try:
                    return await served(found, raw, context, start, task)
                finally:
                    calls.leave(task)
                    quotas.end_call(found.peer)

            async def served(found: Caller, raw: bytes, context: Context, start: float,
                             task: asyncio.Task[Any]) -> Any:
                request: Any = None

                def record(code: str, error: ServiceError | None) -> None:
                    if check is None:
                        finish(method, start, code, error)
                    else:
                        check.ended(method, request, found.who, context, code, error)

                try:
                    if calls.refusal is not None:
                        await calls.hold(task)
                    request = parse(raw)
                    if check is not None:
                        found.who = check.check(method, context)
                    address, table_id = await destination(found, request, context)
                    if address is None:
                        response = await inner_unary(request, context)
                except (ServiceError, StorageError) as failure:
                    await self._fail(method, start, failure, context, None, record)
                    raise  # abort_with_status raises; this is never reached
                except asyncio.CancelledError:
                    if (ended := calls.ended(task, False)) is None:
                        raise
                    await self._fail(method, start, ended, context, None, record)
                    raise
                except Exception:
                    code = _code_name(context, "")
                    if code:  # the call was aborted or cancelled already
                        record(code, None)
                        raise
                    log.exception("rpc_failed")
                    record("INTERNAL", None)
                    await context.abort(grpc.StatusCode.INTERNAL, "internal error")
                    raise
                if address is not None:  # another node owns the table: relay the call there
                    try:
                        response = await forwarder.unary(
                            address, table_id, path, raw, context,
                            found.peer if check is None else found.who)
                    except ServiceError as error:  # the owner's refusal, as a forwarder read it
                        await self._fail(method, start, error, context, None, record)
                        raise
                    except asyncio.CancelledError:
                        if (ended := calls.ended(task, True)) is None:
                            record(_code_name(context, "UNAVAILABLE"), None)
                            raise
                        await self._fail(method, start, ended, context, None, record)
                        raise
                    except BaseException:  # the owner's refusal, relayed: counted here too
                        record(_code_name(context, "UNAVAILABLE"), None)
                        raise
                record("OK", None)
                return response

            return grpc.unary_unary_rpc_method_handler(
                unary, request_deserializer=None,
                response_serializer=_or_bytes(handler.response_serializer))

        if handler.unary_stream is not None:
            inner_stream = _async(handler.unary_stream)

            async def stream(raw: bytes, context: Context) -> None:
                """The servicer writes its messages itself (``context.write``): no
                generator stands between it and gRPC."""
                start = time.perf_counter()
                found: Caller | None = None
                opened, relaying = "", False
                has_token = True
                task = calls.enter(start)
                try:
                    found = enter(method, context)
                    if calls.refusal is not None:
                        await calls.hold(task)
                    request = parse(raw)
                    has_token = found.token_hash is not None  # else a spectator's WatchTable
                    quotas.open_stream(found.peer, method, has_token=has_token)
                    opened = found.peer
                    address, _ = await destination(found, request, context)
                    if address is None:
                        await inner_stream(request, context)
                    else:  # another node owns the table: relay it
                        relaying = True
                        found.sent += await forwarder.stream(
                            address, request.table_id, path, raw, context, found.peer)
                except (ServiceError, StorageError) as failure:
                    await self._fail(method, start, failure, context,
                                     found.sent if found else 0)
                    raise
                except asyncio.CancelledError:
                    if (ended := calls.ended(task, relaying)) is None:
                        finish(method, start, _code_name(context, "CANCELLED"), None,
                               found.sent if found else 0)
                        raise
                    await self._fail(method, start, ended, context, found.sent if found else 0)
                    raise
                except BaseException:
                    finish(method, start, _code_name(context, "CANCELLED"), None,
                           found.sent if found else 0)
                    raise
                finally:
                    calls.leave(task)
                    if opened:
                        quotas.close_stream(opened, method, has_token=has_token)
                finish(method, start, "OK", None, found.sent)

            return grpc.unary_stream_rpc_method_handler(
                stream, request_deserializer=None,
                response_serializer=_or_bytes(handler.response_serializer))
        if handler.stream_stream is not None:
            inner_bidi = _async_bidi(handler.stream_stream)

            async def bidi(requests: AsyncIterator[bytes], context: Context) -> None:
                """A stream of requests: the first one routes the call (its ``open``
                names the table); each is decoded here, like a unary request."""
                start = time.perf_counter()
                found: Caller | None = None
                opened, relaying = "", False
                task = calls.enter(start)
                try:
                    found = enter(method, context)
                    if calls.refusal is not None:
                        await calls.hold(task)
                    quotas.open_stream(found.peer, method)
                    opened = found.peer
                    first_raw = await _opening(quotas, requests, method)
                    first = parse(first_raw) if first_raw is not None else None
                    address = None
                    if first is not None:
                        address = await with_owner(await router.route(
                            method, _opened_table(first), found.token_hash,
                            trust.is_relayed(context.invocation_metadata() or ())), context)
                    if address is None:
                        call = inner_bidi(StreamRequests(first, requests, parse), context)
                        first = first_raw = None  # the handler holds them while it needs them
                        await call
                    else:  # another node owns the table: relay the whole stream there
                        assert first_raw is not None
                        relaying = True
                        found.sent += await forwarder.bidi(
                            address, _opened_table(first), path, first_raw, requests,
                            context, found.peer)
                except (ServiceError, StorageError) as failure:
                    await self._fail(method, start, failure, context,
                                     found.sent if found else 0)
                    raise
                except asyncio.CancelledError:
                    if (ended := calls.ended(task, relaying)) is None:
                        finish(method, start, _code_name(context, "CANCELLED"), None,
                               found.sent if found else 0)
                        raise
                    await self._fail(method, start, ended, context, found.sent if found else 0)
                    raise
                except BaseException:
                    finish(method, start, _code_name(context, "CANCELLED"), None,
                           found.sent if found else 0)
                    raise
                finally:
                    calls.leave(task)
                    if opened:
                        quotas.close_stream(opened, method)
                finish(method, start, "OK", None, found.sent)

            return grpc.stream_stream_rpc_method_handler(
                bidi, request_deserializer=None,
                response_serializer=_or_bytes(handler.response_serializer))
        return handler


async def with_owner(destination: Destination, context: Context) -> str | None:
    """Tell the client the table's owner (initial metadata, before any answer), when the
    router names one; returns where the call goes (None: here)."""
    if destination.owner:
        await context.send_initial_metadata(((OWNER, destination.owner),))
    return destination.relay_to


async def _opening(quotas: Quotas, requests: AsyncIterator[bytes], method: str
                   ) -> bytes | None:
    """A stream's first message (None: the client sent none), within
    ``--stream-open-timeout`` (then INVALID_ARGUMENT INVALID_PLAY_STREAM), counted among the
    streams waiting for theirs (``--max-streams-opening``) meanwhile."""
    quotas.begin_opening()
    timeout = quotas.stream_open_timeout
    try:
        return await asyncio.wait_for(anext(aiter(requests), None), timeout or None)
    except TimeoutError:
        raise ServiceError.invalid(f"a {method} stream sends its opening message within "
                                   f"{timeout:g} s", "INVALID_PLAY_STREAM") from None
    finally:
        quotas.end_opening()


def _opened_table(first: Any) -> str:
    """The table a stream's first request opens (Play: ``open.table_id``)."""
    opening = getattr(first, "open", None)
    table_id: str = getattr(opening, "table_id", "") if opening is not None else ""
    return table_id


@dataclass(slots=True)
class StreamRequests:
    """What a bidirectional method gets: its first request (read by the gateway to route
    it; None when the client sent none), the rest as they come (bytes), and how to read one
    (bytes that are not the message: INVALID_ARGUMENT MALFORMED_REQUEST)."""

    first: Any
    rest: AsyncIterator[bytes]
    parse: Callable[[bytes], Any]


def _async_bidi(behaviour: Any) -> Callable[[StreamRequests, Context], Awaitable[Any]]:
    run: Callable[[StreamRequests, Context], Awaitable[Any]] = behaviour
    return run


def _async(behaviour: Any) -> Callable[[Any, Context], Awaitable[Any]]:
    """A method's behaviour as grpc.aio calls it: a coroutine function of the request and the
    context (the stubs of ``RpcMethodHandler`` know only synchronous servers)."""
    run: Callable[[Any, Context], Awaitable[Any]] = behaviour
    return run


def _or_bytes(serialize: Callable[[Any], bytes] | None) -> Callable[[Any], bytes]:
    """A response serializer that passes on what was serialized ahead (WatchTable's
    fan-out, stored game records)."""
    def serialize_or_pass(message: Any) -> bytes:
        if isinstance(message, bytes):
            return message
        data: bytes = serialize(message) if serialize is not None else message
        return data
    return serialize_or_pass


def _spread() -> float:
    """0.5..1.5: penalties end at different moments, so a flood's refused calls are
    answered a few at a time instead of all at once."""
    return 0.5 + random.random()


def _code_name(context: Context, default: str) -> str:
    try:
        code = context.code()
    except Exception:
        return default
    if isinstance(code, grpc.StatusCode):
        return code.name
    return default

"""The gateway every copas.v1 call passes first (a grpc.aio server interceptor).

For each call it: reads the caller (peer address, player token from ``authorization:
Bearer``) into a context variable, so servicer methods never parse metadata; applies the
per-client quotas before the request is even decoded; decodes the request itself (bytes
that are not the method's message get INVALID_ARGUMENT, not UNKNOWN); turns a
``ServiceError`` into its status with details; and writes one log line and one latency
sample per call (streams: their lifetime, in a metric of their own).

A call relayed by the server's own web bridge (``server.web``) names the browser's address in
``x-forwarded-for``; the gateway believes it only from a loopback peer that also presents the
process's forwarding key, so quotas apply per browser and no other client can pick an address.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import hmac
import inspect
import ipaddress
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import grpc
import structlog
from google.protobuf.message import DecodeError

from server.cluster import Forward
from server.errors import ServiceError
from server.observability import Metrics
from server.quotas import Quotas
from server.storage import StorageFailed

if TYPE_CHECKING:
    from server.cluster import Cluster

log = structlog.get_logger("copas.rpc")


@dataclass(slots=True)
class Caller:
    method: str
    peer: str  # the client's address without its port
    token_hash: str | None  # SHA-256 of the bearer token, when one was sent
    sent: int = 0  # messages a stream wrote (the servicer counts them)


CALLER: contextvars.ContextVar[Caller] = contextvars.ContextVar("copas_caller")


def caller() -> Caller:
    return CALLER.get()


def raw_address(peer: str) -> str:
    """'ipv4:1.2.3.4:5678' -> '1.2.3.4'; 'ipv6:[2001:db8::1]:5678' -> '2001:db8::1'."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv6" and rest.startswith("["):
        return rest[1:rest.find("]")].split("%", 1)[0]
    if kind == "ipv4":
        return rest.rsplit(":", 1)[0]
    return peer or "unknown"


def client_key(address: str) -> str:
    """Who a client is for the quotas: its IPv4 address, or its IPv6 /64 network (one host
    may hold all of its addresses); loopback and IPv4-mapped addresses as IPv4."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        if not ip.is_loopback:
            return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


def peer_address(peer: str) -> str:
    """The quota key of a gRPC peer string (see ``client_key``)."""
    return client_key(raw_address(peer))


CLUSTER_KEY = "x-copas-cluster-key"  # server.cluster's: a node vouching for the client
FORWARDED_FOR = "x-forwarded-for"
FORWARDING_KEY = "x-copas-forwarding-key"
Networks = tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]


def trusted_networks(text: str) -> Networks:
    """``--trusted-proxies``: comma-separated addresses or networks (CIDR)."""
    return tuple(ipaddress.ip_network(part.strip(), strict=False)
                 for part in text.split(",") if part.strip())


def _is_in(address: str, networks: Networks) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in networks)


_DIRECT: dict[tuple[str, bool, Networks], tuple[str, bool]] = {}  # peer -> (key, is relay)


def _direct(peer: str, key: str | None, proxies: Networks) -> tuple[str, bool]:
    """A peer's own quota key, and whether it is a relay to listen to (cached: a client's
    calls share its connection, and so its peer string)."""
    cache_key = (peer, key is not None, proxies)
    known = _DIRECT.get(cache_key)
    if known is None:
        address = raw_address(peer)
        is_relay = (key is not None and _is_loopback(address)) or _is_in(address, proxies)
        known = (client_key(address), is_relay)
        if len(_DIRECT) >= 65_536:
            _DIRECT.clear()
        _DIRECT[cache_key] = known
    return known


def forwarded_peer(context: grpc.aio.ServicerContext[Any, Any], key: str | None,
                   proxies: Networks = (), cluster_key: str = "") -> str:
    """The quota key of the client a call comes from. A relay is believed about whom it
    forwards for (``x-forwarded-for``) when it is the web bridge (a loopback peer presenting
    ``key``) or a proxy in ``proxies`` (``--trusted-proxies``); otherwise the peer counts."""
    own, is_relay = _direct(context.peer(), key, proxies)
    if cluster_key:  # another node of the cluster, forwarding a client's call
        for name, value in context.invocation_metadata() or ():
            if name == CLUSTER_KEY and isinstance(value, str) \
                    and hmac.compare_digest(value.encode(), cluster_key.encode()):
                return _first_forwarded(context) or own
    if not is_relay:
        return own
    peer = raw_address(context.peer())
    is_bridge = key is not None and _is_loopback(peer)
    found: dict[str, str] = {}
    for name, value in context.invocation_metadata() or ():
        if name in (FORWARDED_FOR, FORWARDING_KEY) and isinstance(value, str):
            found[name] = value
    if is_bridge and not _is_in(peer, proxies):
        presented = found.get(FORWARDING_KEY, "")
        if not hmac.compare_digest(presented.encode(), (key or "").encode()):
            return client_key(peer)
    # The nearest address that is not itself a trusted proxy (later entries were added by
    # nearer proxies; earlier ones a client could write itself).
    for hop in reversed([h.strip() for h in found.get(FORWARDED_FOR, "").split(",")]):
        try:
            ipaddress.ip_address(hop)
        except ValueError:
            return client_key(peer)
        if not _is_in(hop, proxies):
            return client_key(hop)
    return client_key(peer)


def _first_forwarded(context: grpc.aio.ServicerContext[Any, Any]) -> str | None:
    for name, value in context.invocation_metadata() or ():
        if name == FORWARDED_FOR and isinstance(value, str):
            return value.strip() or None
    return None


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def bearer_token_hash(context: grpc.aio.ServicerContext[Any, Any]) -> str | None:
    for key, value in context.invocation_metadata() or ():
        if key == "authorization":
            text = value.decode(errors="replace") if isinstance(value, bytes) else value
            scheme, _, token = text.partition(" ")
            token = token.strip()
            if scheme.lower() != "bearer" or not token or len(token) > 256:
                raise ServiceError.unauthenticated(
                    "authorization metadata must be 'Bearer <token>'")
            return hashlib.sha256(token.encode()).hexdigest()
    return None


def _unavailable_for(error: StorageFailed) -> ServiceError:
    return ServiceError.unavailable(
        "the server's store failed; it is restarting from its log, retry shortly",
        "STORAGE_FAILED")


class GatewayInterceptor(grpc.aio.ServerInterceptor):
    """Caller context, quotas, decoding, errors, metrics per call; a log line per refused or
    failed call and per stream end (a call answered OK: at debug)."""

    def __init__(self, metrics: Metrics, quotas: Quotas,
                 is_valid_token: Callable[[str], bool], forwarding_key: str | None = None,
                 proxies: Networks = ()) -> None:
        self.metrics = metrics
        self.quotas = quotas
        self.is_valid_token = is_valid_token
        self.forwarding_key = forwarding_key  # the web bridge's; None: trust no relay
        self.proxies = proxies  # --trusted-proxies
        self.cluster: Cluster | None = None  # set when nodes share a PostgreSQL
        self._handlers: dict[str, grpc.RpcMethodHandler] = {}
        self._latency: dict[tuple[str, str], Callable[[float], None]] = {}

    async def intercept_service(
            self, continuation: Callable[[grpc.HandlerCallDetails],
                                         Awaitable[grpc.RpcMethodHandler]],
            details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        path: str = details.method  # type: ignore[attr-defined]
        wrapped = self._handlers.get(path)
        if wrapped is not None:
            return wrapped
        handler = await continuation(details)
        if handler is None:
            return handler
        if path.startswith("/copas.v1."):
            wrapped = self._wrap(path.rsplit("/", 1)[-1], handler)
        else:  # health, reflection: counted in the same quotas, nothing else
            wrapped = self._wrap_other(handler)
        self._handlers[path] = wrapped
        return wrapped

    def _wrap_other(self, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        """Quotas for the standard services: calls per address, streams per address."""
        quotas = self.quotas

        async def refuse(error: ServiceError, context: grpc.aio.ServicerContext[Any, Any]
                         ) -> None:
            self.metrics.quota_refusals.labels(error.reason).inc()
            await asyncio.sleep(error.penalty * _spread())
            await context.abort_with_status(error.to_status())

        if handler.unary_unary is not None:
            inner_unary = handler.unary_unary

            async def unary(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
                try:
                    quotas.admit("", forwarded_peer(context, self.forwarding_key,
                                                    self.proxies), None)
                except ServiceError as error:
                    await refuse(error, context)
                return await inner_unary(request, context)

            return grpc.unary_unary_rpc_method_handler(
                unary, request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer)
        streaming = handler.unary_stream or handler.stream_stream
        if streaming is None:
            return handler
        is_unary_request = handler.unary_stream is not None

        async def admit(context: grpc.aio.ServicerContext[Any, Any]) -> str:
            peer = forwarded_peer(context, self.forwarding_key, self.proxies)
            try:
                quotas.admit("", peer, None)
                quotas.open_stream(peer)
            except ServiceError as error:
                await refuse(error, context)
            return peer

        async def generated(request: Any, context: grpc.aio.ServicerContext[Any, Any]
                            ) -> AsyncIterator[Any]:
            peer = await admit(context)
            try:
                async for message in streaming(request, context):
                    yield message
            finally:
                quotas.close_stream(peer)

        async def written(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            peer = await admit(context)  # a handler that writes with context.write()
            try:
                return await streaming(request, context)
            finally:
                quotas.close_stream(peer)

        make = (grpc.unary_stream_rpc_method_handler if is_unary_request
                else grpc.stream_stream_rpc_method_handler)
        return make(generated if inspect.isasyncgenfunction(streaming) else written,
                    request_deserializer=handler.request_deserializer,
                    response_serializer=handler.response_serializer)

    def _enter(self, method: str, context: grpc.aio.ServicerContext[Any, Any]) -> Caller:
        structlog.contextvars.clear_contextvars()
        structlog.contextvars.bind_contextvars(rpc=method)
        peer = forwarded_peer(context, self.forwarding_key, self.proxies,
                              self.cluster.key if self.cluster is not None else "")
        try:
            token_hash = bearer_token_hash(context)
        except ServiceError:
            self.quotas.admit(method, peer, None)  # a broken header still counts
            raise
        valid = token_hash if token_hash is not None and self.is_valid_token(token_hash) \
            else None
        self.quotas.admit(method, peer, valid)
        found = Caller(method, peer, token_hash)
        CALLER.set(found)
        return found

    def _finish(self, method: str, start: float, code: str, error: ServiceError | None,
                stream_messages: int | None = None) -> None:
        if error is not None and error.penalty:  # over a quota: counted, not logged
            self.metrics.quota_refusals.labels(error.reason).inc()
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

    def _wrap(self, method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        path = f"/copas.v1.CopasService/{method}"
        decode = handler.request_deserializer
        finish = self._finish
        enter = self._enter

        def parse(raw: bytes) -> Any:
            try:
                return decode(raw) if decode is not None else raw
            except (DecodeError, ValueError, TypeError):
                raise ServiceError.invalid(f"the request is not a valid {method} request "
                                           "message", "MALFORMED_REQUEST") from None

        if handler.unary_unary is not None:
            inner_unary = handler.unary_unary

            async def unary(raw: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
                start = time.perf_counter()
                found: Caller | None = None
                try:
                    found = enter(method, context)
                    response = await inner_unary(parse(raw), context)
                except Forward as hop:  # another node owns the table: relay the call there
                    assert self.cluster is not None and found is not None
                    try:
                        response = await self.cluster.forward_unary(hop, path, raw, context,
                                                                    found.peer)
                    except BaseException:  # the owner's refusal, relayed: counted here too
                        finish(method, start, _code_name(context, "UNAVAILABLE"), None)
                        raise
                except ServiceError as error:
                    finish(method, start, error.code.name, error)
                    if error.penalty:
                        await asyncio.sleep(error.penalty * _spread())
                    await context.abort_with_status(error.to_status())
                    raise  # abort_with_status raises; this is never reached
                except StorageFailed as failure:
                    error = _unavailable_for(failure)
                    finish(method, start, error.code.name, error)
                    await context.abort_with_status(error.to_status())
                    raise
                except Exception:
                    code = _code_name(context, "")
                    if code:  # the call was aborted or cancelled already
                        finish(method, start, code, None)
                        raise
                    log.exception("rpc_failed")
                    finish(method, start, "INTERNAL", None)
                    await context.abort(grpc.StatusCode.INTERNAL, "internal error")
                    raise
                finish(method, start, "OK", None)
                return response

            return grpc.unary_unary_rpc_method_handler(
                unary, request_deserializer=None,
                response_serializer=_or_bytes(handler.response_serializer))

        if handler.unary_stream is not None:
            inner_stream = handler.unary_stream
            quotas = self.quotas

            async def stream(raw: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> None:
                """The servicer writes its messages itself (``context.write``): no
                generator stands between it and gRPC."""
                start = time.perf_counter()
                found: Caller | None = None
                opened = ""
                try:
                    found = enter(method, context)
                    request = parse(raw)
                    quotas.open_stream(found.peer)
                    opened = found.peer
                    try:
                        await inner_stream(request, context)
                    except Forward as hop:  # another node owns the table: relay it
                        assert self.cluster is not None
                        found.sent += await self.cluster.forward_stream(
                            hop, path, raw, context, found.peer)
                except ServiceError as error:
                    finish(method, start, error.code.name, error, found.sent if found else 0)
                    if error.penalty:
                        await asyncio.sleep(error.penalty * _spread())
                    await context.abort_with_status(error.to_status())
                    raise
                except StorageFailed as failure:
                    error = _unavailable_for(failure)
                    finish(method, start, error.code.name, error, found.sent if found else 0)
                    await context.abort_with_status(error.to_status())
                    raise
                except BaseException:
                    finish(method, start, _code_name(context, "CANCELLED"), None,
                           found.sent if found else 0)
                    raise
                finally:
                    if opened:
                        quotas.close_stream(opened)
                finish(method, start, "OK", None, found.sent)

            return grpc.unary_stream_rpc_method_handler(
                stream, request_deserializer=None,
                response_serializer=_or_bytes(handler.response_serializer))
        return handler


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


def _code_name(context: grpc.aio.ServicerContext[Any, Any], default: str) -> str:
    try:
        code = context.code()
    except Exception:
        return default
    if isinstance(code, grpc.StatusCode):
        return code.name
    return default

"""The web port's connections and their bounds, as nginx sets them (client_header_timeout,
client_body_timeout, send_timeout, limit_conn): uvicorn's HTTP/1.1 protocol with deadlines and
the books of every open connection, counted at accept (before TLS).

- A connection is counted when it is accepted. With TLS, a refused one is closed before any
  TLS state is made, an admitted one makes it when its ClientHello comes, and it has
  ``header_timeout`` seconds for its handshake (asyncio's own 60 s, at accept, held each
  silent connection's 256 KiB buffer that long, counted nowhere).
- A connection has ``header_timeout`` seconds for a request's headers (from its opening, or
  from the end of the previous response), then ``body_timeout`` for the request's body; a
  deadline missed closes it (with a 408 when a request was begun). An idle keep-alive
  connection is closed sooner, by uvicorn's own keep-alive timeout.
- A connection whose output has not drained for ``write_timeout`` seconds (a reader that
  stopped reading) is aborted, its unsent output dropped.
- One address (an IPv6 client by its /64, as the quotas count) holds at most
  ``max_per_address`` connections, and at most ``max_streams_per_address`` of them answer a
  streaming call; a trusted proxy (``--trusted-proxies``), many browsers on one address, is
  exempt: it must bound its own clients.
- At ``max_connections``, a new connection takes the place of the oldest one still waiting
  for a request's headers (a half-sent request, an idle keep-alive, a TLS handshake), else of
  the oldest stream of the address holding the most streams, when that is more than the
  newcomer's address holds; so neither half-open connections nor streams that never read,
  from many addresses, can lock an honest browser out. Only then is a new one refused (503).

Every connection closed or refused for a bound is counted by its reason.
"""

from __future__ import annotations

import asyncio
import enum
import ipaddress
import math
import ssl
from asyncio.sslproto import SSLProtocol
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import ClassVar

from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle

from server.rpc.peers import Networks, client_key

# Why a connection was closed or refused (the metric's reason label).
HEADER_TIMEOUT, BODY_TIMEOUT = "header_timeout", "body_timeout"
HANDSHAKE_TIMEOUT, WRITE_TIMEOUT = "handshake_timeout", "write_timeout"
PER_ADDRESS, EVICTED, FULL = "per_address", "evicted", "full"
STREAMS_PER_ADDRESS, STREAM_EVICTED = "streams_per_address", "stream_evicted"
REASONS = (HEADER_TIMEOUT, BODY_TIMEOUT, HANDSHAKE_TIMEOUT, WRITE_TIMEOUT, PER_ADDRESS, EVICTED,
           FULL, STREAMS_PER_ADDRESS, STREAM_EVICTED)
_LINGER = 1.0  # seconds a refused connection is kept to read its 503 before it is closed


def _answer(status: str, text: str, *extra: str) -> bytes:
    body = text.encode()
    head = [f"HTTP/1.1 {status}", "content-type: text/plain; charset=utf-8",
            f"content-length: {len(body)}", "connection: close", *extra]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


_REFUSED = {
    PER_ADDRESS: _answer("503 Service Unavailable", "too many connections from your address\n",
                         "retry-after: 1"),
    FULL: _answer("503 Service Unavailable", "too many connections\n", "retry-after: 1"),
    STREAMS_PER_ADDRESS: _answer("503 Service Unavailable",
                                 "too many streams from your address\n", "retry-after: 1"),
}
_TIMED_OUT = _answer("408 Request Timeout", "request not received in time\n")


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """The web port's bounds (``Config`` has the flags' help)."""

    max_connections: int = 1024
    """Connections open at once (at least 1)."""
    max_per_address: int = 64
    """Connections one address may hold (0: no limit); trusted proxies are exempt."""
    max_streams_per_address: int = 16
    """Connections of one address answering a streaming call (0: no limit); trusted proxies
    are exempt."""
    header_timeout: float = 10.0
    """Seconds a connection has for its TLS handshake, and for a request's headers."""
    body_timeout: float = 30.0
    """Seconds a request has for its body, once its headers are in."""
    write_timeout: float = 30.0
    """Seconds a connection's output may go undrained before it is aborted (0: never)."""
    exempt: Networks = ()
    """Addresses without a per-address limit: the trusted proxies in front."""


class Stage(enum.Enum):
    """Where a connection stands in reading its request."""

    HANDSHAKE = "handshake"  # accepted, its TLS handshake under way
    HEADERS = "headers"  # waiting for a request's headers (a new or a kept-alive connection)
    BODY = "body"  # headers in, the body still coming
    BUSY = "busy"  # the request read: the application answers it (or streams)


class WebConnections:
    """The books of the web port's open connections: how many each address holds, which
    wait for a request's headers (oldest first), and which answer streaming calls."""

    def __init__(self, limits: ConnectionLimits, closed: Callable[[str], None],
                 stream_paths: Iterable[str] = ()) -> None:
        self.limits = limits
        self.closed = closed  # counts a connection closed or refused, by reason
        self.stream_paths = frozenset(stream_paths)  # a request for one of these is a stream
        self._open: set[BoundedH11Protocol] = set()
        self._per_address: dict[str, int] = {}
        self._waiting: OrderedDict[BoundedH11Protocol, None] = OrderedDict()
        self._streams: dict[str, OrderedDict[BoundedH11Protocol, None]] = {}  # oldest first
        self._exempt: dict[str, bool] = {}

    def open(self) -> int:
        return len(self._open)

    def waiting(self) -> int:
        """Open connections waiting for a request's headers (or their TLS handshake)."""
        return len(self._waiting)

    def streams(self) -> int:
        """Open connections answering a streaming call."""
        return sum(len(streams) for streams in self._streams.values())

    def held_by(self, address: str) -> int:
        return self._per_address.get(address, 0)

    def admit(self, connection: BoundedH11Protocol) -> str | None:
        """Count a new connection in, making room when the port is full; the reason it is
        refused, or None."""
        address = connection.address
        if self.limits.max_per_address and not self._is_exempt(address) \
                and self._per_address.get(address, 0) >= self.limits.max_per_address:
            return PER_ADDRESS
        if len(self._open) >= max(self.limits.max_connections, 1):
            if self._waiting:
                next(iter(self._waiting)).close_for(EVICTED)
            else:
                victim = self._heaviest_stream(len(self._streams.get(address, ())))
                if victim is None:
                    return FULL
                victim.close_for(STREAM_EVICTED, is_abort=True)
        self._open.add(connection)
        self._per_address[address] = self._per_address.get(address, 0) + 1
        return None

    def begin_stream(self, connection: BoundedH11Protocol) -> str | None:
        """A connection's request is for a streaming call: count it among its address's
        streams; the reason it is refused, or None."""
        address = connection.address
        streams = self._streams.get(address)
        cap = self.limits.max_streams_per_address
        if cap and streams is not None and len(streams) >= cap \
                and not self._is_exempt(address):
            return STREAMS_PER_ADDRESS
        if connection in self._open:
            self._streams.setdefault(address, OrderedDict())[connection] = None
        return None

    def end_stream(self, connection: BoundedH11Protocol) -> None:
        """A connection no longer answers a streaming call (again is a no-op)."""
        streams = self._streams.get(connection.address)
        if streams is not None and connection in streams:
            del streams[connection]
            if not streams:
                del self._streams[connection.address]

    def release(self, connection: BoundedH11Protocol) -> None:
        """Count a connection out (closed, or about to be); again is a no-op."""
        if connection not in self._open:
            return
        self._open.discard(connection)
        self._waiting.pop(connection, None)
        self.end_stream(connection)
        left = self._per_address[connection.address] - 1
        if left:
            self._per_address[connection.address] = left
        else:
            del self._per_address[connection.address]

    def set_waiting(self, connection: BoundedH11Protocol, is_waiting: bool) -> None:
        """A connection began (True) or ended (False) waiting for a request's headers."""
        if not is_waiting:
            self._waiting.pop(connection, None)
        elif connection in self._open:
            self._waiting[connection] = None
            self._waiting.move_to_end(connection)

    def close_all(self) -> None:
        """Abort every connection still open (the server has stopped: a TLS handshake, a
        refused connection reading its 503)."""
        for connection in list(self._open):
            connection.close_for("", is_abort=True)

    def _heaviest_stream(self, newcomer_holds: int) -> BoundedH11Protocol | None:
        """The oldest stream of the address holding the most streams (the first such address
        to have opened one), when that is more than ``newcomer_holds``."""
        heaviest = max(self._streams.values(), key=len, default=None)
        if heaviest is None or len(heaviest) <= newcomer_holds:
            return None
        return next(iter(heaviest))

    def _is_exempt(self, address: str) -> bool:
        known = self._exempt.get(address)
        if known is None:
            try:
                ip = ipaddress.ip_address(address)
            except ValueError:
                known = False
            else:
                known = any(ip in network for network in self.limits.exempt)
            if len(self._exempt) >= 65_536:
                self._exempt.clear()
            self._exempt[address] = known
        return known


class _TlsProtocol(SSLProtocol):
    """asyncio's TLS with a read buffer of 32 KiB (asyncio's is 256 KiB, allocated for each
    connection: 1,024 handshakes under way would hold 268 MB)."""

    max_size = 32 * 1024


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, counted in ``books`` from its accept and held to its deadlines;
    with ``tls``, it is the plain TCP connection's protocol until admitted, then starts TLS
    itself (one subclass per web server, made by ``protocol_for``)."""

    books: ClassVar[WebConnections]
    tls: ClassVar[ssl.SSLContext | None] = None

    address = ""
    stage = Stage.HANDSHAKE
    _accepted: asyncio.Transport | None = None  # the TCP connection (below TLS, if any)
    _is_http = False  # uvicorn's protocol has its connection (after TLS, if any)
    _deadline: asyncio.TimerHandle | None = None
    _write_deadline: asyncio.TimerHandle | None = None
    _has_begun = False  # bytes of a request received while waiting for its headers
    _is_refused = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if self._accepted is not None:  # the TLS handshake is done: HTTP begins
            self._begin_http(transport)
            return
        self._accepted = transport
        peer = transport.get_extra_info("peername")
        self.address = client_key(peer[0]) if isinstance(peer, tuple) and peer else "unknown"
        refusal = self.books.admit(self)
        if refusal is not None:
            self._refuse(transport, refusal)
        elif self.tls is None:
            self._begin_http(transport)
        else:  # TLS state is made when the client begins its handshake
            self._enter(Stage.HANDSHAKE)

    def data_received(self, data: bytes) -> None:
        if self._is_refused:
            return
        if not self._is_http:
            self._start_tls(data)
            return
        if self.stage is Stage.HEADERS:
            self._has_begun = True
        cycle = self.cycle
        super().data_received(data)
        self._after_events(cycle)

    def on_response_complete(self) -> None:
        cycle = self.cycle
        super().on_response_complete()
        if self.transport.is_closing():
            return
        if self.cycle is cycle:  # no pipelined request began: wait for the next one
            self._has_begun = False
            self._enter(Stage.HEADERS)
        else:
            self._after_events(cycle)

    def pause_writing(self) -> None:
        super().pause_writing()
        timeout = self.books.limits.write_timeout
        if self._write_deadline is None and timeout > 0:
            self._write_deadline = self.loop.call_later(timeout, self._missed_write)

    def resume_writing(self) -> None:
        super().resume_writing()
        self._cancel_write_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_deadline()
        self._cancel_write_deadline()
        self.books.release(self)
        if self._is_http:
            super().connection_lost(exc)

    def close_for(self, reason: str, *, is_abort: bool = False) -> None:
        """Close this connection for a bound (counted by ``reason``, unless ""); ``is_abort``:
        at once, its unsent output dropped (a reader that does not read)."""
        self._cancel_deadline()
        self._cancel_write_deadline()
        self.books.release(self)
        transport = self.transport if self._is_http else self._accepted
        if transport is not None and not transport.is_closing():
            if reason:
                self.books.closed(reason)
            if is_abort:
                transport.abort()
            else:
                transport.close()

    def _begin_http(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)
        self._is_http = True
        self._enter(Stage.HEADERS)

    def _refuse(self, transport: asyncio.Transport, reason: str) -> None:
        """Refused at accept: a 503 to read (plain HTTP), or closed at once (TLS: no
        handshake is begun for it)."""
        self.books.closed(reason)
        self._is_refused = True
        if self.tls is not None:
            transport.abort()
            return
        transport.write(_REFUSED[reason])
        if transport.can_write_eof():  # the browser reads the 503, then closes
            transport.write_eof()
            self._deadline = self.loop.call_later(_LINGER, transport.close)
        else:
            transport.close()

    def _start_tls(self, hello: bytes) -> None:
        """The client's first bytes (its ClientHello) are in: hand the TCP connection to
        asyncio's TLS, which makes this protocol's HTTP connection once the handshake is done
        (or drops it: ``_handshake_done``)."""
        assert self.tls is not None and self._accepted is not None
        handshake = self.loop.create_future()
        handshake.add_done_callback(self._handshake_done)
        backstop = math.ceil(2 * self.books.limits.header_timeout) + 1  # ours comes first
        secured = _TlsProtocol(self.loop, self, self.tls, handshake, server_side=True,
                               ssl_handshake_timeout=backstop)
        self._accepted.set_protocol(secured)
        secured.connection_made(self._accepted)
        fed = 0
        while fed < len(hello):
            buffer = secured.get_buffer(len(hello) - fed)
            size = min(len(buffer), len(hello) - fed)
            buffer[:size] = hello[fed:fed + size]
            secured.buffer_updated(size)
            fed += size

    def _handshake_done(self, handshake: asyncio.Future[None]) -> None:
        if handshake.cancelled() or handshake.exception() is not None:  # failed, or closed
            self._cancel_deadline()
            self.books.release(self)

    def _after_events(self, cycle: RequestResponseCycle | None) -> None:
        if self.transport.is_closing():
            return
        if self.cycle is not cycle and self.cycle is not None:  # a request's headers are in
            if self.cycle.scope["path"] in self.books.stream_paths:
                refusal = self.books.begin_stream(self)
                if refusal is not None:
                    self.cycle.disconnected = True  # the application is not to answer it
                    self.transport.write(_REFUSED[refusal])
                    self.close_for(refusal)
                    return
            self._enter(Stage.BODY if self.cycle.more_body else Stage.BUSY)
        elif self.stage is Stage.BODY and not self.cycle.more_body:
            self._enter(Stage.BUSY)

    def _enter(self, stage: Stage) -> None:
        self.stage = stage
        self.books.set_waiting(self, stage in (Stage.HANDSHAKE, Stage.HEADERS))
        if stage in (Stage.HANDSHAKE, Stage.HEADERS):
            self.books.end_stream(self)
        self._cancel_deadline()
        limits = self.books.limits
        if stage is Stage.HANDSHAKE:
            self._deadline = self.loop.call_later(limits.header_timeout, self.close_for,
                                                  HANDSHAKE_TIMEOUT)
        elif stage is Stage.HEADERS:
            self._deadline = self.loop.call_later(limits.header_timeout, self._missed,
                                                  HEADER_TIMEOUT)
        elif stage is Stage.BODY:
            self._deadline = self.loop.call_later(limits.body_timeout, self._missed,
                                                  BODY_TIMEOUT)

    def _missed(self, reason: str) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        is_unanswered = self._has_begun if reason == HEADER_TIMEOUT \
            else not self.cycle.response_started
        if is_unanswered:
            self.transport.write(_TIMED_OUT)
        self.close_for(reason)

    def _missed_write(self) -> None:
        self._write_deadline = None
        self.close_for(WRITE_TIMEOUT, is_abort=True)

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _cancel_write_deadline(self) -> None:
        if self._write_deadline is not None:
            self._write_deadline.cancel()
            self._write_deadline = None


def protocol_for(books: WebConnections, tls: ssl.SSLContext | None = None
                 ) -> type[BoundedH11Protocol]:
    """The protocol class uvicorn makes each accepted connection with, counted in ``books``
    (with ``tls``: the TLS it starts once the connection is admitted)."""

    class WebProtocol(BoundedH11Protocol):
        pass

    WebProtocol.books = books
    WebProtocol.tls = tls
    return WebProtocol

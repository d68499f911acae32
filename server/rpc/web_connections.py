"""The web port's connections and their bounds, as nginx sets them (client_header_timeout,
client_body_timeout, limit_conn): uvicorn's HTTP/1.1 protocol with deadlines and the books
of every open connection.

- A connection has ``header_timeout`` seconds for a request's headers (from its opening, or
  from the end of the previous response), then ``body_timeout`` for the request's body; a
  deadline missed closes it (with a 408 when a request was begun). An idle keep-alive
  connection is closed sooner, by uvicorn's own keep-alive timeout.
- One address (an IPv6 client by its /64, as the quotas count) holds at most
  ``max_per_address`` connections; a trusted proxy (``--trusted-proxies``), many browsers on
  one address, is exempt: it must bound its own clients.
- At ``max_connections``, a new connection takes the place of the oldest one still waiting
  for a request's headers (a half-sent request, an idle keep-alive), so half-open connections
  from many addresses cannot lock an honest browser out; only when every connection is busy
  with a request is a new one refused (503).

Every connection closed or refused for a bound is counted by its reason.
"""

from __future__ import annotations

import asyncio
import enum
import ipaddress
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle

from server.rpc.peers import Networks, client_key

# Why a connection was closed or refused (the metric's reason label).
HEADER_TIMEOUT, BODY_TIMEOUT = "header_timeout", "body_timeout"
PER_ADDRESS, EVICTED, FULL = "per_address", "evicted", "full"
REASONS = (HEADER_TIMEOUT, BODY_TIMEOUT, PER_ADDRESS, EVICTED, FULL)
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
}
_TIMED_OUT = _answer("408 Request Timeout", "request not received in time\n")


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """The web port's bounds (``Config`` has the flags' help)."""

    max_connections: int = 1024
    """Connections open at once (at least 1)."""
    max_per_address: int = 64
    """Connections one address may hold (0: no limit); trusted proxies are exempt."""
    header_timeout: float = 10.0
    """Seconds a connection has for a request's headers."""
    body_timeout: float = 30.0
    """Seconds a request has for its body, once its headers are in."""
    exempt: Networks = ()
    """Addresses without a per-address limit: the trusted proxies in front."""


class Stage(enum.Enum):
    """Where a connection stands in reading its request."""

    HEADERS = "headers"  # waiting for a request's headers (a new or a kept-alive connection)
    BODY = "body"  # headers in, the body still coming
    BUSY = "busy"  # the request read: the application answers it (or streams)


class WebConnections:
    """The books of the web port's open connections: how many each address holds, and which
    wait for a request's headers, oldest first."""

    def __init__(self, limits: ConnectionLimits, closed: Callable[[str], None]) -> None:
        self.limits = limits
        self.closed = closed  # counts a connection closed or refused, by reason
        self._open: set[BoundedH11Protocol] = set()
        self._per_address: dict[str, int] = {}
        self._waiting: OrderedDict[BoundedH11Protocol, None] = OrderedDict()
        self._exempt: dict[str, bool] = {}

    def open(self) -> int:
        return len(self._open)

    def waiting(self) -> int:
        """Open connections waiting for a request's headers."""
        return len(self._waiting)

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
            if not self._waiting:
                return FULL
            next(iter(self._waiting)).close_for(EVICTED)
        self._open.add(connection)
        self._per_address[address] = self._per_address.get(address, 0) + 1
        return None

    def release(self, connection: BoundedH11Protocol) -> None:
        """Count a connection out (closed, or about to be); again is a no-op."""
        if connection not in self._open:
            return
        self._open.discard(connection)
        self._waiting.pop(connection, None)
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


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, counted in ``books`` and held to its deadlines (one subclass per
    web server, made by ``protocol_for``)."""

    books: ClassVar[WebConnections]

    address = ""
    stage = Stage.HEADERS
    _deadline: asyncio.TimerHandle | None = None
    _has_begun = False  # bytes of a request received while waiting for its headers
    _is_refused = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.address = client_key(self.client[0]) if self.client else "unknown"
        refusal = self.books.admit(self)
        if refusal is None:
            self._enter(Stage.HEADERS)
            return
        self.books.closed(refusal)
        self._is_refused = True
        transport.write(_REFUSED[refusal])
        if transport.can_write_eof():  # the browser reads the 503, then closes
            transport.write_eof()
            self._deadline = self.loop.call_later(_LINGER, transport.close)
        else:
            transport.close()

    def data_received(self, data: bytes) -> None:
        if self._is_refused:
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

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_deadline()
        self.books.release(self)
        super().connection_lost(exc)

    def close_for(self, reason: str) -> None:
        """Close this connection for a bound (counted by ``reason``)."""
        self._cancel_deadline()
        self.books.release(self)
        if not self.transport.is_closing():
            self.books.closed(reason)
            self.transport.close()

    def _after_events(self, cycle: RequestResponseCycle | None) -> None:
        if self.transport.is_closing():
            return
        if self.cycle is not cycle and self.cycle is not None:  # a request's headers are in
            self._enter(Stage.BODY if self.cycle.more_body else Stage.BUSY)
        elif self.stage is Stage.BODY and not self.cycle.more_body:
            self._enter(Stage.BUSY)

    def _enter(self, stage: Stage) -> None:
        self.stage = stage
        self.books.set_waiting(self, stage is Stage.HEADERS)
        self._cancel_deadline()
        limits = self.books.limits
        if stage is Stage.HEADERS:
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

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None


def protocol_for(books: WebConnections) -> type[BoundedH11Protocol]:
    """The protocol class uvicorn makes each connection with, counted in ``books``."""

    class WebProtocol(BoundedH11Protocol):
        pass

    WebProtocol.books = books
    return WebProtocol

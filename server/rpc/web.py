"""The browser's way in, on ``--web-port``: the page (``server/web/``) and the copas.v1 contract
over the Connect protocol (connectrpc's ASGI application, served by uvicorn on the server's
own event loop, each connection held to the limits of ``server.rpc.web_connections``); with
``--web-admin``, the admin service's championship calls too (``ADMIN_METHODS``, for the page's
organizer tools), and no other admin call.

Each call is relayed to the server's own gRPC service on a loopback port, so quotas, errors,
idempotency and authentication stay in one implementation, the gRPC one: the ``authorization``
header goes along, the browser's address travels as ``x-forwarded-for`` with the process's
forwarding key (``server.rpc.peers`` believes it only then), appended to the chain the request
came with (a proxy's in front: the gateway reads it past the proxies it trusts), and a gRPC
error comes back as the same Connect error: its code, its message and its google.rpc details
byte for byte.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import errno
import math
import re
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import structlog
import uvicorn
from connectrpc.code import Code
from connectrpc.errors import ConnectError, ErrorDetail
from connectrpc.request import RequestContext
from copas.admin.v1 import admin_connect, admin_pb2, admin_pb2_grpc
from copas.admin.v1.admin_connect import AdminServiceASGIApplication
from copas.v1 import (
    accounts_connect,
    accounts_pb2,
    accounts_pb2_grpc,
    championships_connect,
    championships_pb2,
    championships_pb2_grpc,
    copas_connect,
    copas_pb2,
    copas_pb2_grpc,
)
from copas.v1.accounts_connect import AccountServiceASGIApplication
from copas.v1.championships_connect import ChampionshipServiceASGIApplication
from copas.v1.copas_connect import CopasServiceASGIApplication
from google.rpc import status_pb2
from prometheus_client.core import GaugeMetricFamily
from protobuf.wkt import Any as ConnectAny
from uvicorn.config import SSL_PROTOCOL_VERSION, create_ssl_context

from server.config import Config
from server.metadata import FORWARDED_FOR, FORWARDING_KEY
from server.observability import Metrics, gauges
from server.rpc.peers import Networks, forwarded_chain
from server.rpc.web_codec import web_codecs
from server.rpc.web_connections import ConnectionLimits, WebConnections, protocol_for

log = structlog.get_logger("copas.web")
SERVICE = copas_pb2.DESCRIPTOR.services_by_name["CopasService"]
ACCOUNT_SERVICE = accounts_pb2.DESCRIPTOR.services_by_name["AccountService"]
CHAMPIONSHIP_SERVICE = championships_pb2.DESCRIPTOR.services_by_name["ChampionshipService"]
ADMIN_SERVICE = admin_pb2.DESCRIPTOR.services_by_name["AdminService"]
# The operator's calls the web port relays with --web-admin: a championship's, each checked by
# the gRPC service as any admin call (the operator's token, the audit line with the browser's
# address, the quotas of that address). Tables, accounts, drain and the server's status stay
# on the gRPC port only.
ADMIN_METHODS = frozenset({
    "CreateChampionship", "StartChampionship", "CancelChampionship", "RemoveChampionshipPlayer",
    "PauseChampionship", "CorrectChampionshipResult", "DisqualifyChampionshipPlayer",
    "ReseatChampionshipRound"})
PAGE_DIR = Path(__file__).resolve().parent.parent / "web"  # server/web/
_STATUS_DETAILS = "grpc-status-details-bin"
# gRPC's status codes by name, as Connect spells them (Connect has "canceled").
_CODES: dict[grpc.StatusCode, Code] = {
    code: Code.CANCELED if code is grpc.StatusCode.CANCELLED else Code[code.name]
    for code in grpc.StatusCode if code is not grpc.StatusCode.OK}
_PAGE_FILES = {"/": ("index.html", "text/html; charset=utf-8"),
               "/app.js": ("app.js", "text/javascript; charset=utf-8"),
               "/style.css": ("style.css", "text/css; charset=utf-8"),
               # Installable (a phone adds it to its home screen): the manifest and its icons.
               "/manifest.webmanifest": ("manifest.webmanifest", "application/manifest+json"),
               "/icon.svg": ("icon.svg", "image/svg+xml"),
               "/icon-turn.svg": ("icon-turn.svg", "image/svg+xml"),  # the tab's: your turn
               "/icon-192.png": ("icon-192.png", "image/png"),
               "/icon-512.png": ("icon-512.png", "image/png")}
_PAGE_HEADERS = [
    (b"cache-control", b"no-cache"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"content-security-policy",
     b"default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
     b"img-src 'self' data:; manifest-src 'self'; base-uri 'none'; form-action 'none'; "
     b"frame-ancestors 'none'"),
]
# A request for one of these is a stream: its connection stays busy while it streams.
STREAM_PATHS = frozenset(f"/{service.full_name}/{method.name}"
                         for service in (SERVICE, CHAMPIONSHIP_SERVICE)
                         for method in service.methods if method.server_streaming)
_METHOD_NAME = (re.compile("([^_])([A-Z][a-z]+)"), re.compile("([a-z])([A-Z])"))
Ctx = RequestContext[Any, Any]


def method_attribute(rpc: str) -> str:
    """The attribute the generated Connect application calls for an RPC ('CreateTable' ->
    'create_table'), as protoc-gen-connectrpc names it."""
    words, humps = _METHOD_NAME
    return humps.sub(r"\1_\2", words.sub(r"\1_\2", rpc)).lower()


def connect_error(error: grpc.aio.AioRpcError) -> ConnectError:
    """The same error in Connect's terms: code, message and the google.rpc.Status details."""
    message = error.details() or ""
    details: list[ErrorDetail] = []
    for key, value in error.trailing_metadata() or ():
        if key == _STATUS_DETAILS and isinstance(value, bytes):
            status = status_pb2.Status.FromString(value)
            message = status.message or message
            details = [ErrorDetail(ConnectAny(type_url=d.type_url, value=d.value))
                       for d in status.details]
    return ConnectError(_CODES.get(error.code(), Code.UNKNOWN), message, details)


def _copy_metadata(metadata: Any, headers: Any) -> None:
    """Application metadata of a gRPC answer into Connect headers or trailers."""
    for key, value in metadata or ():
        if key.startswith("grpc-") or key == "content-type":
            continue
        headers.add(key, base64.b64encode(value).decode() if isinstance(value, bytes) else value)


@dataclass(frozen=True)
class _Stubs:
    """The services' stubs on one channel."""

    copas: copas_pb2_grpc.CopasServiceStub
    accounts: accounts_pb2_grpc.AccountServiceStub
    championships: championships_pb2_grpc.ChampionshipServiceStub
    admin: admin_pb2_grpc.AdminServiceStub


class _Connections:
    """Channels to the gRPC services. The server takes at most ``per_connection`` calls at
    once on one connection, so a call holds a slot and a full connection gets a sibling; they
    stay open until the web server stops (their number is bounded by the calls at once)."""

    def __init__(self, target: str, per_connection: int) -> None:
        self.target = target
        self.per_connection = max(1, per_connection)
        self.stubs: list[_Stubs] = []
        self.channels: list[grpc.aio.Channel] = []
        self.calls: list[int] = []

    @contextlib.contextmanager
    def slot(self) -> Iterator[_Stubs]:
        index = next((i for i, n in enumerate(self.calls) if n < self.per_connection), None)
        if index is None:
            channel = grpc.aio.insecure_channel(self.target, options=[
                ("grpc.use_local_subchannel_pool", 1)])  # a connection of its own
            self.channels.append(channel)
            self.stubs.append(_Stubs(copas_pb2_grpc.CopasServiceStub(channel),
                                     accounts_pb2_grpc.AccountServiceStub(channel),
                                     championships_pb2_grpc.ChampionshipServiceStub(channel),
                                     admin_pb2_grpc.AdminServiceStub(channel)))
            self.calls.append(0)
            index = len(self.calls) - 1
        self.calls[index] += 1
        try:
            yield self.stubs[index]
        finally:
            self.calls[index] -= 1

    async def close(self) -> None:
        for channel in self.channels:
            await channel.close()


class _Forwarding:
    """A call relayed to one gRPC service: the browser's address, its authorization and the
    deadline go along, the answer's metadata and errors come back."""

    def __init__(self, connections: _Connections, forwarding_key: str) -> None:
        self.connections = connections
        self.forwarding_key = forwarding_key

    @staticmethod
    def _stub(stubs: _Stubs) -> Any:
        return stubs.copas

    def _metadata(self, ctx: RequestContext[Any, Any]) -> tuple[tuple[str, str], ...]:
        metadata = [(FORWARDING_KEY, self.forwarding_key)]
        client = ctx.client_address
        if client:  # the browser's chain as it came (a proxy's), and whom the bridge saw
            metadata.append((FORWARDED_FOR, forwarded_chain(
                ctx.request_headers.getall(FORWARDED_FOR), client.rsplit(":", 1)[0].strip("[]"))))
        authorization = ctx.request_headers.get("authorization")
        if authorization is not None:
            metadata.append(("authorization", authorization))
        return tuple(metadata)

    @staticmethod
    def _timeout(ctx: RequestContext[Any, Any]) -> float | None:
        left = ctx.timeout_ms
        return None if left is None else max(left, 0.0) / 1000

    async def _unary(self, rpc: str, request: Any, ctx: RequestContext[Any, Any]) -> Any:
        with self.connections.slot() as stubs:
            call = getattr(self._stub(stubs), rpc)(request, metadata=self._metadata(ctx),
                                      timeout=self._timeout(ctx))
            try:
                response = await call
            except grpc.aio.AioRpcError as error:
                raise connect_error(error) from None
            except asyncio.CancelledError:
                call.cancel()  # the browser went away
                raise
            except Exception:
                log.exception("web_relay_failed", rpc=rpc)
                raise ConnectError(Code.INTERNAL, "internal error") from None
            _copy_metadata(await call.initial_metadata(), ctx.response_headers)
            _copy_metadata(await call.trailing_metadata(), ctx.response_trailers)
            return response

    async def _stream(self, rpc: str, request: Any, ctx: RequestContext[Any, Any]
                      ) -> AsyncIterator[Any]:
        with self.connections.slot() as stubs:
            call = getattr(self._stub(stubs), rpc)(request, metadata=self._metadata(ctx),
                                      timeout=self._timeout(ctx))
            try:
                _copy_metadata(await call.initial_metadata(), ctx.response_headers)
                async for response in call:
                    yield response
                _copy_metadata(await call.trailing_metadata(), ctx.response_trailers)
            except grpc.aio.AioRpcError as error:
                raise connect_error(error) from None
            except Exception:
                log.exception("web_relay_failed", rpc=rpc)
                raise ConnectError(Code.INTERNAL, "internal error") from None
            finally:
                call.cancel()  # the browser went away, or the stream ended: either way


class Relay(_Forwarding, copas_connect.CopasService):
    """Every CopasService RPC as the Connect application calls it, relayed to gRPC (the
    generated protocol it implements names each one; tests/test_web_bridge.py checks that
    none is left to the protocol's UNIMPLEMENTED default)."""

    async def create_table(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("CreateTable", request, ctx)

    async def list_tables(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("ListTables", request, ctx)

    def watch_lobby(self, request: Any, ctx: Ctx, /) -> AsyncIterator[Any]:
        return self._stream("WatchLobby", request, ctx)

    async def get_table(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("GetTable", request, ctx)

    async def join_table(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("JoinTable", request, ctx)

    async def rematch(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("Rematch", request, ctx)

    async def react(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("React", request, ctx)

    async def pass_cards(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("PassCards", request, ctx)

    async def play_card(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("PlayCard", request, ctx)

    async def choose_moon(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("ChooseMoon", request, ctx)

    async def leave_table(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("LeaveTable", request, ctx)

    def watch_table(self, request: Any, ctx: Ctx, /) -> AsyncIterator[Any]:
        return self._stream("WatchTable", request, ctx)

    async def get_view(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("GetView", request, ctx)

    async def get_game_record(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("GetGameRecord", request, ctx)

    async def list_game_records(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("ListGameRecords", request, ctx)

    def play(self, request: AsyncIterator[Any], ctx: Ctx, /) -> AsyncIterator[Any]:
        """Connect over HTTP/1.1 has no bidirectional streams: a browser uses the unary calls
        and WatchTable (or gRPC, over HTTP/2)."""
        raise ConnectError(Code.UNIMPLEMENTED, "Play needs a bidirectional stream (gRPC over "
                           "HTTP/2): on the web port use the unary calls and WatchTable")


class AccountRelay(_Forwarding, accounts_connect.AccountService):
    """Every AccountService RPC relayed the same way (sign-ins count the browser's address;
    the access token goes along in ``authorization``)."""

    @staticmethod
    def _stub(stubs: _Stubs) -> Any:
        return stubs.accounts

    async def sign_in_device(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("SignInDevice", request, ctx)

    async def sign_up_password(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("SignUpPassword", request, ctx)

    async def sign_in_password(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("SignInPassword", request, ctx)

    async def sign_in_oidc(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("SignInOidc", request, ctx)

    async def refresh_session(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("RefreshSession", request, ctx)

    async def sign_out(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("SignOut", request, ctx)

    async def get_profile(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("GetProfile", request, ctx)

    async def update_profile(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("UpdateProfile", request, ctx)

    async def link_password(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("LinkPassword", request, ctx)

    async def link_oidc(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("LinkOidc", request, ctx)

    async def get_leaderboard(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("GetLeaderboard", request, ctx)

    async def list_my_games(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("ListMyGames", request, ctx)


class ChampionshipRelay(_Forwarding, championships_connect.ChampionshipService):
    """Every ChampionshipService RPC relayed the same way (the access token goes along)."""

    @staticmethod
    def _stub(stubs: _Stubs) -> Any:
        return stubs.championships

    async def create_championship(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("CreateChampionship", request, ctx)

    async def list_championships(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("ListChampionships", request, ctx)

    async def get_championship(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("GetChampionship", request, ctx)

    async def register(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("Register", request, ctx)

    async def unregister(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("Unregister", request, ctx)

    async def withdraw(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("Withdraw", request, ctx)

    async def check_in(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("CheckIn", request, ctx)

    def watch_championship(self, request: Any, ctx: Ctx, /) -> AsyncIterator[Any]:
        return self._stream("WatchChampionship", request, ctx)

    async def export_championship(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("ExportChampionship", request, ctx)


class AdminRelay(_Forwarding, admin_connect.AdminService):
    """AdminService's championship calls (``ADMIN_METHODS``) relayed the same way: the
    operator's token goes along in ``authorization`` and the gRPC service checks it (the web
    port never reads, keeps or logs it). ``WebApp`` routes no other admin method here."""

    @staticmethod
    def _stub(stubs: _Stubs) -> Any:
        return stubs.admin

    async def create_championship(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("CreateChampionship", request, ctx)

    async def start_championship(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("StartChampionship", request, ctx)

    async def cancel_championship(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("CancelChampionship", request, ctx)

    async def remove_championship_player(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("RemoveChampionshipPlayer", request, ctx)

    async def pause_championship(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("PauseChampionship", request, ctx)

    async def correct_championship_result(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("CorrectChampionshipResult", request, ctx)

    async def disqualify_championship_player(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("DisqualifyChampionshipPlayer", request, ctx)

    async def reseat_championship_round(self, request: Any, ctx: Ctx, /) -> Any:
        return await self._unary("ReseatChampionshipRound", request, ctx)


class WebApp:
    """The ASGI application: the contract under ``/copas.v1.CopasService/``, accounts under
    ``/copas.v1.AccountService/``, championships under ``/copas.v1.ChampionshipService/`` and
    the operator's championship calls under ``/copas.admin.v1.AdminService/`` (when given;
    only ``ADMIN_METHODS``: any other path there is not found), the page at /."""

    def __init__(self, rpc: Callable[..., Awaitable[None]],
                 accounts: Callable[..., Awaitable[None]] | None = None,
                 championships: Callable[..., Awaitable[None]] | None = None,
                 admin: Callable[..., Awaitable[None]] | None = None,
                 quick_match_bots_after: float = 0.0) -> None:
        self.rpc = rpc
        self.rpc_prefix = f"/{SERVICE.full_name}/"
        self.accounts = accounts
        self.accounts_prefix = f"/{ACCOUNT_SERVICE.full_name}/"
        self.championships = championships
        self.championships_prefix = f"/{CHAMPIONSHIP_SERVICE.full_name}/"
        self.admin = admin
        self.admin_prefix = f"/{ADMIN_SERVICE.full_name}/"
        self.admin_paths = frozenset(f"/{ADMIN_SERVICE.full_name}/{name}"
                                     for name in ADMIN_METHODS)
        self.files = {path: ((PAGE_DIR / name).read_bytes(), kind)
                      for path, (name, kind) in _PAGE_FILES.items()}
        page, kind = self.files["/"]  # the server's settings the page shows, written in
        self.files["/"] = (page.replace(
            b'<meta name="copas-quick-match-bots-after" content="0">',
            f'<meta name="copas-quick-match-bots-after" content="{quick_match_bots_after:g}">'
            .encode()), kind)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if scope["path"].startswith(self.rpc_prefix):
            await self.rpc(scope, receive, send)
            return
        if self.accounts is not None and scope["path"].startswith(self.accounts_prefix):
            await self.accounts(scope, receive, send)
            return
        if self.championships is not None \
                and scope["path"].startswith(self.championships_prefix):
            await self.championships(scope, receive, send)
            return
        if self.admin is not None and scope["path"] in self.admin_paths:
            await self.admin(scope, receive, send)
            return
        found = self.files.get(scope["path"])
        if scope["path"].startswith(self.admin_prefix):  # not here (Connect: UNIMPLEMENTED)
            status, body, kind = 404, b"not found\n", "text/plain; charset=utf-8"
        elif scope["method"] not in ("GET", "HEAD"):
            status, body, kind = 405, b"method not allowed\n", "text/plain; charset=utf-8"
        elif found is None:
            status, body, kind = 404, b"not found\n", "text/plain; charset=utf-8"
        else:
            status, (body, kind) = 200, found
        headers = [(b"content-type", kind.encode()), (b"content-length", str(len(body)).encode()),
                   *_PAGE_HEADERS]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body",
                    "body": b"" if scope["method"] == "HEAD" else body})


class _Uvicorn(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # copas-server handles SIGTERM and SIGINT itself


def bind(host: str, port: int) -> list[socket.socket]:
    """Listening sockets for every address of ``host`` (both of 'localhost').

    :raises OSError: the port is taken, or no address of ``host`` can be used.
    """
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in socket.getaddrinfo(
                host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE):
            sock = socket.socket(family, kind, proto)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind(address)
                sock.listen(1024)
            except OSError as exc:
                sock.close()
                if exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT) and sockets:
                    continue  # e.g. no IPv6 here: the other address serves
                raise
            sock.setblocking(False)
            sockets.append(sock)
    except OSError as exc:
        for sock in sockets:
            sock.close()
        raise OSError(f"cannot serve the web page on {host}:{port}: {exc.strerror or exc}"
                      ) from None
    return sockets


@dataclass
class WebServer:
    """The page and the Connect endpoint, serving on sockets bound at start."""

    sockets: list[socket.socket]
    connections: _Connections
    server: _Uvicorn | None = None
    task: asyncio.Task[None] | None = None
    books: WebConnections | None = None  # the open connections, once serving
    port: int = field(init=False)

    def __post_init__(self) -> None:
        self.port = self.sockets[0].getsockname()[1]

    def serve(self, app: WebApp, books: WebConnections, *, grace: float, tls_cert: str = "",
              tls_key: str = "", tls_client_ca: str = "") -> None:
        """Serve ``app``, each connection counted in ``books`` from its accept and held to its
        limits (they replace uvicorn's limit_concurrency, which answers 503 while half-open
        connections hold every slot). With ``tls_cert``, the protocol starts TLS itself once
        a connection is admitted: uvicorn's (asyncio's) would begin every handshake at
        accept, counted nowhere."""
        self.books = books
        tls = None
        if tls_cert:
            tls = create_ssl_context(
                tls_cert, tls_key or None, None, SSL_PROTOCOL_VERSION,
                ssl.CERT_REQUIRED if tls_client_ca else ssl.CERT_NONE, tls_client_ca or None,
                "TLSv1")  # as uvicorn.Config makes it
        config = uvicorn.Config(
            app, lifespan="off", access_log=False, log_config=None, proxy_headers=False,
            server_header=False, ws="none", http=protocol_for(books, tls),
            limit_concurrency=None, timeout_graceful_shutdown=math.ceil(grace))
        self.server = _Uvicorn(config)
        self.task = asyncio.create_task(self.server.serve(sockets=self.sockets))

    def begin_stop(self) -> None:
        """No new connections; open ones end as their calls do."""
        if self.server is not None:
            self.server.should_exit = True

    async def stop(self, grace: float) -> None:
        """Stop; calls still running after ``grace`` seconds are cancelled."""
        if self.server is not None:  # a moment at least, for idle connections to close
            self.server.config.timeout_graceful_shutdown = max(math.ceil(grace), 1)
        self.begin_stop()
        if self.task is not None:
            with contextlib.suppress(asyncio.CancelledError, SystemExit):
                await self.task
        if self.books is not None:  # what uvicorn does not know of: TLS handshakes
            self.books.close_all()
        self.close_sockets()
        await self.connections.close()

    def close_sockets(self) -> None:
        for sock in self.sockets:
            sock.close()

    def gauges(self) -> Iterable[GaugeMetricFamily]:
        """The web port's connections: open, and those waiting for a request's headers."""
        books = self.books
        return gauges(
            ("copas_web_connections", "Web port connections open",
             books.open() if books is not None else 0),
            ("copas_web_connections_waiting", "Web port connections waiting for a request's "
             "headers (a new or kept-alive connection) or their TLS handshake",
             books.waiting() if books is not None else 0),
            ("copas_web_streams", "Web port connections answering a streaming call",
             books.streams() if books is not None else 0))


def prepare(host: str, port: int, grpc_target: str, per_connection: int) -> WebServer:
    """Bind the web port (fails at once when it is taken); serving starts with ``start``."""
    return WebServer(bind(host, port), _Connections(grpc_target, per_connection))


def start(web: WebServer, forwarding_key: str, limits: ConnectionLimits,
          closed: Callable[[str], None], *, max_message_bytes: int, grace: float,
          tls_cert: str = "", tls_key: str = "", tls_client_ca: str = "",
          is_admin_relayed: bool = False, quick_match_bots_after: float = 0.0) -> None:
    """Serve the page and the relays (CopasService, AccountService, ChampionshipService and,
    with ``is_admin_relayed``, AdminService's ``ADMIN_METHODS``) on ``web``'s sockets, its
    connections held to ``limits`` (``closed`` counts each one closed or refused for a limit,
    by reason)."""
    relay = Relay(web.connections, forwarding_key)
    codecs = web_codecs()  # JSON encoded once for all the streams sending one message
    rpc = CopasServiceASGIApplication(relay, read_max_bytes=max_message_bytes, codecs=codecs)
    accounts = AccountServiceASGIApplication(AccountRelay(web.connections, forwarding_key),
                                             read_max_bytes=max_message_bytes, codecs=codecs)
    championships = ChampionshipServiceASGIApplication(
        ChampionshipRelay(web.connections, forwarding_key), read_max_bytes=max_message_bytes,
        codecs=codecs)
    admin = AdminServiceASGIApplication(
        AdminRelay(web.connections, forwarding_key), read_max_bytes=max_message_bytes,
        codecs=codecs) if is_admin_relayed else None
    web.serve(WebApp(rpc, accounts, championships, admin, quick_match_bots_after),
              WebConnections(limits, closed, STREAM_PATHS), grace=grace,
              tls_cert=tls_cert, tls_key=tls_key, tls_client_ca=tls_client_ca)


def start_page(web: WebServer, forwarding_key: str, config: Config, exempt: Networks,
               metrics: Metrics) -> None:
    """``start`` with the limits, TLS and counters a server's configuration gives."""
    limits = ConnectionLimits(
        max_connections=config.web_max_connections,
        max_per_address=config.web_max_connections_per_address,
        max_streams_per_address=config.web_max_streams_per_address,
        header_timeout=config.web_header_timeout, body_timeout=config.web_body_timeout,
        write_timeout=config.web_write_timeout, exempt=exempt)
    closed = metrics.web_connections_closed
    start(web, forwarding_key, limits, lambda reason: closed.labels(reason=reason).inc(),
          max_message_bytes=config.max_message_bytes, grace=config.grace,
          tls_cert=config.tls_cert, tls_key=config.tls_key, tls_client_ca=config.tls_client_ca,
          is_admin_relayed=config.web_admin,
          quick_match_bots_after=config.quick_match_bots_after)
    metrics.add_gauges(web.gauges)

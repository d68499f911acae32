"""The server's listeners: its gRPC ports (public, internal for the other nodes, a loopback
one for the web page's relay) bound with their TLS credentials, and the web port, all before
anything else is built (a second server on a taken port never touches the data directory)."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import grpc

from server.config import Config

if TYPE_CHECKING:  # the page's modules are imported only when it is served (start-up)
    from server.rpc import web


class SetupError(Exception):
    """The server cannot start as configured; the message is one line saying why."""


def _server_credentials(config: Config) -> grpc.ServerCredentials | None:
    if not config.tls_cert:
        return None
    try:
        cert = Path(config.tls_cert).read_bytes()
        key = Path(config.tls_key).read_bytes()
        client_ca = Path(config.tls_client_ca).read_bytes() if config.tls_client_ca else None
    except OSError as exc:
        raise SetupError(f"cannot read TLS file {exc.filename}: {exc.strerror}") from None
    check = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)  # what gRPC would only say at bind time
    try:
        check.load_cert_chain(config.tls_cert, config.tls_key)
    except (ssl.SSLError, OSError) as exc:
        raise SetupError(f"--tls-cert and --tls-key are not a usable certificate and key: "
                         f"{exc}") from None
    if client_ca is not None:
        try:
            check.load_verify_locations(cadata=client_ca.decode("ascii", "replace"))
        except (ssl.SSLError, ValueError) as exc:
            raise SetupError(f"--tls-client-ca is not a usable CA bundle: {exc}") from None
    return grpc.ssl_server_credentials([(key, cert)], root_certificates=client_ca,
                                       require_client_auth=client_ca is not None)


def _internal_credentials(config: Config
                          ) -> tuple[grpc.ServerCredentials, grpc.ChannelCredentials] | None:
    """Mutual TLS between nodes (``--internal-tls-*``): the internal port's credentials, and
    a relay's towards the other nodes' (the same certificate, the same CA); None: plaintext."""
    if not config.internal_tls_cert:
        return None
    try:
        cert, key, ca = (Path(name).read_bytes() for name in (
            config.internal_tls_cert, config.internal_tls_key, config.internal_tls_ca))
    except OSError as exc:
        raise SetupError(f"cannot read TLS file {exc.filename}: {exc.strerror}") from None
    check = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        check.load_cert_chain(config.internal_tls_cert, config.internal_tls_key)
        check.load_verify_locations(cadata=ca.decode("ascii", "replace"))
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise SetupError(f"--internal-tls-*: not a usable certificate, key and CA: {exc}"
                         ) from None
    return (grpc.ssl_server_credentials([(key, cert)], root_certificates=ca,
                                        require_client_auth=True),
            grpc.ssl_channel_credentials(root_certificates=ca, private_key=key,
                                         certificate_chain=cert))


@dataclass
class Bound:
    """The gRPC server with its ports bound (nothing served until ``start``)."""

    server: grpc.aio.Server
    port: int
    advertise: str
    page: web.WebServer | None
    internal: grpc.aio.Server | None = None  # a cluster node's port for the other nodes
    internal_port: int = 0
    relay_credentials: grpc.ChannelCredentials | None = None  # mutual TLS to the others
    public: str = ""  # host:port clients reach this node at (x-copas-owner)
    is_started: bool = False

    async def start(self) -> None:
        """Serve on the gRPC ports (the public and loopback ones, then the internal one)."""
        self.is_started = True
        await self.server.start()
        if self.internal is not None:
            await self.internal.start()

    async def abandon(self) -> None:
        """Close every port now (calls still running are cancelled). gRPC frees the ports
        of a server only when it stops after a start: one never started is started and
        stopped at once."""
        for server in (self.server, self.internal):
            if server is not None:
                if not self.is_started:
                    await server.start()
                await server.stop(None)
        if self.page is not None:
            self.page.close_sockets()


def _ms(seconds: float) -> int:
    """A duration flag (0: never) as grpc's milliseconds (its "never": INT_MAX)."""
    return int(seconds * 1000) if seconds > 0 else 2**31 - 1


def _public_address(given: str, advertise: str, port: int) -> str:
    """Where clients reach this node: ``given`` (host:port, or a host: with ``port``), else
    the host the other nodes reach it at, with ``port``."""
    if given and ":" in given.rsplit("]", 1)[-1]:
        return given
    return f"{given or advertise.rsplit(':', 1)[0]}:{port}"


def _grpc_server(config: Config) -> grpc.aio.Server:
    return grpc.aio.server(
        options=[
            # A second server on a taken port must fail, not share; --workers' nodes share.
            ("grpc.so_reuseport", 1 if config.reuse_port else 0),
            ("grpc.max_concurrent_streams", config.max_concurrent_streams),
            ("grpc.max_receive_message_length", config.max_message_bytes),
            # What a client may send that the server has not read is HTTP/2's window: keep it
            # at 64 KiB. grpc's bandwidth-delay probe grew it to megabytes, and a Play stream
            # over its quota (not read: flow control is to hold it) sent ~20,000 refused actions
            # a second into it, each parsed (issue 27, finding 4). Requests are small (at most
            # --max-message-bytes), so a window per round trip loses nothing.
            ("grpc.http2.bdp_probe", 0),
            # grpc core refuses calls beyond 1000 (soft) / 3000 (hard) waiting to be picked
            # up: a reconnect storm after a restart must not be dropped, so size them.
            ("grpc.server.max_pending_requests", config.max_pending_requests),
            ("grpc.server.max_pending_requests_hard_limit", config.max_pending_requests),
            ("grpc.keepalive_time_ms", 60_000),
            # Connection hygiene (gRFC A9): an idle connection is closed, an old one is asked
            # to reconnect (its calls get a grace), and the connections at once are capped.
            ("grpc.max_connection_idle_ms", _ms(config.max_connection_idle)),
            ("grpc.max_connection_age_ms", _ms(config.max_connection_age)),
            ("grpc.max_connection_age_grace_ms", _ms(config.max_connection_age_grace)),
            ("grpc.http2.max_pings_without_data", 0),
            # In a cluster the other nodes ping their relaying connections every half lease
            # (see server/cluster/forwarding.py): pings that often (or a little early) are
            # welcome, not strikes towards a GOAWAY.
            ("grpc.http2.min_recv_ping_interval_without_data_ms",
             _ms(config.lease / 4) if config.database else 300_000),
            *([("grpc.max_allowed_incoming_connections", config.max_connections)]
              if config.max_connections else []),  # grpc-core's "none" is no option at all
        ],
        maximum_concurrent_rpcs=None,
    )


def internal_address(config: Config) -> str:
    """Where a node listens for the other nodes' relayed calls: ``--internal-listen``, or
    in a cluster a free port on the host the others reach it at ("" for one process)."""
    if config.internal_listen or not config.database:
        return config.internal_listen
    if ":" in config.advertise.rsplit("]", 1)[-1]:
        raise SetupError(f"--advertise {config.advertise}: the other nodes relay to the "
                         "internal port, not the public one; give --advertise HOST (a free "
                         "internal port on it) or --internal-listen HOST:PORT as well")
    return f"{config.advertise or config.listen.rsplit(':', 1)[0]}:0"


async def bind(config: Config) -> Bound:
    credentials = _server_credentials(config)
    mutual = _internal_credentials(config)
    internal_listen = internal_address(config)
    server = _grpc_server(config)
    try:
        port = (server.add_secure_port(config.listen, credentials) if credentials
                else server.add_insecure_port(config.listen))
    except RuntimeError as exc:
        raise OSError(f"cannot listen on {config.listen}: {exc}") from None
    if port == 0:
        raise OSError(f"cannot listen on {config.listen}: address in use or unavailable")
    bound = Bound(server, port, config.advertise, None)
    if internal_listen:  # the other nodes relay calls here
        # A server of its own: only its calls may carry the cluster key (see rpc.peers).
        bound.internal = _grpc_server(config)
        bound.relay_credentials = mutual[1] if mutual is not None else None
        try:
            internal = bound.internal.add_secure_port(internal_listen, mutual[0]) \
                if mutual is not None else bound.internal.add_insecure_port(internal_listen)
        except RuntimeError:
            internal = 0
        if internal == 0:
            await bound.abandon()
            raise OSError(f"cannot listen on {internal_listen}")
        bound.internal_port = internal
        advertise = config.advertise
        if advertise and ":" not in advertise.rsplit("]", 1)[-1]:  # a host: this port on it
            advertise = f"{advertise}:{internal}"
        bound.advertise = advertise or f"{internal_listen.rsplit(':', 1)[0]}:{internal}"
    bound.advertise = bound.advertise or f"{config.listen.rsplit(':', 1)[0]}:{port}"
    public_port = port
    if config.public_listen:  # a port of this node alone, for clients told to call it
        public_port = (server.add_secure_port(config.public_listen, credentials) if credentials
                       else server.add_insecure_port(config.public_listen))
        if public_port == 0:
            await bound.abandon()
            raise OSError(f"cannot listen on {config.public_listen}")
    bound.public = _public_address(config.public_address, bound.advertise, public_port)
    if config.database and bound.advertise.rsplit(":", 1)[0].strip("[]") in ("0.0.0.0", "::",
                                                                             ""):
        await bound.abandon()
        raise SetupError(f"--database: the other nodes cannot reach {bound.advertise}: give "
                         "--advertise HOST:PORT (and --node-id NAME) on this machine")
    if config.web_port:  # the web bridge relays to a plaintext loopback port of its own
        from server.rpc import web

        relay_port = server.add_insecure_port("127.0.0.1:0")
        if relay_port == 0:
            await bound.abandon()
            raise OSError("cannot open a loopback port for the web page")
        try:
            bound.page = web.prepare(config.web_host, config.web_port,
                                     f"127.0.0.1:{relay_port}", config.max_concurrent_streams)
        except OSError:
            await bound.abandon()
            raise
    return bound

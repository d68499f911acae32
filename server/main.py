"""copas-server: wiring only. Each part is built with its collaborators, in order, and nothing
is set on it afterwards: the gRPC server (its ports bound first, so a second server on the
same port never touches the data directory), the store, the lease and directory of a cluster
node, the registry of tables, the routes, the gateway with the services behind it, then the
web page beside them (``server.rpc.web``).

Exit codes: 0 after SIGTERM/SIGINT; 1 when it cannot listen; 2 when the data directory or
the TLS files cannot be used (one line on stderr says why); 3 when the store failed while
serving (fail-stop: health turns NOT_SERVING, every call and stream gets UNAVAILABLE, and
the process exits so a supervisor restarts it from what the log holds).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import secrets
import signal
import ssl
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import structlog
from copas.admin.v1 import admin_pb2, admin_pb2_grpc
from copas.v1 import copas_pb2, copas_pb2_grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from prometheus_client import start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from server.cluster.admin import ClusterAdmin
from server.cluster.directory import ClusterDirectory
from server.cluster.forwarding import Forwarder
from server.cluster.keys import GRACE_SECONDS as KEY_GRACE_SECONDS
from server.cluster.keys import ClusterKeys
from server.cluster.lobby import ClusterLobby
from server.cluster.matching import ClusterMatch
from server.cluster.ownership import Lease, Takeovers
from server.cluster.queries import PgClusterQueries
from server.cluster.routing import Router
from server.config import Config, parse_args
from server.errors import ServiceError
from server.observability import Metrics, configure_logging
from server.rpc import reflection, web
from server.rpc.admin import AdminAuth, AdminService, admin_subjects, read_admin_token
from server.rpc.gateway import (
    SERVE_HERE,
    CallForwarder,
    CallRouter,
    Gateway,
    ImpliedTables,
    service_handlers,
)
from server.rpc.peers import PeerTrust, trusted_networks
from server.rpc.quotas import Quotas
from server.rpc.service import CopasService
from server.rpc.web_connections import ConnectionLimits
from server.store import Node, PgStore, Storage, StorageFailed, StoreUnusable, open_local_store
from server.tables import views
from server.tables.bots import Thinker
from server.tables.clock import LoopScheduler
from server.tables.directory import Directory, LocalDirectory
from server.tables.lobby import LobbySource
from server.tables.records import Records
from server.tables.recovery import recover
from server.tables.registry import TableRegistry

log = structlog.get_logger("copas.server")
SERVICE_NAME = copas_pb2.DESCRIPTOR.services_by_name["CopasService"].full_name
ADMIN_SERVICE_NAME = admin_pb2.DESCRIPTOR.services_by_name["AdminService"].full_name
EXIT_CANNOT_LISTEN, EXIT_BAD_SETUP, EXIT_STORAGE_FAILED = 1, 2, 3
FAIL_STOP_GRACE = 2.0  # seconds a failed server gives its calls in flight to be answered


class SetupError(Exception):
    """The server cannot start as configured; the message is one line saying why."""


@dataclass
class RunningServer:
    server: grpc.aio.Server
    port: int
    registry: TableRegistry
    store: Storage
    health: health.aio.HealthServicer
    metrics: Metrics
    metrics_port: int
    retention: asyncio.Task[None]
    quotas: Quotas
    records: Records
    takeovers: Takeovers | None = None  # a cluster node's lease renewals and sweeps
    forwarder: Forwarder | None = None
    thinker: Thinker | None = None
    metrics_http: Any = None
    page: web.WebServer | None = None  # the web page, when --web-port is set
    failed: asyncio.Event = field(default_factory=asyncio.Event)
    failure: StorageFailed | None = None
    watchers: list[asyncio.Task[None]] = field(default_factory=list)
    internal: grpc.aio.Server | None = None  # the port the other nodes relay calls to
    internal_port: int = 0
    cluster_admin: ClusterAdmin | None = None  # the admin service's channels to other nodes


def _live_gauges(registry: TableRegistry, quotas: Quotas, service: CopasService
                 ) -> Iterable[GaugeMetricFamily]:
    by_phase = GaugeMetricFamily("copas_tables", "Tables by phase", labels=["phase"])
    counts: dict[str, int] = {name: 0 for name in copas_pb2.Phase.keys()[1:]}
    connected = watchers = stuck = 0
    for table in registry.live():
        counts[copas_pb2.Phase.Name(views.phase_of(table))] += 1  # type: ignore[arg-type]
        watchers += len(table.fanout)
        stuck += table.is_stuck()
        connected += sum(1 for s in table.seats if table.is_connected(s.number))
    for phase, count in counts.items():
        by_phase.add_metric([phase.removeprefix("PHASE_").lower()], count)
    yield by_phase
    for name, text, value in (
            ("copas_seats_connected", "Player seats with a stream open", connected),
            ("copas_watch_streams", "WatchTable streams open", watchers),
            ("copas_players_seated", "People seated in games not finished", registry.seated),
            ("copas_tables_stuck", "Games with no progress for longer than their rules allow "
             "(a deadline passed and not played, a bot to act and nothing to make it)", stuck),
            ("copas_quota_clients", "Clients the quotas keep track of", quotas.clients()),
            ("copas_play_streams", "Play streams open", len(service.play_streams)),
            ("copas_play_results_waiting", "Actions on Play streams whose result is not sent",
             sum(s.results_waiting() for s in service.play_streams))):
        gauge = GaugeMetricFamily(name, text)
        gauge.add_metric([], value)
        yield gauge


def _cluster_gauges(router: Router, relay: Forwarder, takeovers: Takeovers,
                    lobby: ClusterLobby, lease: Lease) -> Iterable[Metric]:
    """What a cluster node holds for the others: each bounded and given back."""
    for name, text, value in (
            ("copas_cluster_connections", "Connections held to other nodes",
             relay.connections()),
            ("copas_cluster_relayed_calls", "Calls being relayed to other nodes now",
             relay.calls_in_flight()),
            ("copas_cluster_owners_cached", "Tables' owners and tokens' tables remembered",
             router.remembered()),
            ("copas_cluster_claims", "Single-table takeovers in progress",
             takeovers.claims_in_progress()),
            ("copas_cluster_lease_age_seconds", "Seconds since the last renewal of this "
             "node's lease that the database took", time.monotonic() - lease.renewed_at),
            ("copas_cluster_lobby_reads_cached", "The lobby's reads kept (at most two)",
             lobby.reads_kept()),
            ("copas_cluster_shared_watch_upstreams", "Relayed WatchTable streams open to "
             "other nodes that this node's spectators of one table share (one per table)",
             relay.shared.upstreams()),
            ("copas_cluster_shared_watchers", "This node's spectator streams fed by those "
             "shared upstreams", relay.shared.watchers())):
        gauge = GaugeMetricFamily(name, text)
        gauge.add_metric([], value)
        yield gauge
    lookups = CounterMetricFamily(
        "copas_cluster_lookups", "Owners and tokens' tables looked up in the database "
        "(read), or refused for want of the node's budget (shed)", labels=["outcome"])
    lookups.add_metric(["read"], router.lookups_read)
    lookups.add_metric(["shed"], router.lookups_shed)
    yield lookups
    yield CounterMetricFamily("copas_cluster_relayed", "Calls and streams relayed to the "
                              "node owning their table", value=relay.relayed)
    yield CounterMetricFamily("copas_cluster_shared_watch_upstreams_opened", "Shared "
                              "upstream WatchTable streams opened to other nodes",
                              value=relay.shared.opened)
    yield CounterMetricFamily("copas_cluster_takeovers", "Tables taken over from nodes whose "
                              "lease ran out", value=takeovers.taken_over)


def _web_gauges(page: web.WebServer) -> Iterable[GaugeMetricFamily]:
    """The web port's connections: open, and those waiting for a request's headers."""
    books = page.books
    for name, text, value in (
            ("copas_web_connections", "Web port connections open",
             books.open() if books is not None else 0),
            ("copas_web_connections_waiting", "Web port connections waiting for a request's "
             "headers (a new or kept-alive connection)",
             books.waiting() if books is not None else 0)):
        gauge = GaugeMetricFamily(name, text)
        gauge.add_metric([], value)
        yield gauge


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
class _Bound:
    """The gRPC server with its ports bound (nothing served yet)."""

    server: grpc.aio.Server
    port: int
    advertise: str
    page: web.WebServer | None
    internal: grpc.aio.Server | None = None  # a cluster node's port for the other nodes
    internal_port: int = 0
    relay_credentials: grpc.ChannelCredentials | None = None  # mutual TLS to the others
    public: str = ""  # host:port clients reach this node at (x-copas-owner)

    async def abandon(self) -> None:
        await self.server.stop(None)
        if self.internal is not None:
            await self.internal.stop(None)
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


async def _bind(config: Config) -> _Bound:
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
    bound = _Bound(server, port, config.advertise, None)
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


async def start(config: Config) -> RunningServer:
    """Start serving (returns once listening). Tables are recovered from the store before
    the first request is served.

    :raises OSError: a port is taken or an address cannot be used.
    :raises SetupError: the data directory or the TLS files cannot be used.
    """
    try:
        proxies = trusted_networks(config.trusted_proxies)
    except ValueError as exc:
        raise SetupError(f"--trusted-proxies: {exc}") from None
    try:
        admin_token = read_admin_token(config.admin_token_file)
    except (OSError, ValueError) as exc:
        raise SetupError(f"--admin-token-file: {exc}") from None
    subjects = admin_subjects(config.admin_subjects)
    if subjects and not config.tls_client_ca:
        raise SetupError("--admin-subjects needs mutual TLS: give --tls-client-ca (and "
                         "--tls-cert, --tls-key)")
    bound = await _bind(config)
    store: Storage
    shared: PgStore | None = None  # a node among others sharing one PostgreSQL
    metrics = Metrics()
    try:
        if config.database:
            store = shared = PgStore.open(config.database, Node(
                config.node_id or bound.advertise, bound.advertise, config.lease, bound.public),
                metrics.observe_commit)
        else:
            store = open_local_store(config.data_dir, metrics.observe_commit)
    except StoreUnusable as exc:
        await bound.abandon()
        raise SetupError(str(exc)) from None
    quotas = Quotas(config)
    scheduler = LoopScheduler()
    thinker = Thinker(config.bot_workers, config.bot_think_seconds) \
        if config.bot_workers > 0 else None
    queries = PgClusterQueries(shared) if shared is not None else None
    lease = Lease(queries) if queries is not None else None
    directory: Directory = ClusterDirectory(shared, lease) \
        if shared is not None and lease is not None else LocalDirectory()
    registry = TableRegistry(config.registry_settings(), config.table_settings(), metrics,
                             store, scheduler, directory, thinker)
    records = Records(store, scheduler, config.keep_records, config.keep_records_days)
    lobby: LobbySource = registry.lobby
    router: CallRouter = SERVE_HERE
    forwarder: CallForwarder = SERVE_HERE
    implied: ImpliedTables = SERVE_HERE
    takeovers = relay = None
    keys: ClusterKeys | None = None
    cluster_admin = None
    if queries is not None and lease is not None:
        takeovers = Takeovers(registry, queries, lease)
        cluster_router = Router(registry, queries, lease, takeovers,
                                config.cluster_lookups_per_second)
        keys = ClusterKeys(*await asyncio.to_thread(queries.cluster_keys, KEY_GRACE_SECONDS))
        relay = Forwarder(keys, cluster_router.forget_owner,
                          config.max_concurrent_streams, answer_within=config.lease / 2,
                          credentials=bound.relay_credentials, history=config.history,
                          watcher_queue=config.watcher_queue,
                          max_watchers_per_table=config.max_watchers_per_table)
        router, forwarder = cluster_router, relay
        implied = ClusterMatch(registry, queries, cluster_router.spend_lookup)
        cluster_admin = ClusterAdmin(queries, lease, cluster_router, takeovers, keys,
                                     answer_within=config.lease / 2,
                                     credentials=bound.relay_credentials)
        lobby = cluster_lobby = ClusterLobby(queries, registry.durable)
        metrics.add_gauges(lambda: _cluster_gauges(cluster_router, relay, takeovers,
                                                   cluster_lobby, lease))
    forwarding_key = secrets.token_urlsafe(32) if bound.page is not None else None
    public = PeerTrust(forwarding_key, proxies)
    gateway = Gateway(metrics, quotas, registry.is_valid_token, public, router, forwarder,
                      implied)
    health_servicer = health.aio.HealthServicer()
    service = CopasService(registry, lobby, records, quotas)
    failed = asyncio.Event()
    store_kind = "postgresql" if shared is not None else \
        "memory" if config.data_dir == "memory" else "sqlite"

    def services(trust: PeerTrust) -> dict[str, dict[str, Any]]:
        """Every service, the admin service trusting what ``trust`` trusts."""
        admin = AdminService(AdminAuth(admin_token, subjects, trust), trust, registry,
                             metrics, quotas, config, store_kind, lambda: not failed.is_set(),
                             cluster_admin)
        return {
            **service_handlers(copas_pb2_grpc.add_CopasServiceServicer_to_server, service),
            **service_handlers(admin_pb2_grpc.add_AdminServiceServicer_to_server, admin),
            **service_handlers(health_pb2_grpc.add_HealthServicer_to_server, health_servicer),
            **reflection.services((SERVICE_NAME, ADMIN_SERVICE_NAME, health.SERVICE_NAME))}
    gateway.install(bound.server, services(public))
    if bound.internal is not None:  # the same services; the cluster key counts only here
        internal_trust = PeerTrust(None, proxies, keys)
        Gateway(metrics, quotas, registry.is_valid_token, internal_trust, router, forwarder,
                implied).install(bound.internal, services(internal_trust))
    metrics.add_gauges(lambda: _live_gauges(registry, quotas, service))
    metrics_port = 0
    http_server = None
    if config.metrics_port:
        try:
            http_server, _ = start_http_server(config.metrics_port, addr=config.metrics_host,
                                               registry=metrics.registry)
            metrics_port = http_server.server_port
        except OSError as exc:
            await bound.abandon()
            await store.close()
            raise OSError(f"cannot serve metrics on {config.metrics_host}:"
                          f"{config.metrics_port}: {exc}") from None
    if takeovers is not None:
        await takeovers.start()
    recover(registry)
    if thinker is not None:
        warm_up = asyncio.create_task(thinker.warm_up())
        warm_up.add_done_callback(lambda _: None)
    await bound.server.start()
    if bound.internal is not None:
        await bound.internal.start()
    if (page := bound.page) is not None and forwarding_key is not None:
        limits = ConnectionLimits(
            max_connections=config.web_max_connections,
            max_per_address=config.web_max_connections_per_address,
            header_timeout=config.web_header_timeout, body_timeout=config.web_body_timeout,
            exempt=proxies)
        closed = metrics.web_connections_closed
        web.start(page, forwarding_key, limits,
                  lambda reason: closed.labels(reason=reason).inc(),
                  max_message_bytes=config.max_message_bytes, grace=config.grace,
                  tls_cert=config.tls_cert, tls_key=config.tls_key,
                  tls_client_ca=config.tls_client_ca)
        metrics.add_gauges(lambda: _web_gauges(page))
    retention = asyncio.create_task(_retention(records, config.retention_interval))
    running = RunningServer(bound.server, bound.port, registry, store, health_servicer,
                            metrics, metrics_port, retention, quotas, records, takeovers, relay,
                            thinker, http_server, bound.page, failed, internal=bound.internal,
                            internal_port=bound.internal_port, cluster_admin=cluster_admin)
    running.watchers.append(asyncio.create_task(_watch_store(running)))
    if keys is not None and queries is not None:
        running.watchers.append(asyncio.create_task(keys.keep_fresh(queries)))
    await health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    await health_servicer.set(SERVICE_NAME, health_pb2.HealthCheckResponse.SERVING)
    return running


async def _watch_store(running: RunningServer) -> None:
    await fail_stop(running, await running.store.failed())


async def fail_stop(running: RunningServer, failure: StorageFailed) -> None:
    """The store failed: stop believing memory. Health NOT_SERVING, no new work, every
    stream ends with UNAVAILABLE; ``serve`` then exits non-zero."""
    if running.failure is not None:
        return
    running.failure = failure
    log.error("storage_failed", error=str(failure),
              detail="not serving; restart the server to recover from the log")
    await running.health.enter_graceful_shutdown()
    running.registry.fail_all(ServiceError.storage_failed())
    running.failed.set()


async def _retention(records: Records, interval: float) -> None:
    """Enforce the record limits now and then, off the event loop."""
    while True:
        try:
            await asyncio.to_thread(records.prune)
        except Exception as exc:  # keep sweeping; the next sweep may succeed
            log.error("retention_failed", error=str(exc))
        await asyncio.sleep(interval)


async def shutdown(running: RunningServer, grace: float) -> None:
    """Health NOT_SERVING, refuse new tables, let running RPCs finish within ``grace``."""
    running.registry.stop_accepting()
    if running.page is not None:
        running.page.begin_stop()
    await running.health.enter_graceful_shutdown()
    running.registry.close_all()
    began = time.monotonic()
    if running.page is not None:  # the browsers' calls first: they are relayed to gRPC
        await running.page.stop(grace)
    left = max(0.0, grace - (time.monotonic() - began))
    await asyncio.gather(running.server.stop(left), *(
        [running.internal.stop(left)] if running.internal is not None else []))
    running.retention.cancel()
    for task in running.watchers:
        task.cancel()
    if running.takeovers is not None:
        await running.takeovers.stop()
    if running.forwarder is not None:
        await running.forwarder.close()
    if running.cluster_admin is not None:
        await running.cluster_admin.close()
    if running.thinker is not None:  # the bots' worker processes stop with the server
        await asyncio.to_thread(running.thinker.shutdown)
    if running.failure is None:
        with contextlib.suppress(StorageFailed):
            await running.store.sync()
    await running.store.close()
    if running.metrics_http is not None:
        running.metrics_http.shutdown()
        running.metrics_http.server_close()


async def serve(config: Config) -> int:
    try:
        running = await start(config)
    except OSError as exc:
        print(f"copas-server: {exc}", file=sys.stderr)
        return EXIT_CANNOT_LISTEN
    except SetupError as exc:
        print(f"copas-server: {exc}", file=sys.stderr)
        return EXIT_BAD_SETUP
    host = config.listen.rsplit(":", 1)[0]
    scheme = "TLS" if config.tls_cert else "plaintext"
    print(f"copas-server listening on {host}:{running.port} (gRPC over {scheme}, reflection "
          "and health on)", flush=True)
    if running.metrics_port:
        print(f"metrics on http://{config.metrics_host}:{running.metrics_port}/metrics",
              flush=True)
    if running.page is not None:
        scheme = "https" if config.tls_cert else "http"
        print(f"web page on {scheme}://{config.web_host}:{running.page.port}/", flush=True)
    # What start-up made (modules, the recovered tables) lives as long as the process: moved
    # out of the collector's reach, a full collection scans only what came after, ~1 ms
    # instead of 25-33 ms with the loop held (measured under a refused-call flood).
    gc.collect()
    gc.freeze()
    log.info("server_started", listen=config.listen, port=running.port,
             metrics_port=running.metrics_port, rules_defaults=config.rule_defaults)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    stopping = asyncio.ensure_future(stop.wait())
    failing = asyncio.ensure_future(running.failed.wait())
    await asyncio.wait((stopping, failing), return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    failing.cancel()
    if running.failure is not None:
        # Calls in flight end with STORAGE_FAILED (their commits fail at once), relayed ones
        # with TABLE_MOVED (their relays closed first), not cancelled without a reason.
        if running.forwarder is not None:
            await running.forwarder.close()
        await shutdown(running, FAIL_STOP_GRACE)
        log.error("server_stopped_storage_failed", failure=str(running.failure),
                  advice="a restart recovers every table from its log")
        return EXIT_STORAGE_FAILED
    log.info("server_stopping", grace=config.grace)
    await shutdown(running, config.grace)
    log.info("server_stopped")
    return 0


def main(argv: list[str] | None = None) -> int:
    config = parse_args(argv)
    if config.workers > 0:  # a supervisor of N nodes sharing the port
        from server.workers import supervise

        return supervise(config, sys.argv[1:] if argv is None else argv)
    configure_logging(config.log_format, config.log_level, queue_lines=config.log_queue)
    return asyncio.run(serve(config))


if __name__ == "__main__":
    raise SystemExit(main())

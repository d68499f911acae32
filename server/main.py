"""copas-server: wiring only. Each part is built with its collaborators, in order, and nothing
is set on it afterwards: the gRPC server (its ports bound first, so a second server on the
same port never touches the data directory: ``server.listen``), the store, the lease and
ownership port of a cluster node, the registry of tables, the cluster's parts
(``server.cluster.build``), the gateway with the services behind it, then the web page beside
them (``server.rpc.web``). Each part's close is pushed on one stack as the part is made
(``server.lifecycle``): a failed start gives back what it made, a stop unwinds the stack.

Exit codes: 0 after SIGTERM/SIGINT; 1 when it cannot listen; 2 when the data directory or
the TLS files cannot be used (one line on stderr says why); 3 when the store failed while
serving (fail-stop: health turns NOT_SERVING, every call and stream gets UNAVAILABLE, and
the process exits so a supervisor restarts it from what the log holds).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import sys
from typing import Any

import structlog
from copas.admin.v1 import admin_pb2, admin_pb2_grpc
from copas.v1 import accounts_pb2, accounts_pb2_grpc, copas_pb2, copas_pb2_grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from prometheus_client import start_http_server

from server import names
from server.accounts.build import build_accounts, open_account_store
from server.accounts.games import GameIntake
from server.championships.build import build_championships, open_championship_store
from server.cluster.build import build as build_cluster
from server.cluster.ownership import Lease
from server.cluster.queries import PgClusterQueries
from server.cluster.shared_ownership import ClusterOwnership
from server.config import Config, parse_args
from server.lifecycle import RunningServer, Tasks, close_store, run, settle_collector
from server.listen import SetupError, bind, internal_address
from server.observability import Metrics, configure_logging
from server.rpc import reflection
from server.rpc.accounts import AccountService, sweep_bans
from server.rpc.admin import AdminService, OneProcess
from server.rpc.championships import SERVICE_NAME as CHAMPIONSHIP_SERVICE_NAME
from server.rpc.championships import championship_handlers
from server.rpc.gateway import (
    SERVE_HERE,
    CallForwarder,
    CallRouter,
    CallsInFlight,
    Gateway,
    ImpliedTables,
    Routing,
    service_handlers,
)
from server.rpc.operators import AdminAudit, AdminAuth, admin_subjects, read_admin_token
from server.rpc.peers import PeerTrust, trusted_networks
from server.rpc.quotas import Quotas
from server.rpc.service import CopasService
from server.store import Node, PgStore, Storage, StoreUnusable, open_local_store
from server.store.versions import check_data_dir, check_database
from server.tables.bots import Thinker
from server.tables.clock import LoopScheduler
from server.tables.lobby import LobbySource
from server.tables.log_entries import LOG_FORMAT
from server.tables.ownership import LocalOwnership, OwnershipPort
from server.tables.records import Records
from server.tables.recovery import recover
from server.tables.registry import TableRegistry
from server.workers import WAIT_FOR_DATABASE

__all__ = ["RunningServer", "SetupError", "internal_address", "main", "serve", "shutdown",
           "start"]
log = structlog.get_logger("copas.server")
SERVICE_NAME = copas_pb2.DESCRIPTOR.services_by_name["CopasService"].full_name
ACCOUNT_SERVICE_NAME = accounts_pb2.DESCRIPTOR.services_by_name["AccountService"].full_name
ADMIN_SERVICE_NAME = admin_pb2.DESCRIPTOR.services_by_name["AdminService"].full_name
EXIT_CANNOT_LISTEN, EXIT_BAD_SETUP, EXIT_STORAGE_FAILED = 1, 2, 3
FAIL_STOP_GRACE = 2.0  # seconds a failed server gives its calls in flight to be answered
DATABASE_PROBE = 0.25  # seconds between two connections tried while waiting for the database


async def start(config: Config) -> RunningServer:
    """Start serving (returns once listening). Tables are recovered from the store before
    the first request is served. A start that fails gives back what it made: its ports
    closed, its store closed, its workers and tasks stopped.

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
    parts = contextlib.AsyncExitStack()
    try:
        await asyncio.to_thread(names.preload)  # the names' data, off the loop, once
        bound = await bind(config)
        parts.push_async_callback(bound.abandon)  # the ports: closed last
        metrics = Metrics()
        try:
            if config.database:  # every store's version before any is opened (or migrated)
                check_database(config.database)
            else:
                check_data_dir(config.data_dir)
            shared = PgStore.open(config.database, Node(
                config.node_id or bound.advertise, bound.advertise, config.lease, bound.public,
                log_format=LOG_FORMAT),
                metrics.observe_commit) if config.database else None
            store: Storage = shared if shared is not None else \
                open_local_store(config.data_dir, metrics.observe_commit)
        except StoreUnusable as exc:
            raise SetupError(str(exc)) from None
        parts.push_async_callback(close_store, store)
        try:
            account_store = open_account_store(config)
            parts.callback(account_store.close)
            accounts = build_accounts(config, account_store)
            championship_store = open_championship_store(config)
            parts.callback(championship_store.close)
        except (StoreUnusable, ValueError) as exc:
            raise SetupError(str(exc)) from None
        thinker = Thinker(config.bot_workers, config.bot_think_seconds) \
            if config.bot_workers > 0 else None
        if thinker is not None:  # the bots' worker processes stop with the server
            parts.push_async_callback(asyncio.to_thread, thinker.shutdown)
        quotas = Quotas(config)
        scheduler = LoopScheduler()
        queries = PgClusterQueries(shared) if shared is not None else None
        lease = Lease(queries) if queries is not None else None
        ownership: OwnershipPort = ClusterOwnership(shared, lease) \
            if shared is not None and lease is not None else LocalOwnership()
        registry = TableRegistry(config.registry_settings(), config.table_settings(), metrics,
                                 store, scheduler, ownership, thinker)
        records = Records(store, scheduler, config.keep_records, config.keep_records_days)
        champs = build_championships(config, championship_store, registry, metrics,
                                     config.node_id or bound.advertise)
        lobby: LobbySource = registry.lobby
        router: CallRouter = SERVE_HERE
        forwarder: CallForwarder = SERVE_HERE
        implied: ImpliedTables = SERVE_HERE
        cluster = None
        if queries is not None and lease is not None:
            cluster = await build_cluster(config, registry, queries, lease,
                                          bound.relay_credentials)
            parts.push_async_callback(cluster.close)
            metrics.add_gauges(cluster.gauges)
            lobby, router, forwarder, implied = (cluster.lobby, cluster.router, cluster.relay,
                                                 cluster.match)
        forwarding_key = secrets.token_urlsafe(32) if bound.page is not None else None
        health_servicer = health.aio.HealthServicer()
        service = CopasService(registry, lobby, records, quotas, accounts,
                               champs.championships.is_published)
        account_service = AccountService(accounts, metrics)
        failed = asyncio.Event()
        calls = CallsInFlight()  # both ports' calls, answered with a reason at a fail-stop
        store_kind = "postgresql" if shared is not None else \
            "memory" if config.data_dir == "memory" else "sqlite"

        def install(server: Any, trust: PeerTrust) -> None:
            """Every service behind a gateway, the admin service trusting what ``trust``
            trusts."""
            admin = AdminService(trust, registry, quotas, config, store_kind,
                                 lambda: not failed.is_set(),
                                 cluster.admin if cluster is not None else OneProcess(),
                                 accounts, champs.championships)
            audit = AdminAudit(AdminAuth(admin_token, subjects, trust), trust, metrics)
            admin_routing = Routing(cluster.admin_router, cluster.admin, check=audit) \
                if cluster is not None else Routing(check=audit)
            Gateway(metrics, quotas, registry.is_valid_token, trust, router, forwarder,
                    implied, {ADMIN_SERVICE_NAME: admin_routing,
                              ACCOUNT_SERVICE_NAME: Routing(),
                              CHAMPIONSHIP_SERVICE_NAME: Routing()}, calls).install(server, {
                        **service_handlers(copas_pb2_grpc.add_CopasServiceServicer_to_server,
                                           service),
                        **service_handlers(admin_pb2_grpc.add_AdminServiceServicer_to_server,
                                           admin),
                        **service_handlers(
                            accounts_pb2_grpc.add_AccountServiceServicer_to_server,
                            account_service),
                        **service_handlers(health_pb2_grpc.add_HealthServicer_to_server,
                                           health_servicer),
                        **championship_handlers(
                            champs.championships, accounts, champs.tables.summary,
                            watchers_per_address=config.championship_watchers_per_address,
                            tick=config.championship_watch_tick,
                            recheck=config.championship_watch_recheck),
                        **reflection.services((SERVICE_NAME, ACCOUNT_SERVICE_NAME,
                                               ADMIN_SERVICE_NAME, CHAMPIONSHIP_SERVICE_NAME,
                                               health.SERVICE_NAME))})

        install(bound.server, PeerTrust(forwarding_key, proxies))
        if bound.internal is not None:  # the same services; the cluster key counts only here
            install(bound.internal, PeerTrust(None, proxies,
                                              cluster.keys if cluster is not None else None))
        for gauges in (registry.gauges, quotas.gauges, service.gauges, account_service.gauges,
                       champs.driver.gauges):
            metrics.add_gauges(gauges)
        metrics_port = 0
        if config.metrics_port:
            try:
                http_server, _ = start_http_server(
                    config.metrics_port, addr=config.metrics_host, registry=metrics.registry)
            except OSError as exc:
                raise OSError(f"cannot serve metrics on {config.metrics_host}:"
                              f"{config.metrics_port}: {exc}") from None
            parts.callback(http_server.server_close)  # once its thread ends (below):
            parts.callback(http_server.shutdown)
            metrics_port = http_server.server_port
        if cluster is not None:
            await cluster.takeovers.start()
            parts.push_async_callback(cluster.takeovers.stop)
        recover(registry)
        tasks = Tasks()
        parts.push_async_callback(tasks.close)
        await bound.start()
        if bound.page is not None and forwarding_key is not None:
            from server.rpc import web  # imported only with a page: start-up stays quick
            web.start_page(bound.page, forwarding_key, config, proxies, metrics)
        running = RunningServer(bound.port, metrics_port, bound.internal_port, registry, store,
                                records, quotas, metrics, health_servicer, bound.page,
                                cluster, calls, failed, parts)
        tasks.spawn(records.keep_pruned(config.retention_interval))
        tasks.spawn(running.watch_store())
        tasks.spawn(sweep_bans(registry, accounts))
        tasks.spawn(accounts.sweep_forever())
        recorded = metrics.account_games
        tasks.spawn(GameIntake(accounts, store, on_recorded=lambda is_rated: recorded.labels(
            rated="yes" if is_rated else "no").inc()).run())
        tasks.spawn(champs.driver.run())  # after recovery: its tables are here again
        if champs.notices is not None:
            champs.notices.start()
            parts.push_async_callback(champs.notices.stop)
        if cluster is not None:
            tasks.spawn(cluster.keys.keep_fresh(cluster.queries))
        parts.push_async_callback(running.stop_serving, bound)  # the first step of a stop
        await health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
        await health_servicer.set(SERVICE_NAME, health_pb2.HealthCheckResponse.SERVING)
    except BaseException:
        await parts.aclose()
        raise
    return running


async def shutdown(running: RunningServer, grace: float) -> None:
    """Stop ``running``: ``running.stop(grace)``."""
    await running.stop(grace)


async def wait_for_database(config: Config) -> bool:
    """Until a connection to ``config.database`` is made (the wait said once on stderr);
    False when a SIGTERM or SIGINT came first."""
    import psycopg

    from server.store.pg_connection import connect

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    told = False
    try:
        while not stop.is_set():
            began = loop.time()
            try:
                await asyncio.to_thread(
                    lambda: connect(config.database, connect_timeout=2).close())
                return True
            except psycopg.Error as exc:
                if not told:
                    first = str(exc).strip().splitlines()[:1] or [type(exc).__name__]
                    print(f"copas-server: {config.node_id or 'this node'} waits for the "
                          f"database ({first[0]})", file=sys.stderr, flush=True)
                    told = True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), max(0.0, DATABASE_PROBE -
                                                        (loop.time() - began)))
        return False
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)


async def serve(config: Config) -> int:
    # A worker started again by --workers' supervisor after it stopped for the database's
    # sake (server/workers.py) waits for it here, its code loaded, instead of a start refused.
    if config.database and os.environ.get(WAIT_FOR_DATABASE) == "1" \
            and not await wait_for_database(config):
        return 0  # stopped while waiting
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
    settle_collector()
    log.info("server_started", listen=config.listen, port=running.port,
             metrics_port=running.metrics_port, rules_defaults=config.rule_defaults)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(running.failed.wait())]
    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for wait in waits:
        wait.cancel()
    await asyncio.gather(*waits, return_exceptions=True)
    if running.failure is not None:  # every call in flight answered with its reason
        await running.stop_failed(FAIL_STOP_GRACE)
        log.error("server_stopped_storage_failed", failure=str(running.failure),
                  advice="a restart recovers every table from its log")
        return EXIT_STORAGE_FAILED
    log.info("server_stopping", grace=config.grace)
    await running.stop(config.grace)
    log.info("server_stopped")
    return 0


def main(argv: list[str] | None = None) -> int:
    config = parse_args(argv)
    if config.workers > 0:  # a supervisor of N nodes sharing the port
        from server.workers import supervise

        return supervise(config, sys.argv[1:] if argv is None else argv)
    configure_logging(config.log_format, config.log_level, queue_lines=config.log_queue)
    return run(serve(config), config.event_loop)


if __name__ == "__main__":
    raise SystemExit(main())

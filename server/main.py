"""copas-server: start the gRPC server with health, reflection, metrics and logs."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Iterable
from dataclasses import dataclass

import grpc
import structlog
from copas.v1 import copas_pb2, copas_pb2_grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from prometheus_client import start_http_server
from prometheus_client.core import GaugeMetricFamily

from server.config import Config, parse_args
from server.observability import Metrics, configure_logging
from server.service import CopasService, ObservabilityInterceptor
from server.storage import open_storage
from server.tables import TableManager

log = structlog.get_logger("copas.server")
SERVICE_NAME = copas_pb2.DESCRIPTOR.services_by_name["CopasService"].full_name


@dataclass
class RunningServer:
    server: grpc.aio.Server
    port: int
    tables: TableManager
    health: health.aio.HealthServicer
    metrics: Metrics
    metrics_port: int
    retention: asyncio.Task[None]


def _live_gauges(tables: TableManager) -> Iterable[GaugeMetricFamily]:
    by_phase = GaugeMetricFamily("copas_tables", "Tables by phase", labels=["phase"])
    counts: dict[str, int] = {name: 0 for name in copas_pb2.Phase.keys()[1:]}
    connected = watchers = 0
    for table in tables.live():
        counts[copas_pb2.Phase.Name(table.phase)] += 1  # type: ignore[arg-type]
        watchers += len(table.watchers)
        connected += sum(1 for s in table.seats if s.connections > 0)
    for phase, count in counts.items():
        by_phase.add_metric([phase.removeprefix("PHASE_").lower()], count)
    yield by_phase
    seats = GaugeMetricFamily("copas_seats_connected", "Player seats with a stream open")
    seats.add_metric([], connected)
    yield seats
    streams = GaugeMetricFamily("copas_watch_streams", "WatchTable streams open")
    streams.add_metric([], watchers)
    yield streams


async def start(config: Config) -> RunningServer:
    """Start serving (returns once listening). Raises OSError when the port is taken.
    Tables are recovered from the data directory before the first request is served."""
    metrics = Metrics()
    server = grpc.aio.server(
        interceptors=[ObservabilityInterceptor(metrics)],
        options=[
            ("grpc.so_reuseport", 0),  # a second server on a taken port must fail, not share
            ("grpc.max_concurrent_streams", config.max_concurrent_streams),
            # grpc core refuses calls beyond 1000 (soft) / 3000 (hard) waiting to be picked
            # up: a reconnect storm after a restart must not be dropped, so size them.
            ("grpc.server.max_pending_requests", config.max_pending_requests),
            ("grpc.server.max_pending_requests_hard_limit", config.max_pending_requests),
            ("grpc.keepalive_time_ms", 60_000),
            ("grpc.http2.max_pings_without_data", 0),
        ],
        maximum_concurrent_rpcs=None,
    )
    try:  # bind first: a second server on the same port must not touch the data directory
        port = server.add_insecure_port(config.listen)
    except RuntimeError as exc:
        raise OSError(f"cannot listen on {config.listen}: {exc}") from None
    if port == 0:
        raise OSError(f"cannot listen on {config.listen}: address in use or unavailable")
    storage = open_storage(config.data_dir)
    tables = TableManager(config, metrics, storage)
    metrics.add_gauges(lambda: _live_gauges(tables))
    copas_pb2_grpc.add_CopasServiceServicer_to_server(CopasService(tables), server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (SERVICE_NAME, reflection.SERVICE_NAME, health.SERVICE_NAME), server)
    metrics_port = 0
    if config.metrics_port:
        try:
            http_server, _ = start_http_server(config.metrics_port, addr=config.metrics_host,
                                               registry=metrics.registry)
            metrics_port = http_server.server_port
        except OSError as exc:
            await server.stop(None)
            await storage.close()
            raise OSError(f"cannot serve metrics on {config.metrics_host}:"
                          f"{config.metrics_port}: {exc}") from None
    tables.recover()
    await server.start()
    retention = asyncio.create_task(_retention(tables, config.retention_interval))
    await health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    await health_servicer.set(SERVICE_NAME, health_pb2.HealthCheckResponse.SERVING)
    return RunningServer(server, port, tables, health_servicer, metrics, metrics_port,
                         retention)


async def _retention(tables: TableManager, interval: float) -> None:
    """Enforce the record limits now and then, off the event loop."""
    while True:
        try:
            await asyncio.to_thread(tables.prune_records)
        except Exception as exc:  # keep sweeping; the next sweep may succeed
            log.error("retention_failed", error=str(exc))
        await asyncio.sleep(interval)


async def shutdown(running: RunningServer, grace: float) -> None:
    """Health NOT_SERVING, refuse new tables, let running RPCs finish within ``grace``."""
    running.tables.is_accepting = False
    await running.health.enter_graceful_shutdown()
    running.tables.close_all()
    await running.server.stop(grace)
    running.retention.cancel()
    await running.tables.storage.sync()
    await running.tables.storage.close()


async def serve(config: Config) -> int:
    try:
        running = await start(config)
    except OSError as exc:
        print(f"copas-server: {exc}", file=sys.stderr)
        return 1
    host = config.listen.rsplit(":", 1)[0]
    print(f"copas-server listening on {host}:{running.port} (gRPC, reflection and health on)",
          flush=True)
    if running.metrics_port:
        print(f"metrics on http://{config.metrics_host}:{running.metrics_port}/metrics",
              flush=True)
    log.info("server_started", listen=config.listen, port=running.port,
             metrics_port=running.metrics_port, rules_defaults=config.rule_defaults)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("server_stopping", grace=config.grace)
    await shutdown(running, config.grace)
    log.info("server_stopped")
    return 0


def main(argv: list[str] | None = None) -> int:
    config = parse_args(argv)
    configure_logging(config.log_format, config.log_level)
    return asyncio.run(serve(config))


if __name__ == "__main__":
    raise SystemExit(main())

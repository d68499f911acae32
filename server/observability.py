"""Metrics (Prometheus) and logs (structlog): what operators see."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterable
from typing import Any

import structlog
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector


class Metrics:
    """The server's metrics, in their own registry (so tests can run several servers)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        # The standard process_*, python_info and python_gc_* metrics.
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        GCCollector(registry=r)
        self.actions = Counter("copas_actions_total", "Player actions by kind and result",
                               ["kind", "result"], registry=r)
        self.rpc_latency = Histogram(
            "copas_rpc_duration_seconds", "RPC latency by method and status code",
            ["method", "code"], registry=r,
            buckets=(.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10))
        self.stream_lifetime = Histogram(
            "copas_stream_duration_seconds", "How long server streams stayed open, by method "
            "and the status they ended with", ["method", "code"], registry=r,
            buckets=(.1, 1, 10, 60, 300, 900, 1800, 3600, 7200))
        self.tables_quarantined = Gauge(
            "copas_tables_quarantined",
            "Tables whose log did not replay at start (kept, retried at the next start)",
            registry=r)
        self.quota_refusals = Counter(
            "copas_quota_refusals_total", "Calls refused for a per-client quota, by reason",
            ["reason"], registry=r)
        self.timeouts = Counter("copas_timeouts_total", "Turns that timed out, by phase",
                                ["phase"], registry=r)
        self.leavers = Counter("copas_leavers_total", "Players who left a running game",
                               registry=r)
        self.games_finished = Counter("copas_games_finished_total", "Games finished",
                                      ["reason"], registry=r)
        self.moons = Counter("copas_moons_total", "Moons shot", registry=r)
        self.tables_failed = Counter(
            "copas_tables_failed_total",
            "Tables whose log could not be replayed at a start (quarantined)", registry=r)
        self.events = Counter("copas_table_events_total", "Table events published", registry=r)
        self.snapshots_for_slow = Counter(
            "copas_watcher_resyncs_total",
            "Watchers that fell behind and got a fresh snapshot instead of the backlog",
            registry=r)

    def add_gauges(self, collect: Callable[[], Iterable[GaugeMetricFamily]]) -> None:
        """Gauges computed at scrape time from the live state (tables, seats, streams)."""

        class _Live(Collector):
            def collect(self) -> Iterable[GaugeMetricFamily]:
                return collect()

        self.registry.register(_Live())


class TolerantFile:
    """Where log lines go; a line that cannot be written (a closed pipe, a full disk) is
    dropped and counted, never raised into the request or table step that logged it."""

    def __init__(self, file: Any) -> None:
        self.file = file
        self.dropped = 0

    def write(self, text: str) -> int:
        try:
            return int(self.file.write(text))
        except (OSError, ValueError):
            self.dropped += 1
            return 0

    def flush(self) -> None:
        try:
            self.file.flush()
        except (OSError, ValueError):
            self.dropped += 1


def configure_logging(fmt: str = "auto", level: str = "info", file: Any = None,
                      cache: bool = True) -> None:
    """JSON lines when not on a terminal (or asked), console otherwise; context from
    contextvars (table_id, seat, rpc, request_id)."""
    use_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    # Tracebacks as plain text (never with local variables, which may hold a token).
    renderer: Any = (structlog.processors.JSONRenderer() if use_json
                     else structlog.dev.ConsoleRenderer(
                         colors=False, exception_formatter=structlog.dev.plain_traceback))
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if use_json:
        processors.append(structlog.processors.format_exc_info)
    structlog.configure(
        processors=[*processors, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping().get(level.upper(), logging.INFO)),
        logger_factory=structlog.PrintLoggerFactory(file=TolerantFile(file or sys.stderr)),
        cache_logger_on_first_use=cache,
    )

"""Metrics (Prometheus) and logs (structlog): what operators see."""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import importlib.metadata
import logging
import queue
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any, TextIO

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
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

LOG_QUEUE = 10_000  # log lines waiting for the writer thread before new ones are dropped
GAUGES_WAIT = 5.0  # seconds a scrape waits for the event loop (under Prometheus's 10 s timeout)


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
        self.move_to_view = Histogram(
            "copas_move_to_view_seconds", "From a move (or timer, or bot move) taken by its "
            "table to its event written on each watching stream: the commit, the fan-out "
            "and the stream's write", registry=r,  # 0.04: a p99 under 50 ms shows as one
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.04, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5))
        self.commit_duration = Histogram(
            "copas_commit_duration_seconds", "How long one group commit took (the store's "
            "transaction)", registry=r,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1))
        self.commit_batch = Histogram(
            "copas_commit_batch_writes", "Writes in one group commit", registry=r,
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024))
        self.bot_decision = Histogram(
            "copas_bot_decision_seconds", "How long a bot took to choose its move, by how "
            "it was chosen (pool: the strong bot's workers; here: in the server)",
            ["where"], registry=r,
            buckets=(0.0001, 0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5))
        self.championship_rounds = Counter(
            "copas_championship_rounds_seated_total", "Championship rounds this node seated",
            registry=r)
        self.championship_seating = Histogram(
            "copas_championship_seating_seconds", "How long seating one championship round "
            "took: the seating, its tables made and their seats taken, on disk", registry=r,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5))
        self.build_info = Gauge("copas_build_info", "The server's version (always 1)",
                                ["version"], registry=r)
        self.build_info.labels(version=version()).set(1)
        self.admin_actions = Counter(
            "copas_admin_actions_total", "AdminService calls, by method and outcome (ok, or the "
            "refusal's reason)", ["method", "outcome"], registry=r)
        self.sign_ins = Counter(
            "copas_sign_ins_total", "AccountService sign-ins and refreshes, by method (device, "
            "password, oidc, sign_up, refresh) and outcome (ok, or the refusal's reason)",
            ["method", "outcome"], registry=r)
        self.account_games = Counter(
            "copas_account_games_recorded_total", "Finished games taken into their accounts' "
            "histories, by whether they moved ratings", ["rated"], registry=r)
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
        self.snapshot_lists = Counter(
            "copas_snapshot_lists_built_total",
            "Snapshots' lists of missed events serialized (the others came from the cache "
            "kept until the table's next event)", registry=r)
        self.web_connections_closed = Counter(
            "copas_web_connections_closed",
            "Web port connections closed or refused for a limit, by reason: header_timeout, "
            "body_timeout, handshake_timeout (TLS), write_timeout (its answers unread), "
            "per_address (refused), streams_per_address (a stream refused), evicted (made room "
            "for a new one), stream_evicted (the heaviest address's stream made room), full "
            "(refused: every connection busy)", ["reason"], registry=r)
        r.register(_DroppedLines())

    def observe_commit(self, seconds: float, writes: int) -> None:
        self.commit_duration.observe(seconds)
        self.commit_batch.observe(writes)

    def add_gauges(self, collect: Callable[[], Iterable[Metric]]) -> None:
        """Gauges (and counters kept by their owners) computed at scrape time from the live
        state (tables, seats, streams). The scrape runs in the metrics server's thread, but the
        state belongs to the event loop: ``collect`` runs on the loop (called from a running
        loop, on that one), all of it in one slice, so it reads a consistent snapshot and
        never a dict another thread is changing."""
        loop = _running_loop()

        class _Live(Collector):
            def collect(self) -> Iterable[Metric]:
                return on_loop(loop, collect)

        self.registry.register(_Live())


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def on_loop(loop: asyncio.AbstractEventLoop | None, collect: Callable[[], Iterable[Metric]]
            ) -> list[Metric]:
    """``collect()``'s metrics, computed on ``loop``'s thread (here when this is that thread,
    or there is no loop); none when the loop has stopped or does not answer in GAUGES_WAIT."""
    if loop is None or _running_loop() is loop:
        return list(collect())
    answer: concurrent.futures.Future[list[Metric]] = concurrent.futures.Future()

    def compute() -> None:
        try:
            answer.set_result(list(collect()))
        except BaseException as exc:  # the scrape fails with it, not the loop
            answer.set_exception(exc)

    try:
        loop.call_soon_threadsafe(compute)
        return answer.result(GAUGES_WAIT)
    except (RuntimeError, concurrent.futures.TimeoutError):  # the loop is closed or stuck
        return []


def gauges(*rows: tuple[str, str, float]) -> Iterable[GaugeMetricFamily]:
    """One gauge without labels per ``(name, help, value)``, for a part's ``gauges()``."""
    for name, text, value in rows:
        gauge = GaugeMetricFamily(name, text)
        gauge.add_metric([], value)
        yield gauge


def version() -> str:
    """The installed copas package's version."""
    try:
        return importlib.metadata.version("copas")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


class _DroppedLines(Collector):
    def collect(self) -> Iterable[CounterMetricFamily]:
        yield CounterMetricFamily(
            "copas_log_lines_dropped",
            "Log lines dropped: the log's reader stalled, or its file refused them",
            value=log_lines_dropped())


class LineWriter:
    """Where log lines go, without ever holding the event loop: a line joins a bounded queue
    and one writer thread writes it out. When the queue is full (nobody reads the pipe, a log
    shipper stalled) or the file refuses it (closed, a full disk), the line is dropped and
    counted (``copas_log_lines_dropped_total``), never raised into the request or the table
    step that logged it."""

    def __init__(self, file: TextIO, capacity: int = LOG_QUEUE) -> None:
        self._file = file
        self._lines: queue.Queue[str | None] = queue.Queue(maxsize=capacity)
        self.dropped = 0  # written only by the logging side and the writer, read by metrics
        self._thread = threading.Thread(target=self._write_lines, name="copas-log",
                                        daemon=True)
        self._thread.start()

    def line(self, text: str) -> None:
        try:
            self._lines.put_nowait(text)
        except queue.Full:
            self.dropped += 1

    def _write_lines(self) -> None:
        while (text := self._lines.get()) is not None:
            try:
                self._file.write(text + "\n")
                self._file.flush()
            except (OSError, ValueError):
                self.dropped += 1

    def close(self, timeout: float = 1.0) -> None:
        """Write what is queued (for at most ``timeout`` seconds), then stop."""
        with contextlib.suppress(queue.Full):
            self._lines.put(None, timeout=timeout)
        self._thread.join(timeout)


class _QueuedLogger:
    """structlog's logger: every level, one rendered line to the writer."""

    def __init__(self, writer: LineWriter) -> None:
        self._writer = writer

    def msg(self, message: str) -> None:
        self._writer.line(message)

    log = debug = info = warn = warning = error = critical = exception = fatal = msg


_writers: list[LineWriter] = []


def log_lines_dropped() -> int:
    """Log lines dropped since the process started (the queue was full, or the file said
    no)."""
    return sum(w.dropped for w in _writers)


class _LibraryRecords(logging.Handler):
    """The libraries' stdlib log records (grpc, asyncio, uvicorn) rendered as the server's
    own lines and handed to the same writer: nothing writes to stderr from the event loop."""

    def __init__(self, writer: LineWriter, formatter: logging.Formatter) -> None:
        super().__init__()
        self.writer = writer
        self.setFormatter(formatter)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.writer.line(self.format(record))
        except Exception:  # a record that does not render: dropped and counted, not raised
            self.writer.dropped += 1


def configure_logging(fmt: str = "auto", level: str = "info", file: TextIO | None = None,
                      cache: bool = True, queue_lines: int = LOG_QUEUE) -> LineWriter:
    """JSON lines when not on a terminal (or asked), console otherwise; context from
    contextvars (table_id, seat, rpc, request_id); written by a ``LineWriter`` holding at most
    ``queue_lines`` lines for a stalled reader. The standard library's loggers (warnings and
    above) go the same way."""
    for old in _writers:
        old.close()
    _writers.clear()
    writer = LineWriter(file or sys.stderr, queue_lines)
    _writers.append(writer)
    atexit.register(writer.close)
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
        logger_factory=lambda *_: _QueuedLogger(writer),
        cache_logger_on_first_use=cache,
    )
    root = logging.getLogger()
    for handler in list(root.handlers):
        if isinstance(handler, _LibraryRecords):
            root.removeHandler(handler)
    root.addHandler(_LibraryRecords(writer, structlog.stdlib.ProcessorFormatter(
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        foreign_pre_chain=[structlog.stdlib.add_logger_name, *processors])))
    root.setLevel(max(logging.WARNING,
                      logging.getLevelNamesMapping().get(level.upper(), logging.INFO)))
    return writer

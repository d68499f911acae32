"""Server configuration: flags, each with an environment variable and an embedded default."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Config:
    listen: str = "localhost:50051"
    metrics_port: int = 9464  # 0 = no metrics endpoint
    metrics_host: str = "localhost"
    max_tables: int = 10_000
    max_players: int = 40_000  # human seats taken across the server
    max_watchers_per_table: int = 64
    watcher_queue: int = 512  # messages a watcher may fall behind before it gets a snapshot
    history: int = 1024  # events per table kept for reconnecting watchers
    finished_table_ttl: float = 600.0  # seconds a finished table stays for late watchers
    grace: float = 5.0  # seconds running RPCs get on SIGTERM
    allow_seed: bool = False
    # Defaults for tables that do not set their own (None = the rules' own defaults).
    rule_defaults: dict[str, float] = field(default_factory=dict)
    log_format: str = "auto"  # auto (console on a terminal, else JSON), json, console
    log_level: str = "info"
    max_concurrent_streams: int = 20_000
    max_pending_requests: int = 100_000
    data_dir: str = "data"  # "memory" = nothing survives a restart
    keep_records: int = 0  # 0 = no limit
    keep_records_days: float = 0.0  # 0 = no limit
    retention_interval: float = 60.0


_TIMING = ("play_timeout", "pass_timeout", "moon_timeout", "trick_pause", "hand_pause")


def _env(name: str, default: Any) -> Any:
    return os.environ.get(f"COPAS_{name.upper()}", default)


def parse_args(argv: list[str] | None = None) -> Config:
    p = argparse.ArgumentParser(
        prog="copas-server",
        description="Copas (Hearts) authoritative game server. Every flag also reads the "
                    "environment variable COPAS_<FLAG> (e.g. COPAS_LISTEN).")
    p.add_argument("--listen", default=_env("listen", Config.listen),
                   help="host:port for gRPC (default %(default)s)")
    p.add_argument("--metrics-port", type=int, default=int(_env("metrics_port",
                                                                Config.metrics_port)),
                   help="Prometheus metrics HTTP port, 0 to disable (default %(default)s)")
    p.add_argument("--metrics-host", default=_env("metrics_host", Config.metrics_host),
                   help="metrics HTTP address (default %(default)s)")
    p.add_argument("--max-tables", type=int, default=int(_env("max_tables", Config.max_tables)))
    p.add_argument("--max-players", type=int,
                   default=int(_env("max_players", Config.max_players)),
                   help="human seats taken across the server")
    p.add_argument("--max-watchers-per-table", type=int,
                   default=int(_env("max_watchers_per_table", Config.max_watchers_per_table)))
    p.add_argument("--watcher-queue", type=int,
                   default=int(_env("watcher_queue", Config.watcher_queue)),
                   help="messages a watcher may fall behind before it gets a fresh snapshot")
    p.add_argument("--history", type=int, default=int(_env("history", Config.history)),
                   help="events kept per table for reconnecting watchers")
    p.add_argument("--finished-table-ttl", type=float,
                   default=float(_env("finished_table_ttl", Config.finished_table_ttl)),
                   help="seconds a finished table is kept for late watchers")
    p.add_argument("--grace", type=float, default=float(_env("grace", Config.grace)),
                   help="seconds running RPCs get to finish on SIGTERM")
    p.add_argument("--allow-seed", action="store_true",
                   default=_env("allow_seed", "") in ("1", "true", "yes"),
                   help="accept CreateTable's explicit seed (tests, replays, fixed deals)")
    for name in _TIMING:
        flag = name.replace("_", "-")
        p.add_argument(f"--{flag}", type=float, default=_env(name, None),
                       help=f"default {name.replace('_', ' ')} in seconds for new tables")
    p.add_argument("--data-dir", default=_env("data_dir", Config.data_dir),
                   help="directory of the SQLite database (tables' logs, game records); "
                        "'memory' keeps nothing across restarts (default %(default)s)")
    p.add_argument("--keep-records", type=int,
                   default=int(_env("keep_records", Config.keep_records)),
                   help="finished-game records to keep, newest first; 0 = all")
    p.add_argument("--keep-records-days", type=float,
                   default=float(_env("keep_records_days", Config.keep_records_days)),
                   help="days to keep finished-game records; 0 = forever")
    p.add_argument("--retention-interval", type=float,
                   default=float(_env("retention_interval", Config.retention_interval)),
                   help="seconds between retention sweeps")
    p.add_argument("--log-format", choices=("auto", "json", "console"),
                   default=_env("log_format", "auto"))
    p.add_argument("--log-level", default=_env("log_level", "info"))
    args = p.parse_args(argv)
    defaults = {name: float(getattr(args, name)) for name in _TIMING
                if getattr(args, name) is not None}
    return Config(listen=args.listen, metrics_port=args.metrics_port,
                  metrics_host=args.metrics_host, max_tables=args.max_tables,
                  max_players=args.max_players,
                  max_watchers_per_table=args.max_watchers_per_table,
                  watcher_queue=args.watcher_queue, history=args.history,
                  finished_table_ttl=args.finished_table_ttl, grace=args.grace,
                  allow_seed=args.allow_seed, rule_defaults=defaults,
                  log_format=args.log_format, log_level=args.log_level,
                  data_dir=args.data_dir, keep_records=args.keep_records,
                  keep_records_days=args.keep_records_days,
                  retention_interval=args.retention_interval)

"""Server configuration: flags, each with an environment variable and an embedded default."""

from __future__ import annotations

import argparse
import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Config:
    listen: str = "localhost:50051"
    metrics_port: int = 9464  # 0 = no metrics endpoint
    metrics_host: str = "localhost"
    web_port: int = 8080  # the web page and the contract over Connect; 0 = off
    web_host: str = "localhost"
    web_max_connections: int = 1024  # browser connections at once (HTTP 503 beyond)
    # What clients can make the server hold.
    max_tables: int = 10_000  # tables not finished
    max_players: int = 40_000  # people seated in games not finished
    max_bot_tables: int = 64  # tables of bots only, playing at once
    max_watchers_per_table: int = 64  # spectators; players' streams have their own slots
    max_streams_per_token: int = 4
    watcher_queue: int = 512  # messages a watcher may fall behind before it gets a snapshot
    watcher_buffer_bytes: int = 64 * 1024  # bytes a watcher may fall behind
    history: int = 1024  # events per table kept for reconnecting watchers
    finished_table_ttl: float = 600.0  # seconds a finished table stays for late watchers
    waiting_table_ttl: float = 600.0  # seconds a waiting table with nobody connected stays
    abandon_after: float = 900.0  # seconds without a person's move before a game ends
    bot_table_pace: float = 0.5  # seconds between moves at a table of bots only
    bot_policy: str = "mc"  # how bot seats play unless a table says otherwise
    bot_workers: int = 1  # processes the bots think in (0: none; bots then play "auto")
    bot_think_seconds: float = 0.1  # a bot's time budget per decision
    min_timeout: float = 1.0  # the shortest turn time limit a table may ask for (0 = none)
    max_point_limit: int = 1000
    max_hands_limit: int = 100
    # Quotas per client (0 = no limit).
    peer_calls_per_second: float = 50.0
    peer_calls_burst: float = 200.0
    token_calls_per_second: float = 20.0
    token_calls_burst: float = 60.0
    tables_per_minute: float = 60.0
    tables_burst: float = 30.0
    joins_per_minute: float = 240.0
    joins_burst: float = 60.0
    max_streams_per_peer: int = 1024
    quota_penalty: float = 1.0  # seconds before a call over a quota is answered
    trusted_proxies: str = ""  # addresses/networks whose x-forwarded-for names the client
    grace: float = 5.0  # seconds running RPCs get on SIGTERM
    allow_seed: bool = False
    # Defaults for tables that do not set their own (None = the rules' own defaults).
    rule_defaults: dict[str, float] = field(default_factory=dict)
    log_format: str = "auto"  # auto (console on a terminal, else JSON), json, console
    log_level: str = "info"
    max_concurrent_streams: int = 256  # calls at once on one HTTP/2 connection
    max_pending_requests: int = 100_000
    max_message_bytes: int = 64 * 1024  # the largest request accepted
    data_dir: str = "data"  # "memory" = nothing survives a restart
    database: str = ""  # postgresql://...: the shared store of a cluster (else data_dir)
    node_id: str = ""  # this node's id in a cluster (default: from --advertise)
    advertise: str = ""  # host:port other nodes reach this one at (default: --listen's)
    lease: float = 10.0  # seconds a node's ownership of its tables lasts without renewal
    workers: int = 0  # start this many nodes sharing the port (SO_REUSEPORT); needs --database
    reuse_port: bool = False  # share --listen with other nodes (set for --workers' nodes)
    internal_listen: str = ""  # a second address of its own (a worker's, for forwarding)
    keep_records: int = 0  # 0 = no limit
    keep_records_days: float = 0.0  # 0 = no limit
    retention_interval: float = 60.0
    tls_cert: str = ""  # PEM files; with both, the server speaks TLS only
    tls_key: str = ""
    tls_client_ca: str = ""  # with it, clients must present a certificate it signed


_TIMING = ("play_timeout", "pass_timeout", "moon_timeout", "trick_pause", "hand_pause")

_HELP = {
    "listen": "host:port for gRPC",
    "metrics_port": "Prometheus metrics HTTP port, 0 to disable",
    "metrics_host": "metrics HTTP address",
    "web_port": "HTTP port of the web page (and the contract over Connect for it), 0 to disable",
    "web_host": "web page address",
    "web_max_connections": "browser connections at once (HTTP 503 beyond)",
    "max_tables": "tables not yet finished (RESOURCE_EXHAUSTED SERVER_FULL beyond)",
    "max_players": "people seated in games not yet finished",
    "max_bot_tables": "tables of bots only that play at once",
    "max_watchers_per_table": "spectator streams per table (players have their own slots)",
    "max_streams_per_token": "streams one player token may hold open",
    "watcher_queue": "messages a watcher may fall behind before it gets a fresh snapshot",
    "watcher_buffer_bytes": "bytes a watcher may fall behind before it gets a fresh snapshot",
    "history": "events kept per table for reconnecting watchers",
    "finished_table_ttl": "seconds a finished table is kept for late watchers",
    "waiting_table_ttl": "seconds a table waiting for players stays with nobody connected",
    "abandon_after": "seconds without a move by a person before a game ends (ABANDONED)",
    "bot_table_pace": "seconds between moves at a table of bots only",
    "bot_policy": "how bot seats play unless a table says: mc (strong), duck, greedy, random "
                  "or auto (the timeout rules' choices)",
    "bot_workers": "processes the bots think in, off the event loop (0: bots play auto)",
    "bot_think_seconds": "a bot's time budget per decision",
    "min_timeout": "shortest play, pass or moon time limit a table may ask for (a limit of 0, "
                   "none, is always allowed)",
    "max_point_limit": "largest point_limit a table may ask for",
    "max_hands_limit": "largest max_hands a table may ask for",
    "peer_calls_per_second": "calls per second from one address without a player token",
    "peer_calls_burst": "calls at once from one address without a player token",
    "token_calls_per_second": "calls per second with one player token",
    "token_calls_burst": "calls at once with one player token",
    "tables_per_minute": "tables one address may create per minute",
    "tables_burst": "tables one address may create at once",
    "joins_per_minute": "joins per minute from one address",
    "joins_burst": "joins at once from one address",
    "max_streams_per_peer": "open WatchTable streams per address",
    "quota_penalty": "seconds before a call over a quota is answered (slows floods down)",
    "trusted_proxies": "comma-separated addresses or networks (CIDR) of proxies in front "
                       "whose x-forwarded-for names the client, for the quotas",
    "max_concurrent_streams": "calls at once on one connection (HTTP/2 streams)",
    "grace": "seconds running RPCs get to finish on SIGTERM",
    "allow_seed": "accept CreateTable's explicit seed (tests, replays, fixed deals)",
    "data_dir": "directory of the SQLite database (tables' logs, game records); 'memory' "
                "keeps nothing across restarts",
    "database": "postgresql://user@host:port/db: the PostgreSQL store shared by the nodes of "
                "a cluster (instead of --data-dir); COPAS_DATABASE keeps a password out of ps",
    "node_id": "this node's id in a cluster (default: its --advertise address)",
    "advertise": "host:port the other nodes reach this node at (default: --listen's)",
    "lease": "seconds a node owns its tables without renewing (then others take them over)",
    "workers": "start this many nodes sharing --listen, one process each (needs --database); "
               "node ids <id>-w<i>, metrics on --metrics-port + i, the page on worker 0",
    "reuse_port": "share --listen with other nodes of this machine (SO_REUSEPORT; set by "
                  "--workers for its nodes)",
    "internal_listen": "a second, plaintext gRPC port for the other nodes' forwarded calls "
                       "(needed with TLS; it serves the whole API: firewall it)",
    "keep_records": "finished-game records to keep, newest first; 0 = all",
    "keep_records_days": "days to keep finished-game records; 0 = forever",
    "retention_interval": "seconds between retention sweeps",
    "log_format": "auto (console on a terminal, JSON lines otherwise), json or console",
    "log_level": "debug, info, warning or error",
    "max_message_bytes": "the largest request message accepted",
    "tls_cert": "PEM certificate chain: serve TLS only (with --tls-key)",
    "tls_key": "PEM private key of --tls-cert",
    "tls_client_ca": "PEM CA bundle: require client certificates signed by it (mutual TLS)",
}
_QUOTA_FIELDS = {"peer_calls_per_second", "token_calls_per_second", "tables_per_minute",
                 "joins_per_minute", "max_streams_per_peer"}


def _env(name: str, default: Any) -> Any:
    return os.environ.get(f"COPAS_{name.upper()}", default)


def parse_args(argv: list[str] | None = None) -> Config:
    p = argparse.ArgumentParser(
        prog="copas-server",
        description="Copas (Hearts) authoritative game server. Every flag also reads the "
                    "environment variable COPAS_<FLAG> (e.g. COPAS_LISTEN). Quotas of 0 are "
                    "no limit.")
    for f in dataclasses.fields(Config):
        if f.name not in _HELP:
            continue
        flag = "--" + f.name.replace("_", "-")
        default = f.default
        text = _HELP[f.name] + (" (0 = no limit)" if f.name in _QUOTA_FIELDS else "")
        if isinstance(default, bool):
            p.add_argument(flag, action="store_true",
                           default=str(_env(f.name, "")).lower() in ("1", "true", "yes"),
                           help=text)
        elif f.name == "log_format":
            p.add_argument(flag, choices=("auto", "json", "console"),
                           default=_env(f.name, default), help=text + " (default %(default)s)")
        else:
            p.add_argument(flag, type=type(default), default=type(default)(_env(f.name, default)),
                           help=text + " (default %(default)s)")
    for name in _TIMING:
        p.add_argument(f"--{name.replace('_', '-')}", type=float, default=_env(name, None),
                       help=f"default {name.replace('_', ' ')} in seconds for new tables")
    p.add_argument("--unlimited-quotas", action="store_true",
                   default=str(_env("unlimited_quotas", "")).lower() in ("1", "true", "yes"),
                   help="no per-client quotas (load tests on a trusted network)")
    args = p.parse_args(argv)
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(Config)
              if f.name in _HELP}
    if args.unlimited_quotas:
        values.update({name: 0 for name in _QUOTA_FIELDS})
    from server.bots import POLICIES

    if values["bot_policy"] not in POLICIES:
        p.error(f"--bot-policy must be one of {', '.join(POLICIES)}")
    if bool(values["tls_cert"]) != bool(values["tls_key"]):
        p.error("--tls-cert and --tls-key go together")
    if values["workers"] and not values["database"]:
        p.error("--workers needs --database (the nodes share a PostgreSQL)")
    if values["database"] and values["tls_cert"] and not (values["internal_listen"]
                                                          or values["workers"]):
        p.error("--database with TLS needs --internal-listen: the plaintext port the other "
                "nodes forward calls to (keep it on a private network)")
    if values["tls_client_ca"] and not values["tls_cert"]:
        p.error("--tls-client-ca needs --tls-cert and --tls-key")
    defaults = {name: float(getattr(args, name)) for name in _TIMING
                if getattr(args, name) is not None}
    return Config(rule_defaults=defaults, **values)


def unlimited(config: Config) -> Config:
    """The same configuration without per-client quotas."""
    return dataclasses.replace(config, **{name: 0 for name in _QUOTA_FIELDS})

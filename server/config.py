"""Server configuration: one ``Config`` field per flag (its help beside its default), each also
read from the environment variable ``COPAS_<FLAG>``, and the narrower settings the parts of
the server are given (``TableSettings``, ``RegistrySettings``)."""

from __future__ import annotations

import argparse
import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any, TypeVar

from server import games

T = TypeVar("T")
BOT_POLICIES = games.bot_policies()  # "auto": the timeout rules, at once, in the loop; every game's


def flag(default: T, text: str, *, is_quota: bool = False) -> T:
    """A setting with its ``--flag`` (help ``text``); a quota's 0 means no limit."""
    metadata = {"help": text + (" (0 = no limit)" if is_quota else ""), "is_quota": is_quota}
    made: T = field(default=default, metadata=metadata)
    return made


@dataclass(frozen=True)
class Config:
    listen: str = flag("localhost:50051", "host:port for gRPC")
    metrics_port: int = flag(9464, "Prometheus metrics HTTP port, 0 to disable")
    metrics_host: str = flag("localhost", "metrics HTTP address")
    web_port: int = flag(8080, "HTTP port of the web page (and the contract over Connect for "
                               "it), 0 to disable")
    web_host: str = flag("localhost", "web page address")
    web_max_connections: int = flag(1024, "browser connections at once (beyond, a new one "
                                          "takes the place of the oldest still waiting for a "
                                          "request's headers; HTTP 503 when none is)")
    web_max_connections_per_address: int = flag(64, "web connections one address may hold "
                                                    "(HTTP 503 beyond; trusted proxies are "
                                                    "exempt)", is_quota=True)
    web_max_streams_per_address: int = flag(16, "web connections of one address answering a "
                                                "streaming call (WatchTable, WatchLobby; HTTP "
                                                "503 beyond; trusted proxies are exempt)",
                                            is_quota=True)
    web_header_timeout: float = flag(10.0, "seconds a web connection has for its TLS handshake, "
                                           "and to send a request's headers (then it is "
                                           "closed)")
    web_body_timeout: float = flag(30.0, "seconds a web request has to send its body once its "
                                         "headers are in (then it is closed)")
    web_write_timeout: float = flag(30.0, "seconds a web connection's answer may go unread "
                                          "(its output not draining) before the connection is "
                                          "closed (0: never)")
    web_admin: bool = flag(False, "relay the admin service's championship calls (create, "
                                  "start, cancel, pause and resume, correct, disqualify, "
                                  "re-seat, remove a player) on the web port, for the page's "
                                  "organizer tools; each still needs the operator's token")
    # What clients can make the server hold.
    max_tables: int = flag(10_000, "tables not yet finished (RESOURCE_EXHAUSTED SERVER_FULL "
                                   "beyond)")
    max_players: int = flag(40_000, "people seated in games not yet finished")
    max_bot_tables: int = flag(64, "tables of bots only that play at once")
    max_watchers_per_table: int = flag(64, "spectator streams per table (players have their "
                                           "own slots)")
    max_streams_per_token: int = flag(4, "streams one player token may hold open")
    watcher_queue: int = flag(512, "messages a watcher may fall behind before it gets a fresh "
                                   "snapshot")
    watcher_buffer_bytes: int = flag(64 * 1024, "bytes a watcher may fall behind before it gets "
                                                "a fresh snapshot")
    presence_interval: float = flag(1.0, "seconds between two presence events of one seat (a "
                                         "player's streams opened, or all closed); a change "
                                         "within them is shown at their end, in the views "
                                         "too")
    history: int = flag(1024, "events kept per table for reconnecting watchers")
    snapshot_max_events: int = flag(128, "missed events a spectator's snapshot lists at most "
                                         "(the latest, then has_gap; players' list every "
                                         "kept one)", is_quota=True)
    spectator_tick: float = flag(0.1, "seconds spectators' updates of a table are coalesced "
                                      "over: a step after a quiet tick goes at once, sooner "
                                      "ones wait and go as one snapshot for all spectators "
                                      "(0: every event as it comes)")
    finished_table_ttl: float = flag(600.0, "seconds a finished table is kept for late watchers")
    waiting_table_ttl: float = flag(600.0, "seconds a table waiting for players stays with "
                                           "nobody connected")
    abandon_after: float = flag(900.0, "seconds without a move by a person before a game ends "
                                       "(ABANDONED)")
    reservation_seconds: float = flag(15.0, "seconds a quick-match seat stays reserved for "
                                            "its player to open a WatchTable or Play stream; "
                                            "then it goes back (RESERVATION_EXPIRED)")
    reaction_burst: int = flag(3, "reactions one seat may show at once (issue 30), then one "
                                  "per --reaction-interval")
    reaction_interval: float = flag(2.0, "seconds between two reactions of one seat past its "
                                         "burst (0: no limit)")
    quick_match_bots_after: float = flag(20.0, "seconds a quick-match table waits for people "
                                               "after a quick match first seated someone "
                                               "there; then bots take its free seats and "
                                               "the game starts (0: it waits for people only)")
    rematch_window: float = flag(45.0, "seconds a rematch keeps the seats of the people of "
                                       "the game before it for them; then bots take the "
                                       "unclaimed ones and the game starts")
    bot_table_pace: float = flag(0.5, "seconds between moves at a table of bots only")
    bot_pace: float = flag(1.0, "seconds a bot waits before it plays a card at a new table "
                                "with a seat for a person, unless the table asks for "
                                "another bot_pace_seconds (a pass waits 1.5 times as long)")
    bot_policy: str = flag("mc", "how bot seats play unless a table says: mc (strong), duck, "
                                 "greedy, random or auto (the timeout rules' choices)")
    bot_workers: int = flag(1, "processes the bots think in, off the event loop (0: bots play "
                               "auto)")
    bot_think_seconds: float = flag(0.1, "a bot's time budget per decision")
    min_timeout: float = flag(1.0, "shortest play, pass or moon time limit a table may ask for "
                                   "(a limit of 0, none, is always allowed)")
    max_point_limit: int = flag(1000, "largest point_limit a table may ask for")
    max_hands_limit: int = flag(100, "largest max_hands a table may ask for")
    # Quotas per client.
    peer_calls_per_second: float = flag(50.0, "calls per second from one address without a "
                                              "player token", is_quota=True)
    peer_calls_burst: float = flag(200.0, "calls at once from one address without a player "
                                          "token")
    token_calls_per_second: float = flag(20.0, "calls per second with one player token",
                                         is_quota=True)
    token_calls_burst: float = flag(60.0, "calls at once with one player token")
    address_calls_per_second: float = flag(200.0, "calls per second from one address in all, "
                                                 "with or without player tokens (many players "
                                                 "behind one NAT share it)", is_quota=True)
    address_calls_burst: float = flag(400.0, "calls at once from one address in all")
    max_calls_in_flight_per_address: int = flag(64, "calls from one address waiting for their "
                                                     "answers at once (streams have their own "
                                                     "limits)", is_quota=True)
    tables_per_minute: float = flag(60.0, "tables one address may create per minute",
                                    is_quota=True)
    tables_burst: float = flag(30.0, "tables one address may create at once")
    joins_per_minute: float = flag(240.0, "joins per minute from one address", is_quota=True)
    joins_burst: float = flag(60.0, "joins at once from one address")
    quick_match_seats_per_client: int = flag(1, "seats of one quick-match table one "
                                                "anonymous client (its address) may hold (a "
                                                "signed-in account: one of any table)",
                                             is_quota=True)
    max_streams_per_peer: int = flag(1024, "open streams (WatchTable, Play, WatchLobby, "
                                           "health Watch) per address", is_quota=True)
    max_tables_per_address: int = flag(16, "tables not yet finished one address may have "
                                            "created (RESOURCE_EXHAUSTED TOO_MANY_TABLES "
                                            "beyond; given back when one finishes or goes)",
                                        is_quota=True)
    play_max_refusals_in_a_row: int = flag(100, "refused actions in a row that end a Play "
                                                "stream (RESOURCE_EXHAUSTED "
                                                "TOO_MANY_REFUSALS)", is_quota=True)
    stream_open_timeout: float = flag(10.0, "seconds a Play stream has to send its opening "
                                            "message (then it ends, INVALID_ARGUMENT; 0: "
                                            "forever)")
    max_streams_opening: int = flag(4096, "Play streams waiting for their opening message, "
                                          "from all addresses (RESOURCE_EXHAUSTED "
                                          "TOO_MANY_STREAMS beyond)", is_quota=True)
    max_lobby_streams_per_peer: int = flag(8, "open WatchLobby streams per address (a client "
                                              "needs one)", is_quota=True)
    max_spectator_streams_per_peer: int = flag(8, "open WatchTable streams without a player "
                                                  "token (spectators) per address",
                                               is_quota=True)
    quota_penalty: float = flag(0.5, "seconds before a call over a quota is answered, "
                                     "jittered (0: at once): a client that asks again at "
                                     "once is slowed, 64 of one client's refusals and 4,096 "
                                     "in all held at most")
    trusted_proxies: str = flag("", "comma-separated addresses or networks (CIDR) of proxies "
                                    "in front whose x-forwarded-for names the client, for the "
                                    "quotas")
    grace: float = flag(5.0, "seconds running RPCs get to finish on SIGTERM")
    allow_seed: bool = flag(False, "accept CreateTable's explicit seed (tests, replays, fixed "
                                   "deals)")
    # Defaults for tables that do not set their own: the --play-timeout ... flags below.
    rule_defaults: dict[str, float] = field(default_factory=dict)
    log_format: str = flag("auto", "auto (console on a terminal, JSON lines otherwise), json or "
                                   "console")
    log_level: str = flag("info", "debug, info, warning or error")
    log_queue: int = flag(10_000, "log lines held for a slow reader of stderr; beyond them "
                                  "lines are dropped and counted "
                                  "(copas_log_lines_dropped_total), never waited for")
    event_loop: str = flag("uvloop", "uvloop (the default: about a tenth less CPU per move "
                                     "than asyncio's own loop) or asyncio")
    max_concurrent_streams: int = flag(100, "calls and streams at once on one connection "
                                            "(HTTP/2 streams; a client needing more opens "
                                            "another connection)")
    max_pending_requests: int = flag(100_000, "calls gRPC may queue before refusing more (a "
                                              "reconnect storm after a restart is served)")
    max_connections: int = flag(10_000, "gRPC connections at once, from all addresses (a new "
                                        "one beyond is closed at once)", is_quota=True)
    max_connection_idle: float = flag(300.0, "seconds a gRPC connection with no call open may "
                                             "stay before the server closes it (GOAWAY; 0: "
                                             "forever)")
    max_connection_age: float = flag(3600.0, "seconds a gRPC connection may live before the "
                                             "server asks its client to reconnect (GOAWAY; "
                                             "0: forever)")
    max_connection_age_grace: float = flag(60.0, "seconds the calls of a connection past its "
                                                 "age get to finish (streams then resume on a "
                                                 "new one)")
    max_message_bytes: int = flag(64 * 1024, "the largest request message accepted")
    data_dir: str = flag("data", "directory of the SQLite database (tables' logs, game "
                                 "records); 'memory' keeps nothing across restarts")
    database: str = flag("", "postgresql://user@host:port/db: the PostgreSQL store shared by "
                             "the nodes of a cluster (instead of --data-dir); COPAS_DATABASE "
                             "keeps a password out of ps")
    node_id: str = flag("", "this node's id in a cluster (default: its --advertise address)")
    advertise: str = flag("", "host:port the other nodes reach this node at (default: "
                              "--listen's)")
    lease: float = flag(10.0, "seconds a node owns its tables without renewing (then others "
                              "take them over)")
    cluster_lookups_per_second: float = flag(200.0, "database reads of tables' owners (and "
                                             "tokens' tables) one node may make per second; "
                                             "beyond, lookups are refused (RATE_LIMITED); "
                                             "0: no limit")
    workers: int = flag(0, "start this many nodes sharing --listen, one process each (needs "
                           "--database); node ids <id>-w<i>, metrics on --metrics-port + i, "
                           "the page on worker 0")
    worker_public_port_base: int = flag(0, "with --workers: worker i's own public port is this "
                                           "+ i (0: a free port each, new at each restart)")
    worker_internal_port_base: int = flag(0, "with --workers: worker i's internal port is this "
                                             "+ i (0: a free port each, new at each restart)")
    reuse_port: bool = flag(False, "share --listen with other nodes of this machine "
                                   "(SO_REUSEPORT; set by --workers for its nodes)")
    internal_listen: str = flag("", "HOST:PORT of the plaintext gRPC port the other nodes "
                                    "relay calls to, the only port where the cluster key "
                                    "counts (a cluster node always has one; default: a free "
                                    "port on the --advertise host): firewall it to the nodes")
    internal_tls_cert: str = flag("", "PEM certificate chain of this node on the internal "
                                      "port, also its client certificate to the other nodes "
                                      "(mutual TLS between nodes, with --internal-tls-key "
                                      "and --internal-tls-ca)")
    internal_tls_key: str = flag("", "PEM private key of --internal-tls-cert")
    internal_tls_ca: str = flag("", "PEM CA bundle the nodes' certificates are signed by: "
                                    "the internal port requires a client certificate it "
                                    "signed, and a relay checks the other node's by it")
    public_listen: str = flag("", "a further gRPC port of this node alone, on --listen's TLS "
                                  "settings, for clients told to call this node (set per "
                                  "worker by --workers, beside the shared --listen)")
    public_address: str = flag("", "host[:port] clients reach this node at, told them as "
                                   "x-copas-owner for its tables (default: --advertise's "
                                   "host, with --public-listen's port, else --listen's)")
    keep_records: int = flag(0, "finished-game records to keep, newest first; 0 = all")
    keep_records_days: float = flag(0.0, "days to keep finished-game records; 0 = forever")
    retention_interval: float = flag(60.0, "seconds between retention sweeps")
    tls_cert: str = flag("", "PEM certificate chain: serve TLS only (with --tls-key)")
    tls_key: str = flag("", "PEM private key of --tls-cert")
    tls_client_ca: str = flag("", "PEM CA bundle: require client certificates signed by it "
                                  "(mutual TLS)")
    admin_token_file: str = flag("", "a file whose first line (16 characters or more) is the "
                                     "operators' token for copas.admin.v1.AdminService "
                                     "(off without it or --admin-subjects)")
    admin_subjects: str = flag("", "comma-separated client certificate names (common name "
                                   "or subject alternative name; mutual TLS, --tls-client-ca) "
                                   "allowed to call the admin service")
    # Accounts (copas.v1.AccountService).
    oidc_issuers: str = flag("", "comma-separated ISSUER=AUDIENCE=JWKS: OIDC ID tokens of these "
                                 "issuers, for that audience, sign in (JWKS: a file, or an "
                                 "https URL fetched and cached)")
    access_token_seconds: float = flag(900.0, "seconds an account's access token works (a "
                                              "refresh token renews it)")
    refresh_token_days: float = flag(30.0, "days a refresh token works (each refresh starts "
                                           "it again)")
    password_time_cost: int = flag(2, "argon2id passes per password hash")
    password_memory_kib: int = flag(19456, "argon2id memory per password hash, in KiB")
    sessions_per_account: int = flag(10, "sessions one account holds at once (a new sign-in "
                                         "ends its oldest)")
    guest_days: float = flag(30.0, "days a guest account (a device's) that never finished a "
                                   "game is kept after its last sign-in or refresh")
    rate_one_network: bool = flag(False, "rate games between people who joined from one network "
                                         "(a LAN party, a club behind one router): by default "
                                         "they do not rate each other (docs/RULES.md, \"Rated "
                                         "games\")")
    password_hashes_at_once: int = flag(0, "argon2 password hashes computed at once, each on a "
                                           "core of its own (0: half the machine's cores, at "
                                           "least one, so that games keep the rest)")
    password_hash_niceness: int = flag(10, "how much lower the priority of the threads that "
                                           "hash passwords is than the server's (Linux nice; "
                                           "0: the same), so that a game's move goes first "
                                           "when every core is busy")
    password_checks_per_address: int = flag(4, "password sign-ins, sign-ups and links of one "
                                               "address waiting for their argon2 hash (2 hashes "
                                               "at once, given to the addresses waiting in "
                                               "turn; 32 wait in all); beyond, its new ones "
                                               "are refused at once (RESOURCE_EXHAUSTED "
                                               "TOO_MANY_SIGN_INS)", is_quota=True)
    password_checks_per_address_per_minute: float = flag(
        12.0, "password calls one address may make per minute past its --password-checks-burst "
              "(a sign-in, a sign-up, a link, a sign-up of a taken username), right or wrong; "
              "beyond, they are refused before any hash (RESOURCE_EXHAUSTED "
              "TOO_MANY_SIGN_INS)", is_quota=True)
    password_checks_burst: float = flag(30.0, "password calls one address may make at once")
    ipv6_56_factor: float = flag(4.0, "an IPv6 /56's allowance of new accounts and of password "
                                      "calls, in /64s' (an IPv6 client is its /64; its /56 and "
                                      "/48 are bounded too)", is_quota=True)
    ipv6_48_factor: float = flag(16.0, "an IPv6 /48's allowance of new accounts and of password "
                                       "calls, in /64s'", is_quota=True)
    accounts_per_address_per_hour: float = flag(60.0, "new accounts one address may make per "
                                                      "hour past its --accounts-burst (a first "
                                                      "SignInDevice, SignUpPassword, a first "
                                                      "SignInOidc; RESOURCE_EXHAUSTED "
                                                      "TOO_MANY_ACCOUNTS beyond); signing in to "
                                                      "an existing account is never counted",
                                                is_quota=True)
    accounts_burst: float = flag(10.0, "new accounts one address may make at once")
    # Championships (copas.v1.ChampionshipService).
    championships_per_account: int = flag(1, "championships not yet over an account may have "
                                             "created (0: only operators create them)")
    championship_max_players: int = flag(1000, "registrations a championship takes at most")
    championships_per_address_per_hour: float = flag(
        6.0, "championships one address may create per hour past its --championships-burst "
             "(RESOURCE_EXHAUSTED TOO_MANY_CHAMPIONSHIPS beyond)", is_quota=True)
    championships_burst: float = flag(3.0, "championships one address may create at once")
    championship_watchers_per_address: int = flag(
        8, "WatchChampionship streams one address may hold open (RESOURCE_EXHAUSTED "
           "TOO_MANY_STREAMS beyond)", is_quota=True)
    championship_watch_recheck: float = flag(5.0, "seconds a WatchChampionship stream waits "
                                                  "for a change before it reads the store "
                                                  "again (a cluster's changes come at once, "
                                                  "by notification; this is their backstop)")
    championship_watch_tick: float = flag(0.25, "seconds a WatchChampionship stream waits after "
                                                "a change before its next message (a burst of "
                                                "changes: one message)")
    championship_expiry_days: float = flag(7.0, "days a championship may wait to start (from "
                                                "its creation, or its start time): then it is "
                                                "cancelled")
    championship_interval: float = flag(1.0, "seconds between two steps of the championships' "
                                             "driver (it also steps at once on a change)")

    def table_settings(self) -> TableSettings:
        return TableSettings(
            history=self.history, snapshot_max_events=self.snapshot_max_events,
            spectator_tick=self.spectator_tick,
            max_watchers_per_table=self.max_watchers_per_table,
            max_streams_per_token=self.max_streams_per_token, watcher_queue=self.watcher_queue,
            watcher_buffer_bytes=self.watcher_buffer_bytes,
            waiting_table_ttl=self.waiting_table_ttl, abandon_after=self.abandon_after,
            bot_table_pace=self.bot_table_pace, presence_interval=self.presence_interval,
            reservation_seconds=self.reservation_seconds,
            quick_match_seats_per_client=self.quick_match_seats_per_client)

    def registry_settings(self) -> RegistrySettings:
        return RegistrySettings(
            max_tables=self.max_tables, max_players=self.max_players,
            max_bot_tables=self.max_bot_tables,
            max_tables_per_address=self.max_tables_per_address,
            finished_table_ttl=self.finished_table_ttl,
            min_timeout=self.min_timeout, max_point_limit=self.max_point_limit,
            max_hands_limit=self.max_hands_limit, allow_seed=self.allow_seed,
            bot_policy=self.bot_policy, bot_pace=self.bot_pace,
            rule_defaults=dict(self.rule_defaults),
            watcher_queue=self.watcher_queue, rematch_window=self.rematch_window,
            quick_match_bots_after=self.quick_match_bots_after)


@dataclass(frozen=True, slots=True)
class TableSettings:
    """What one table's state machine reads (``Config`` has the flags' help)."""

    history: int = 1024
    snapshot_max_events: int = 128
    spectator_tick: float = 0.1
    max_watchers_per_table: int = 64
    max_streams_per_token: int = 4
    watcher_queue: int = 512
    watcher_buffer_bytes: int = 64 * 1024
    waiting_table_ttl: float = 600.0
    abandon_after: float = 900.0
    bot_table_pace: float = 0.5
    presence_interval: float = 1.0
    reservation_seconds: float = 15.0
    quick_match_seats_per_client: int = 1  # 0: no limit


@dataclass(frozen=True, slots=True)
class RegistrySettings:
    """What the registry of one node's tables reads: its limits, and what a new table may
    ask for."""

    max_tables: int = 10_000
    max_players: int = 40_000
    max_bot_tables: int = 64
    max_tables_per_address: int = 16  # 0: no limit
    finished_table_ttl: float = 600.0
    min_timeout: float = 1.0
    max_point_limit: int = 1000
    max_hands_limit: int = 100
    allow_seed: bool = False
    bot_policy: str = "mc"
    bot_pace: float = 1.0  # a new table's bot_pace_seconds when a person may sit at it
    rule_defaults: dict[str, float] = field(default_factory=dict)
    watcher_queue: int = 512  # the lobby streams' queues
    rematch_window: float = 45.0  # seconds a rematch keeps its people's seats for them
    quick_match_bots_after: float = 0.0  # seconds before bots fill a quick match (0: never)


_TIMING = ("play_timeout", "pass_timeout", "moon_timeout", "trick_pause", "hand_pause")
FLAGS = tuple(f for f in dataclasses.fields(Config) if "help" in f.metadata)
_QUOTA_FIELDS = {f.name for f in FLAGS if f.metadata["is_quota"]}


def _env(name: str, default: Any) -> Any:
    return os.environ.get(f"COPAS_{name.upper()}", default)


_CHOICES = {"log_format": ("auto", "json", "console"), "event_loop": ("uvloop", "asyncio")}


def _is_true(text: str) -> bool:
    return text.lower() in ("1", "true", "yes")


def parse_args(argv: list[str] | None = None) -> Config:
    p = argparse.ArgumentParser(
        prog="copas-server",
        description="Copas authoritative card-game server. Every flag also reads the "
                    "environment variable COPAS_<FLAG> (e.g. COPAS_LISTEN). Quotas of 0 are "
                    "no limit.")
    for f in FLAGS:
        flag_name = "--" + f.name.replace("_", "-")
        default = f.default
        text = f.metadata["help"]
        if isinstance(default, bool):
            p.add_argument(flag_name, action="store_true",
                           default=_is_true(str(_env(f.name, ""))), help=text)
        elif f.name in _CHOICES:
            p.add_argument(flag_name, choices=_CHOICES[f.name],
                           default=_env(f.name, default), help=text + " (default %(default)s)")
        else:
            assert default is not dataclasses.MISSING  # every flag has a default
            kind = type(default)
            p.add_argument(flag_name, type=kind, default=kind(_env(f.name, default)),
                           help=text + " (default %(default)s)")
    for name in _TIMING:
        p.add_argument(f"--{name.replace('_', '-')}", type=float, default=_env(name, None),
                       help=f"default {name.replace('_', ' ')} in seconds for new tables")
    p.add_argument("--unlimited-quotas", action="store_true",
                   default=_is_true(str(_env("unlimited_quotas", ""))),
                   help="no per-client quotas (load tests on a trusted network)")
    args = p.parse_args(argv)
    values = {f.name: getattr(args, f.name) for f in FLAGS}
    if args.unlimited_quotas:
        values.update({name: 0 for name in _QUOTA_FIELDS})
    if values["bot_policy"] not in BOT_POLICIES:
        p.error(f"--bot-policy must be one of {', '.join(BOT_POLICIES)}")
    if bool(values["tls_cert"]) != bool(values["tls_key"]):
        p.error("--tls-cert and --tls-key go together")
    if values["workers"] and not values["database"]:
        p.error("--workers needs --database (the nodes share a PostgreSQL)")
    internal_tls = [values[f"internal_tls_{part}"] for part in ("cert", "key", "ca")]
    if any(internal_tls) and not all(internal_tls):
        p.error("--internal-tls-cert, --internal-tls-key and --internal-tls-ca go together")
    if values["web_admin"] and not values["admin_token_file"]:
        p.error("--web-admin needs --admin-token-file: the page's organizer tools send the "
                "operator's token (a client certificate does not reach through the web port)")
    if values["tls_client_ca"] and not values["tls_cert"]:
        p.error("--tls-client-ca needs --tls-cert and --tls-key")
    defaults = {name: float(getattr(args, name)) for name in _TIMING
                if getattr(args, name) is not None}
    return Config(rule_defaults=defaults, **values)


def unlimited(config: Config) -> Config:
    """The same configuration without per-client quotas."""
    no_limits: dict[str, Any] = {name: 0 for name in _QUOTA_FIELDS}
    return dataclasses.replace(config, **no_limits)

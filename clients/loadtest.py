"""`copas loadtest`: a swarm of bot clients keeping T tables busy, for operators.

Every player is a separate gRPC channel (like a separate device). Tables have no pauses or
time limits; a finished table is replaced so T stay busy. Measures PlayCard latency and
move-to-view latency: from the server's timestamp of a played card (the moment it was
accepted) to when each other player's stream shows it (client and server share a clock
when the server is local).
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import dataclasses
import json
import multiprocessing
import os
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from multiprocessing.context import BaseContext
from multiprocessing.queues import Queue
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path
from queue import Empty
from typing import TypedDict

import grpc
from copas.v1 import copas_pb2, copas_pb2_grpc
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from clients.bots import POLICIES, POLICY_SETUP, Policy, decision_key, take_turn
from clients.common import (
    Connection,
    Player,
    TableRoute,
    Transport,
    add_server_arguments,
    add_transport_argument,
    channel,
    connection,
    has_view,
    is_game_over,
    is_over,
    must_act,
    seat_stream,
    zero_timing,
)


@dataclass
class Results:
    games_started: int = 0
    games_finished: int = 0
    games_unfinished: int = 0
    moves: int = 0
    play_latency: list[float] = field(default_factory=list)
    view_latency: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)

    def merge(self, other: Results) -> None:
        self.games_started += other.games_started
        self.games_finished += other.games_finished
        self.games_unfinished += other.games_unfinished
        self.moves += other.moves
        self.play_latency += other.play_latency
        self.view_latency += other.view_latency
        self.errors.update(other.errors)


@dataclass
class Plan:
    server: Connection
    tables: int
    players: int
    preset: str
    policy: str
    deadline: float  # wall time to stop; 0 = none
    games: int  # games to start in this process; 0 = no limit
    # Module-level functions run first in each process (they register policies).
    setup: tuple[Callable[[], None], ...] = ()
    move_interval: float = 0.0  # seconds a bot waits before each move (0: at once)
    via: Connection | None = None  # players act and watch through this address (a node)
    transport: Transport = "play"  # a Play stream per seat, or unary calls and WatchTable
    follow: bool = True  # players call the table's owner directly (x-copas-owner)


class Counters:
    """Progress shared between processes."""

    def __init__(self, ctx: BaseContext) -> None:
        self.games: Synchronized[int] = ctx.Value(ctypes.c_int, 0)
        self.moves: Synchronized[int] = ctx.Value(ctypes.c_int, 0)


class Latency(TypedDict):
    """Percentiles of a latency, in milliseconds."""

    p50: float
    p95: float
    p99: float
    max: float


class Report(TypedDict):
    """What a load test measured (``--json`` prints it as one object)."""

    server: str
    transport: str
    tables: int
    players: int
    preset: str
    processes: int
    duration_s: float
    games_started: int
    games_finished: int
    games_unfinished: int
    moves: int
    moves_per_s: float
    play_card_latency_ms: Latency
    move_to_view_latency_ms: Latency
    errors: dict[str, int]  # status code name -> count
    server_peak_rss_mb: float | None  # None: the server is not a local process
    server_cpu_ms_per_move: float | None


async def play_seat(player: Player, results: Results, counters: Counters, seed: int,
                    policy: str, move_interval: float = 0.0, transport: Transport = "play"
                    ) -> None:
    bot = POLICIES[policy](seed)
    try:
        async with seat_stream(player, transport) as events:
            await _play(player, bot, events, results, counters, move_interval)
    finally:
        bot.close()


async def _play(player: Player, bot: Policy, events: AsyncIterator[copas_pb2.TableEvent],
                results: Results, counters: Counters, move_interval: float) -> None:
    acted: set[tuple[int, ...]] = set()
    view = copas_pb2.TableView()
    async for event in events:
        bot.observe(event)
        if event.WhichOneof("kind") == "card_played" and event.card_played.seat != player.seat:
            results.view_latency.append(time.time() - event.time.ToNanoseconds() / 1e9)
        if is_game_over(event):
            return
        if not has_view(event):
            continue  # a batched stream: the commit's view is on its last event
        view = event.view
        if is_over(view):
            continue
        key = decision_key(view)
        if not must_act(view) or key in acted:
            continue
        acted.add(key)
        if move_interval:  # a human pace: the table moves once per interval
            await asyncio.sleep(move_interval)
        is_play = view.phase == copas_pb2.PHASE_PLAYING
        start = time.perf_counter()
        try:
            await take_turn(player, view, bot)
        except grpc.aio.AioRpcError as error:
            results.errors[error.code().name] += 1
            continue
        if is_play:
            results.play_latency.append(time.perf_counter() - start)
            results.moves += 1
            with counters.moves.get_lock():
                counters.moves.value += 1


async def run_table_slot(plan: Plan, slot: int, results: Results, counters: Counters,
                         budget: list[int]) -> None:
    """Keep one table busy: play a game, then another, until the plan says stop."""
    channels = [channel(plan.server) for _ in range(plan.players)]
    stubs = [copas_pb2_grpc.CopasServiceStub(c) for c in channels]
    playing = stubs
    if plan.via is not None:  # tables made through --server, played through --via
        channels += [channel(plan.via) for _ in range(plan.players)]
        playing = [copas_pb2_grpc.CopasServiceStub(c) for c in channels[plan.players:]]
    # Each player follows its table's owner on a channel of its own (one per player).
    routes = [TableRoute(stub, plan.via or plan.server, plan.follow) for stub in playing]
    game = 0
    try:
        while True:
            if plan.deadline and time.time() >= plan.deadline:
                return
            if plan.games:
                if budget[0] <= 0:
                    return
                budget[0] -= 1
            overrides = zero_timing()
            overrides.players = plan.players
            try:
                table = (await stubs[0].CreateTable(copas_pb2.CreateTableRequest(
                    preset=plan.preset, rules=overrides, display_name=f"load-{slot}"))).table
                players = []
                for s, stub in enumerate(stubs):
                    call = stub.JoinTable(copas_pb2.JoinTableRequest(
                        table_id=table.table_id, display_name=f"load-{s}"))
                    answer = await call
                    route = routes[s]
                    route.told(await call.initial_metadata())
                    players.append(Player(playing[s], table.table_id, answer.seat,
                                          answer.player_token, route=route))
            except grpc.aio.AioRpcError as error:
                results.errors[error.code().name] += 1
                await asyncio.sleep(0.1)
                continue
            results.games_started += 1
            seats = [asyncio.create_task(play_seat(p, results, counters,
                                                   seed=slot * 1000 + game * 10 + i,
                                                   policy=plan.policy,
                                                   move_interval=plan.move_interval,
                                                   transport=plan.transport))
                     for i, p in enumerate(players)]
            game += 1
            timeout = max(0.0, plan.deadline - time.time()) if plan.deadline else None
            done, pending = await asyncio.wait(seats, timeout=timeout)
            for task in done:
                failure = task.exception()
                if failure is not None:
                    code = failure.code().name if isinstance(failure, grpc.aio.AioRpcError) \
                        else type(failure).__name__
                    results.errors[code] += 1
            if pending:
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
                results.games_unfinished += 1
                return
            results.games_finished += 1
            with counters.games.get_lock():
                counters.games.value += 1
    finally:
        for c in channels:
            await c.close()
        for route in routes:
            await route.close()


async def run_swarm(plan: Plan, counters: Counters) -> Results:
    results = Results()
    budget = [plan.games]
    await asyncio.gather(*(run_table_slot(plan, i, results, counters, budget)
                           for i in range(plan.tables)))
    return results


def _child(plan: Plan, counters: Counters, out: Queue[Results]) -> None:
    for setup in plan.setup:
        setup()
    out.put(asyncio.run(run_swarm(plan, counters)))


def percentiles(values: list[float]) -> Latency:
    if not values:
        return {"p50": 0.0, "p95": 0.0, "p99": 0.0, "max": 0.0}
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 3)

    return {"p50": at(0.50), "p95": at(0.95), "p99": at(0.99),
            "max": round(ordered[-1] * 1000, 3)}


def cpu_total(pids: list[int]) -> float | None:
    used = [cpu_seconds(pid) for pid in pids]
    return sum(u for u in used if u is not None) if pids and None not in used else None


def rss_total(pids: list[int]) -> float | None:
    sizes = [rss_mb(pid) for pid in pids]
    return sum(s for s in sizes if s is not None) if pids and None not in sizes else None


def server_pid(server: str) -> int | None:
    """The local process listening on the server's port (Linux /proc), if any."""
    pids = server_pids(server)
    return pids[0] if pids else None


def server_pids(server: str) -> list[int]:
    """The local processes listening on the server's port (Linux /proc; several with
    ``--workers``), if any."""
    host, _, port_text = server.rpartition(":")
    if host.strip("[]") not in ("localhost", "127.0.0.1", "::1", "0.0.0.0", ""):
        return []
    found: list[int] = []
    try:
        port = int(port_text)
        inodes = set()
        for name in ("/proc/net/tcp", "/proc/net/tcp6"):
            path = Path(name)
            if not path.exists():
                continue
            for line in path.read_text().splitlines()[1:]:
                parts = line.split()
                if int(parts[1].rsplit(":", 1)[1], 16) == port and parts[3] == "0A":
                    inodes.add(parts[9])
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                for fd in (proc / "fd").iterdir():
                    link = os.readlink(fd)
                    if link.startswith("socket:[") and link[8:-1] in inodes:
                        found.append(int(proc.name))
                        break
            except OSError:
                continue
    except (OSError, ValueError, IndexError):
        return []
    return found


def rss_mb(pid: int, field_name: str = "VmRSS") -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system, every thread) a local process has used so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


async def loadtest_main(args: argparse.Namespace) -> int:
    if not args.duration and not args.games:
        args.duration = 10.0
    deadline = time.time() + args.duration if args.duration else 0.0
    processes = max(1, min(args.processes, args.tables))
    ctx = multiprocessing.get_context("spawn")
    counters = Counters(ctx)
    plans = []
    for p in range(processes):
        tables = args.tables // processes + (p < args.tables % processes)
        games = 0
        if args.games:
            games = args.games // processes + (p < args.games % processes)
        via = dataclasses.replace(connection(args), server=args.via) if args.via else None
        plans.append(Plan(connection(args), tables, args.players, args.preset, args.policy,
                          deadline, games, tuple(POLICY_SETUP), args.move_interval, via,
                          args.transport, not args.no_follow_owner))
    # Every local process serving the port (--workers' nodes), and --via's.
    pids = list(dict.fromkeys(server_pids(args.server)
                              + (server_pids(args.via) if args.via else [])))
    peak = rss_total(pids)
    cpu_before = cpu_total(pids)
    start = time.perf_counter()
    queue: Queue[Results] = ctx.Queue()
    children = [ctx.Process(target=_child, args=(plan, counters, queue)) for plan in plans[1:]]
    for child in children:
        child.start()
    console = Console(stderr=True)
    total_games = args.games or None
    with Progress(TextColumn("[bold]load test"), BarColumn(), TextColumn("{task.description}"),
                  TimeElapsedColumn(), console=console, disable=args.json or args.quiet,
                  transient=True) as progress:
        task = progress.add_task("", total=total_games or args.duration)
        main = asyncio.create_task(run_swarm(plans[0], counters))
        while not main.done():
            await asyncio.wait({main}, timeout=0.5)
            if pids:
                now = rss_total(pids)
                peak = max(peak or 0.0, now or 0.0)
            elapsed = time.perf_counter() - start
            progress.update(task, completed=counters.games.value if total_games else elapsed,
                            description=f"{counters.games.value} games, "
                                        f"{counters.moves.value} moves")
        results = main.result()
        missing = len(children)
        while missing:  # a child that died gives nothing: do not wait for it forever
            try:
                results.merge(await asyncio.to_thread(queue.get, True, 1.0))
                missing -= 1
            except Empty:
                if not any(child.is_alive() for child in children) and queue.empty():
                    results.errors["LOAD_PROCESS_FAILED"] += missing
                    break
        for child in children:
            child.join()
    elapsed = time.perf_counter() - start
    cpu_after = cpu_total(pids)
    cpu_per_move = None
    if cpu_before is not None and cpu_after is not None and results.moves:
        cpu_per_move = round((cpu_after - cpu_before) * 1000 / results.moves, 4)
    report: Report = {
        "server": args.server, "transport": args.transport, "tables": args.tables,
        "players": args.players,
        "preset": args.preset, "processes": processes, "duration_s": round(elapsed, 3),
        "games_started": results.games_started, "games_finished": results.games_finished,
        "games_unfinished": results.games_unfinished, "moves": results.moves,
        "moves_per_s": round(results.moves / elapsed, 1) if elapsed else 0.0,
        "play_card_latency_ms": percentiles(results.play_latency),
        "move_to_view_latency_ms": percentiles(results.view_latency),
        "errors": dict(results.errors),
        "server_peak_rss_mb": round(peak, 1) if peak else None,
        "server_cpu_ms_per_move": cpu_per_move,
    }
    if args.json:
        print(json.dumps(report))
    else:
        print_report(report)
    return 0


def print_report(report: Report) -> None:
    console = Console()
    table = Table(title=f"copas load test: {report['tables']} tables of {report['players']} "
                        f"on {report['server']} ({report['processes']} processes)")
    table.add_column("measure")
    table.add_column("value", justify="right")
    for key in ("duration_s", "games_started", "games_finished", "games_unfinished", "moves",
                "moves_per_s", "server_peak_rss_mb", "server_cpu_ms_per_move"):
        table.add_row(key, str(report[key]))
    for latency in ("play_card_latency_ms", "move_to_view_latency_ms"):
        p = report[latency]
        table.add_row(latency, f"p50 {p['p50']}  p95 {p['p95']}  p99 {p['p99']}  max {p['max']}")
    table.add_row("errors", ", ".join(f"{k}: {v}" for k, v in report["errors"].items())
                  or "none")
    console.print(table)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_server_arguments(parser)
    parser.add_argument("--tables", type=int, default=10, help="tables kept busy at once")
    parser.add_argument("--duration", type=float, default=0.0,
                        help="seconds to run (default 10 when --games is not given)")
    parser.add_argument("--games", type=int, default=0, help="games to play, then stop")
    parser.add_argument("--players", type=int, default=4, choices=(3, 4, 5))
    parser.add_argument("--preset", default="online")
    parser.add_argument("--policy", choices=sorted(POLICIES), default="greedy",
                        help="how the bots play (greedy is the cheapest)")
    parser.add_argument("--processes", type=int, default=1,
                        help="spread the swarm over this many processes")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--via", default="",
                        help="host:port of another node of a cluster: tables are made through "
                             "--server and played through this one (forwarded moves)")
    parser.add_argument("--no-follow-owner", action="store_true",
                        help="an old client: every call through --server (or --via), relayed "
                             "by a node that does not own the table, instead of straight to "
                             "the owner the server names (x-copas-owner)")
    parser.add_argument("--move-interval", type=float, default=0.0,
                        help="seconds each bot waits before a move: a table moves about once "
                             "per interval (a human pace; 0 = at once)")
    add_transport_argument(parser)

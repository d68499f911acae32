"""The server's CPU per card played: Copas against boardgame.io and Colyseus on the same Hearts
workload, in the same run, alternating.

The workload: T tables (20 and 100), 4 connections per table, each player playing at once
(its first legal card, or its first 3 cards to pass; passing included), a finished game
replaced by a new one, the clients in processes of their own (their CPU is not counted).
(a) Copas with its defaults (SQLite in a temporary directory, fsync per group commit, info
logs) under `copas loadtest` over the batched Play stream (bench/cpu_per_move.py's round).
(b) boardgame.io 0.50 (bench/peers/boardgameio-server.js): the game in memory, socket.io.
(c) Colyseus 0.17 (bench/peers/colyseus-server.js): a room per table, immediate patches.
Both peers play Copas's default table's rules (bench/peers/hearts.js) and run with
NODE_ENV=production. Their npm packages (bench/peers/package-lock.json) are installed with
`npm ci` into ~/.cache/copas-bench-peers/<hash of the lock>, never into the checkout.

CPU is utime+stime of the server process (/proc/PID/stat) over the clients' run, divided by
the cards played. Prints, per table count, each server's CPU ms per card and moves/s
(medians over the rounds), and ``copas_vs_boardgameio_cpu_ratio_<T>=`` and
``copas_vs_colyseus_cpu_ratio_<T>=`` (Copas's CPU per card over the peer's). Asserts nothing.
Needs Node.js 20 and access to the npm registry (the first run installs).

With ``--pace``, a human pace instead (`make bench-peers-pace`): T tables (250 and 1,000), 4
connections per table, each seat waiting ``--move-interval`` (2 s) before each of its
decisions, as `copas loadtest --move-interval` does (so a table plays a card about every 2 s
plus the card's round trip), each table starting at a seeded random moment within the first
interval (so the tables' cards spread over it rather than arrive together); a warm-up
(``--warm-up``, 30 s, or until every player is connected and two intervals more: the tables
made, their players seated; a round whose players were not all connected when the window
opened, or whose pace fell short by a tenth, is flagged) and then the
steady window (``--duration``, 60 s) that alone is counted. Five servers, in turn, alternating
their order over the rounds: Copas durable (its defaults: SQLite, fsync per group commit),
Copas in memory (``--data-dir memory``), boardgame.io, Colyseus, and the floor: a bare grpc.aio
Play-shaped echo (bench/echo_swarm.py: a message in on a player's stream, 350 bytes out to each
of the table's 4 streams). The load generators run in processes of their own (a Node process
per peer; bench/pace_driver.py for Copas, with `copas loadtest`'s bots, and for the echo, a
process per 250 tables). Per server: CPU ms per card (utime+stime of the server's processes
over the window, over the cards sent in it), cores (that CPU over the window's seconds), KB per
table (the server's peak resident memory in the window over its memory idle, before the tables,
divided by the tables) and the p50/p99 move-to-view latency as the clients see it over the
window. Copas's and the echo's clocks start at the server's stamp of the card (accepted), the
peers' at the client's sending it (they stamp nothing): the peers' figures include the
request's way in, so read latency ratios loosely. Prints each round's figures, then the medians
over the rounds (``pace_<server>_<figure>_<T>=``), a table, and the ratios of Copas (durable
and memory) over each of the others (``pace_copas_vs_colyseus_cpu_ratio_250=``; ``_p50_ratio``,
``_kb_ratio``). Asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cpu_per_move import ROOT, copas_round, cpu_seconds, serve, server_flags

PEERS_DIR = ROOT / "bench" / "peers"
PEERS = ("boardgameio", "colyseus")
NODE_ENV = {**os.environ, "NODE_ENV": "production"}


def install() -> Path:
    """The peers' packages, installed once per lockfile outside the checkout, with this
    checkout's scripts copied next to them (Node finds packages from a script's directory)."""
    node = shutil.which("node")
    version = subprocess.run([node or "node", "--version"], capture_output=True, text=True)
    if node is None or int(version.stdout.strip().lstrip("v").split(".")[0]) < 20:
        raise SystemExit("bench/peers.py needs Node.js 20 or later (and npm)")
    manifest = [PEERS_DIR / "package.json", PEERS_DIR / "package-lock.json"]
    digest = hashlib.sha256(b"".join(path.read_bytes() for path in manifest)).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    place = cache / "copas-bench-peers" / digest
    stamp = place / "node_modules" / ".copas-installed"
    if not stamp.exists():
        place.mkdir(parents=True, exist_ok=True)
        for path in manifest:
            shutil.copy(path, place / path.name)
        subprocess.run(["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund",
                        "--loglevel=error"], cwd=place, check=True)
        stamp.touch()
    for script in PEERS_DIR.glob("*.js"):
        shutil.copy(script, place / script.name)
    return place


def listen_port() -> int:
    """A port below the kernel's ephemeral range that both stacks can bind: boardgame.io
    listens on every address, and a port of that range can be held by TIME-WAIT connections
    (after a run of hundreds of them) that stop a dual-stack listen but not an IPv4 one."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for _attempt in range(100):
        port = random.randrange(max(1024, low - 12_000), low)
        try:
            for family, address in ((socket.AF_INET6, "::"), (socket.AF_INET, "127.0.0.1")):
                with socket.socket(family) as probe:
                    probe.bind((address, port))
            return port
        except OSError:
            continue
    raise SystemExit("no free port below the ephemeral range")


def peer_round(place: Path, peer: str, args: argparse.Namespace) -> dict[str, Any]:
    for _attempt in range(3):  # a free port can be taken before the server binds it
        port = listen_port()
        try:
            server = serve(["node", str(place / f"{peer}-server.js"), str(port)], env=NODE_ENV)
            break
        except AssertionError:
            continue
    else:
        raise SystemExit(f"the {peer} server did not start")
    share, extra = divmod(args.tables, args.processes)
    try:
        before = cpu_seconds(server.pid)
        drivers = [subprocess.Popen(
            ["node", str(place / f"{peer}-driver.js"), "--port", str(port), "--tables",
             str(share + (1 if i < extra else 0)), "--duration", str(args.duration),
             "--first-seed", str(1 + i * 10_000_000)],
            stdout=subprocess.PIPE, text=True, env=NODE_ENV) for i in range(args.processes)]
        reports = [json.loads(driver.communicate()[0].strip().splitlines()[-1])
                   for driver in drivers]
        used = cpu_seconds(server.pid) - before
    finally:
        server.terminate()
        server.wait(30)
    moves = sum(report["moves"] for report in reports)
    return {"moves": moves, "errors": sum(report["errors"] for report in reports),
            "moves_per_s": round(sum(report["moves_per_s"] for report in reports), 1),
            "server_cpu_ms_per_move": round(used * 1000 / max(1, moves), 4)}


PACE_SERVERS = ("copas", "copas_memory", "boardgameio", "colyseus", "echo")
PYTHON_TABLES_PER_PROCESS = 250  # Copas's bots and the echo's players: a process per 250


def process_tree(pid: int) -> list[int]:
    """The process and its descendants (Copas's bot worker, multiprocessing's tracker)."""
    found, index = [pid], 0
    while index < len(found):
        for task in Path(f"/proc/{found[index]}/task").glob("*"):
            with contextlib.suppress(OSError):  # a thread gone in the meantime
                found += [int(child) for child in (task / "children").read_text().split()]
        index += 1
    return found


def tree_cpu(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError):  # a process gone in the meantime
            total += cpu_seconds(pid)
    return total


def tree_rss_kb(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total


def pace_server(name: str, place: Path, data_dir: str) -> tuple[subprocess.Popen[str], int]:
    """Start one of PACE_SERVERS on a port of its own; give it and the port."""
    for _attempt in range(3):  # a free port can be taken before the server binds it
        port = listen_port()
        if name.startswith("copas"):
            command = [sys.executable, "-m", "server.main", "--listen", f"127.0.0.1:{port}",
                       "--metrics-port", "0",
                       "--data-dir", "memory" if name == "copas_memory" else data_dir,
                       *server_flags(ROOT), "--max-streams-per-peer", "0"]
        elif name == "echo":
            command = [sys.executable, "bench/echo_swarm.py", "serve", "--port", str(port)]
        else:
            command = ["node", str(place / f"{name}-server.js"), str(port)]
        try:
            return serve(command, env=NODE_ENV), port
        except AssertionError:
            continue
    raise SystemExit(f"the {name} server did not start")


def pace_drivers(name: str, place: Path, port: int, tables: int, args: argparse.Namespace
                 ) -> list[subprocess.Popen[str]]:
    """The load generators of one round, each a process of its own, started now; each is
    told its window on stdin (a line: start, end and stop, epoch seconds)."""
    timing = ["--move-interval", str(args.move_interval)]
    if name in PEERS:
        processes = args.processes or 1
    else:
        processes = max(1, -(-tables // PYTHON_TABLES_PER_PROCESS))
    share, extra = divmod(tables, processes)
    drivers, first = [], 0
    for i in range(processes):
        count = share + (1 if i < extra else 0)
        seed = args.seed * 1_000_003 + i
        if name in PEERS:
            command = ["node", str(place / f"{name}-driver.js"), "--port", str(port),
                       "--tables", str(count), "--first-seed", str(seed), *timing]
        else:
            command = [sys.executable, "bench/pace_driver.py",
                       "copas" if name.startswith("copas") else "echo",
                       "--server", f"127.0.0.1:{port}", "--tables", str(count),
                       "--first-slot", str(first), "--seed", str(seed), *timing]
        drivers.append(subprocess.Popen(command, cwd=ROOT, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, env=NODE_ENV))
        first += count
    return drivers


def connections(port: int) -> int:
    """The established TCP connections to ``port`` on this machine (/proc/net/tcp, tcp6)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "01" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    count += 1
    return count


def seated_window(port: int, tables: int, args: argparse.Namespace) -> float:
    """When the steady window opens: ``--warm-up`` seconds from now, or, when its players are
    not all connected by then, two move intervals after they are (waiting at most four more
    warm-ups: then at once, and the round is flagged)."""
    began = time.time()
    while time.time() < began + 5 * args.warm_up:
        if connections(port) >= 4 * tables:
            return max(began + args.warm_up, time.time() + 2 * args.move_interval)
        time.sleep(0.5)
    return time.time() + 0.5


def quantile(ordered: list[float], q: float) -> float:
    """As `copas loadtest`'s percentiles: the sample at q of the sorted samples."""
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def pace_round(name: str, place: Path, tables: int, args: argparse.Namespace
               ) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as data_dir:
        server, port = pace_server(name, place, data_dir)
        try:
            time.sleep(1.0)  # settled: its memory before any table
            idle_kb = tree_rss_kb(process_tree(server.pid))
            drivers = pace_drivers(name, place, port, tables, args)
            start = seated_window(port, tables, args)
            window = (start, start + args.duration, start + args.duration + 1.0)
            for driver in drivers:
                assert driver.stdin is not None
                driver.stdin.write(" ".join(f"{edge:.3f}" for edge in window) + "\n")
                driver.stdin.flush()
            seated = connections(port)
            time.sleep(max(0.0, start - time.time()))
            pids = process_tree(server.pid)
            load_pids = [pid for driver in drivers for pid in process_tree(driver.pid)]
            cpu_before, load_before, opened = tree_cpu(pids), tree_cpu(load_pids), time.time()
            peak_kb = tree_rss_kb(pids)
            while time.time() < window[1]:
                time.sleep(min(1.0, max(0.0, window[1] - time.time())))
                peak_kb = max(peak_kb, tree_rss_kb(pids))
            used, seconds = tree_cpu(pids) - cpu_before, time.time() - opened
            load_used = tree_cpu(load_pids) - load_before
            reports = []
            for driver in drivers:
                out = driver.communicate(timeout=args.duration + 120)[0]
                reports.append(json.loads(out.strip().splitlines()[-1]))
        finally:
            server.terminate()
            server.wait(60)
    moves = sum(report["moves"] for report in reports)
    views = sorted(v for report in reports for v in report["view_ms"])
    return {"cpu_ms_per_card": used * 1000 / max(1, moves), "cores": used / seconds,
            "kb_per_table": (peak_kb - idle_kb) / tables, "view_p50_ms": quantile(views, 0.5),
            "view_p99_ms": quantile(views, 0.99), "moves_per_s": moves / seconds,
            "errors": sum(report["errors"] for report in reports),
            "seated": seated / (4 * tables), "load_cores": load_used / seconds}


FIGURES = ("cpu_ms_per_card", "cores", "kb_per_table", "view_p50_ms", "view_p99_ms",
           "moves_per_s", "errors", "load_cores")


def pace_main(args: argparse.Namespace, place: Path) -> None:
    servers = [name for name in PACE_SERVERS if name in args.servers]
    runs: dict[tuple[str, int], list[dict[str, float]]] = {}
    print(f"human pace: a move per seat's decision after {args.move_interval} s, "
          f"{args.warm_up:g} s warm-up, {args.duration:g} s steady window, "
          f"{args.rounds} round(s), seed {args.seed}", flush=True)
    for round_number in range(1, args.rounds + 1):
        turn = (round_number - 1) % len(servers)  # each round starts with the next server
        for tables in args.tables:
            for name in servers[turn:] + servers[:turn]:
                report = pace_round(name, place, tables, args)
                runs.setdefault((name, tables), []).append(report)
                print(f"round {round_number} {tables} tables {name}: "
                      f"{report['cpu_ms_per_card']:.3f} ms CPU per card, "
                      f"{report['cores']:.2f} cores, {report['kb_per_table']:.0f} KB per table, "
                      f"p50 {report['view_p50_ms']:.1f} / p99 {report['view_p99_ms']:.1f} ms, "
                      f"{report['moves_per_s']:.1f} cards/s "
                      f"(a steady pace: {tables / args.move_interval:.0f}), "
                      f"errors {report['errors']:.0f}; the clients' processes "
                      f"{report['load_cores']:.2f} cores", flush=True)
                if report["seated"] < 1:
                    print(f"  warning: {report['seated']:.0%} of the players were connected "
                          "when the window opened (not within 5 warm-ups)", flush=True)
                if report["moves_per_s"] < 0.9 * tables / args.move_interval:
                    print("  warning: the pace was not held (the machine or a load generator "
                          "is saturated?)", flush=True)
    for tables in args.tables:
        median = {name: {figure: statistics.median(run[figure] for run in runs[name, tables])
                         for figure in FIGURES} for name in servers}
        for name in servers:
            for figure in FIGURES:
                print(f"pace_{name}_{figure}_{tables}={median[name][figure]:.3f}")
        print(f"\n| {tables} tables at a human pace | CPU ms per card | cores | KB per table "
              "| p50 / p99 ms | cards/s |\n|---|---|---|---|---|---|")
        for name in servers:
            m = median[name]
            print(f"| {name} | {m['cpu_ms_per_card']:.3f} | {m['cores']:.2f} | "
                  f"{m['kb_per_table']:.0f} | {m['view_p50_ms']:.1f} / {m['view_p99_ms']:.1f} | "
                  f"{m['moves_per_s']:.0f} |")
        print()
        for ours in ("copas", "copas_memory"):
            for other in servers:
                if ours not in median or other.startswith("copas"):
                    continue
                for figure, short in (("cpu_ms_per_card", "cpu"), ("view_p50_ms", "p50"),
                                      ("kb_per_table", "kb")):
                    ratio = median[ours][figure] / median[other][figure] \
                        if median[other][figure] else float("nan")
                    print(f"pace_{ours}_vs_{other}_{short}_ratio_{tables}={ratio:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pace", action="store_true",
                        help="a human pace (a move per decision after --move-interval) instead "
                             "of flat out")
    parser.add_argument("--tables", type=int, nargs="+",
                        help="table counts (default 20 100; with --pace 250 1000)")
    parser.add_argument("--duration", type=float,
                        help="seconds each run's clients play (default 15; with --pace the "
                             "steady window, 60)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--processes", type=int, default=0,
                        help="client processes per run (default 2; with --pace a Node process "
                             "per peer, and a Python process per 250 tables)")
    parser.add_argument("--warm-up", type=float, default=30.0,
                        help="with --pace: seconds before the steady window at least (more "
                             "until every player is connected, and then two move intervals)")
    parser.add_argument("--move-interval", type=float, default=2.0,
                        help="with --pace: seconds a seat waits before each move")
    parser.add_argument("--seed", type=int, default=1, help="with --pace: the tables' starts")
    parser.add_argument("--servers", nargs="+", default=list(PACE_SERVERS),
                        choices=PACE_SERVERS, help="with --pace: the servers to measure")
    args = parser.parse_args()
    place = install()
    if args.pace:
        args.tables = args.tables or [250, 1000]
        args.duration = args.duration or 60.0
        pace_main(args, place)
        return
    args.tables = args.tables or [20, 100]
    args.duration = args.duration or 15.0
    args.processes = args.processes or 2
    servers = ("copas", *PEERS)
    cpu: dict[tuple[str, int], list[float]] = {}
    rate: dict[tuple[str, int], list[float]] = {}
    for round_number in range(1, args.rounds + 1):
        for tables in args.tables:
            run = argparse.Namespace(tables=tables, duration=args.duration,
                                     processes=args.processes, root=str(ROOT), server_args="")
            for name in servers:
                if name == "copas":
                    report = copas_round(run, "play")
                else:
                    report = peer_round(place, name, run)
                cpu.setdefault((name, tables), []).append(report["server_cpu_ms_per_move"])
                rate.setdefault((name, tables), []).append(report["moves_per_s"])
                print(f"round {round_number} {tables} tables {name}: "
                      f"{report['server_cpu_ms_per_move']:.3f} ms CPU per card, "
                      f"{report['moves_per_s']} moves/s, errors {report['errors'] or 0}",
                      flush=True)
    for tables in args.tables:
        median = {name: statistics.median(cpu[name, tables]) for name in servers}
        for name in servers:
            print(f"{name}_cpu_ms_per_card_{tables}={median[name]:.3f}")
            print(f"{name}_moves_per_s_{tables}={statistics.median(rate[name, tables]):.1f}")
        for peer in PEERS:
            print(f"copas_vs_{peer}_cpu_ratio_{tables}="
                  f"{median['copas'] / median[peer]:.3f}")


if __name__ == "__main__":
    main()

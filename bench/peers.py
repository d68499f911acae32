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
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
from pathlib import Path
from typing import Any

from cpu_per_move import ROOT, copas_round, cpu_seconds, serve

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=int, nargs="+", default=[20, 100])
    parser.add_argument("--duration", type=float, default=15.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--processes", type=int, default=2, help="client processes per run")
    args = parser.parse_args()
    place = install()
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

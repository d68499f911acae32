"""The server's CPU time per card played: Copas against a bare grpc.aio server of the same
message shape, in the same run, alternating.

(a) The Copas server with its defaults (SQLite in a temporary directory, fsync per group
commit, info logs) under `copas loadtest` (greedy bots, 4 players per table each on its own
connection, passing included, finished tables replaced). (b) `bench/echo_swarm.py`: a
grpc.aio server that answers one unary call per move and sends one stream message of the
same size as Copas's average event to each of the table's four players, under a swarm of
the same shape (tables, players, client processes). CPU is read from /proc (every thread of
the server process) before and after; moves are cards played.

Prints ``server_cpu_ms_per_move=``, ``echo_cpu_ms_per_move=`` and
``move_cpu_vs_echo_ratio=`` (medians over the rounds).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}
MESSAGE_BYTES = 350  # Copas's average WatchTable message (a TableEvent with its view)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def serve(command: list[str]) -> subprocess.Popen[str]:
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=ENV)
    assert proc.stdout is not None and "listening" in proc.stdout.readline()
    return proc


def last_json(command: list[str]) -> dict[str, Any]:
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True,
                          env=ENV)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def server_flags(root: Path) -> list[str]:
    """The flags that keep a benchmark server quiet, as far as that server knows them (an
    older checkout given with --root may not)."""
    known = subprocess.run([sys.executable, "-m", "server.main", "--help"], cwd=root,
                           capture_output=True, text=True, env=ENV).stdout
    flags = []
    for flag, value in (("--web-port", "0"), ("--unlimited-quotas", None)):
        if flag in known:
            flags += [flag] if value is None else [flag, value]
    return flags


def copas_round(args: argparse.Namespace) -> dict[str, Any]:
    port = free_port()
    root = Path(args.root)
    with tempfile.TemporaryDirectory() as data_dir:
        server = subprocess.Popen(
            [sys.executable, "-m", "server.main", "--listen", f"127.0.0.1:{port}",
             "--metrics-port", "0", "--data-dir", data_dir, *server_flags(root),
             *shlex.split(args.server_args)],
            cwd=root, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=ENV)
        assert server.stdout is not None and "listening" in server.stdout.readline()
        try:
            before = cpu_seconds(server.pid)
            report = last_json([sys.executable, "-m", "clients.cli", "loadtest", "--server",
                                f"127.0.0.1:{port}", "--tables", str(args.tables),
                                "--duration", str(args.duration), "--processes",
                                str(args.processes), "--json"])
            used = cpu_seconds(server.pid) - before
        finally:
            server.terminate()
            server.wait(30)
    report["server_cpu_ms_per_move"] = round(used * 1000 / max(1, report["moves"]), 4)
    return report


def echo_round(args: argparse.Namespace) -> dict[str, Any]:
    port = free_port()
    server = serve([sys.executable, "bench/echo_swarm.py", "serve", "--port", str(port)])
    try:
        before = cpu_seconds(server.pid)
        report = last_json([sys.executable, "bench/echo_swarm.py", "swarm", "--server",
                            f"127.0.0.1:{port}", "--tables", str(args.tables), "--duration",
                            str(args.duration), "--processes", str(args.processes),
                            "--message-bytes", str(MESSAGE_BYTES), "--json"])
        used = cpu_seconds(server.pid) - before
    finally:
        server.terminate()
        server.wait(30)
    report["server_cpu_ms_per_move"] = round(used * 1000 / max(1, report["moves"]), 4)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=int, default=100)
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--root", default=str(ROOT),
                        help="the checkout whose server and load test to run (to compare an "
                             "older commit in the same run)")
    parser.add_argument("--server-args", default="",
                        help="extra copas-server flags, e.g. --server-args='--data-dir memory'")
    args = parser.parse_args()
    ours: list[float] = []
    echo: list[float] = []
    for round_number in range(1, args.rounds + 1):
        copas = copas_round(args)
        ours.append(copas["server_cpu_ms_per_move"])
        print(f"round {round_number} copas: {copas['server_cpu_ms_per_move']:.3f} ms CPU per "
              f"move, {copas['moves_per_s']} moves/s, move-to-view p99 "
              f"{copas['move_to_view_latency_ms']['p99']} ms, errors {copas['errors'] or 0}",
              flush=True)
        base = echo_round(args)
        echo.append(base["server_cpu_ms_per_move"])
        print(f"round {round_number} echo:  {base['server_cpu_ms_per_move']:.3f} ms CPU per "
              f"move, {base['moves_per_s']} moves/s, view p99 {base['view_p99_ms']} ms",
              flush=True)
    mine, theirs = statistics.median(ours), statistics.median(echo)
    print(f"server_cpu_ms_per_move={mine:.3f}")
    print(f"echo_cpu_ms_per_move={theirs:.3f}")
    print(f"move_cpu_vs_echo_ratio={mine / theirs:.3f}")


if __name__ == "__main__":
    main()

"""The server's CPU time per card played, both ways a client can play: Copas against a bare
grpc.aio server of the same message shape, in the same run, alternating.

(a) The Copas server with its defaults (SQLite in a temporary directory, fsync per group
commit, info logs) under `copas loadtest` (greedy bots, 4 players per table each on its own
connection, passing included, finished tables replaced), over the batched Play stream (one
bidirectional stream per player, one message per seat per commit: the clients' default,
transport ``play``), over today's Play (one message per event and per result:
``play-events``) and over unary calls plus WatchTable (``unary``).
(b) `bench/echo_swarm.py`: a grpc.aio server that takes one move per player's turn (a unary
call, or a message on the player's bidirectional stream) and sends one stream message of the
size of Copas's average event to each of the table's four players (so as many messages as
the batched Play stream sends per card), under a swarm of the same shape (tables, players,
client processes). CPU is read from /proc (every thread of the server process) before and
after; moves are cards played. Each round runs every transport once, alternating.

Prints (medians over the rounds) ``batched_play_cpu_ms_per_move=``,
``batched_vs_play_ratio=`` (batched Play over today's Play), ``batched_vs_echo_ratio=``,
``play_stream_cpu_ms_per_move=`` (today's Play), ``unary_cpu_ms_per_move=``,
``play_stream_vs_unary_ratio=``, ``play_echo_cpu_ms_per_move=``,
``play_stream_vs_echo_ratio=``, and the unary path against its echo as before:
``server_cpu_ms_per_move=``, ``echo_cpu_ms_per_move=``, ``move_cpu_vs_echo_ratio=``.
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
SHAPES = {"play": "play", "play-events": "play", "unary": "unary"}  # transport -> echo shape


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def serve(command: list[str], env: dict[str, str] = ENV) -> subprocess.Popen[str]:
    """Start a server that prints a line with "listening" when it is, and nothing more."""
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=env)
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


def copas_round(args: argparse.Namespace, transport: str = "play") -> dict[str, Any]:
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
                                str(args.processes), "--json", "--transport", transport])
            used = cpu_seconds(server.pid) - before
        finally:
            server.terminate()
            server.wait(30)
    report["server_cpu_ms_per_move"] = round(used * 1000 / max(1, report["moves"]), 4)
    return report


def echo_round(args: argparse.Namespace, shape: str = "unary") -> dict[str, Any]:
    port = free_port()
    server = serve([sys.executable, "bench/echo_swarm.py", "serve", "--port", str(port)])
    try:
        before = cpu_seconds(server.pid)
        report = last_json([sys.executable, "bench/echo_swarm.py", "swarm", "--server",
                            f"127.0.0.1:{port}", "--tables", str(args.tables), "--duration",
                            str(args.duration), "--processes", str(args.processes),
                            "--message-bytes", str(MESSAGE_BYTES), "--json", "--shape", shape])
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
    parser.add_argument("--transports", default="play,play-events,unary",
                        help="the ways to play to measure (an older --root may have only "
                             "unary, or play as one message per event)")
    args = parser.parse_args()
    transports = [t for t in args.transports.split(",") if t]
    copas: dict[str, list[float]] = {t: [] for t in transports}
    shapes = sorted({SHAPES[t] for t in transports})  # the batched and today's Play: one echo
    echo: dict[str, list[float]] = {s: [] for s in shapes}
    for round_number in range(1, args.rounds + 1):
        for transport in transports:
            report = copas_round(args, transport)
            copas[transport].append(report["server_cpu_ms_per_move"])
            print(f"round {round_number} copas {transport}: "
                  f"{report['server_cpu_ms_per_move']:.3f} ms CPU per move, "
                  f"{report['moves_per_s']} moves/s, move-to-view p99 "
                  f"{report['move_to_view_latency_ms']['p99']} ms, errors "
                  f"{report['errors'] or 0}", flush=True)
            shape = SHAPES[transport]
            if len(echo[shape]) == round_number:
                continue  # this round's echo of that shape ran already
            base = echo_round(args, shape)
            echo[shape].append(base["server_cpu_ms_per_move"])
            print(f"round {round_number} echo {shape}:  "
                  f"{base['server_cpu_ms_per_move']:.3f} ms CPU per move, "
                  f"{base['moves_per_s']} moves/s, view p99 {base['view_p99_ms']} ms",
                  flush=True)
    median = {t: statistics.median(v) for t, v in copas.items()}
    baseline = {s: statistics.median(v) for s, v in echo.items()}
    today = "play-events" if "play-events" in median else None
    if "play" in median:
        name = "batched_play" if today else "play_stream"  # an older --root: one per event
        print(f"{name}_cpu_ms_per_move={median['play']:.3f}")
        if today:
            print(f"batched_vs_play_ratio={median['play'] / median[today]:.3f}")
            print(f"batched_vs_echo_ratio={median['play'] / baseline['play']:.3f}")
        else:
            today = "play"
    if today is not None:
        if today != "play":
            print(f"play_stream_cpu_ms_per_move={median[today]:.3f}")
        print(f"play_echo_cpu_ms_per_move={baseline['play']:.3f}")
        print(f"play_stream_vs_echo_ratio={median[today] / baseline['play']:.3f}")
    if "unary" in median:
        print(f"unary_cpu_ms_per_move={median['unary']:.3f}")
        if today is not None:
            print(f"play_stream_vs_unary_ratio={median[today] / median['unary']:.3f}")
        print(f"server_cpu_ms_per_move={median['unary']:.3f}")
        print(f"echo_cpu_ms_per_move={baseline['unary']:.3f}")
        print(f"move_cpu_vs_echo_ratio={median['unary'] / baseline['unary']:.3f}")


if __name__ == "__main__":
    main()

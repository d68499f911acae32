"""Many tables at a human pace: T tables of four connected players, each table making about
one move every ``--move-interval`` seconds (`copas loadtest --move-interval`), against the
Copas server with its defaults (SQLite, fsync per group commit).

Prints the p50/p99 move-to-view latency (a card played to the other players seeing it) as
the clients measure it (their own Python, four processes for 4,000 players, adds to it) and
as the server's own histogram has it (``copas_move_to_view_seconds``: from the move taken to
its event written on each stream; its p99 is the bucket bound it falls under), over the whole
run and in the steady state (after ``--warm-up``: every table made, its players seated and
streaming, a burst of 4,000 joins no human pace has), the moves per
second, the server's CPU per move and share of one core, and its memory per table (peak
resident memory over the tables, after the memory of the idle server), beside what a bare
grpc.aio server holds for the same connections and open streams (`bench/bare_grpc_memory.py`,
measured after the run: the floor under it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


Buckets = list[tuple[float, float]]
COMMITS = "copas_commit_duration_seconds"  # one group commit (the store's transaction)


def move_to_view_buckets(metrics_port: int, name: str = "copas_move_to_view_seconds"
                         ) -> Buckets:
    """The server's ``name`` histogram now (``copas_move_to_view_seconds``): (upper bound in
    seconds, cumulative count) per bucket, from its /metrics."""
    import urllib.request

    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics",
                                  timeout=10).read().decode()
    buckets = []
    for line in text.splitlines():
        if line.startswith(name + "_bucket{"):
            bound = line.split('le="', 1)[1].split('"', 1)[0]
            buckets.append((float(bound), float(line.rsplit(" ", 1)[1])))
    return buckets


def quantile_ms(buckets: Buckets, quantile: float, since: Buckets | None = None) -> float:
    """The upper bound (ms) of the bucket that holds the quantile (of the samples taken
    after ``since``, an earlier reading of the same histogram, when given)."""
    if since is not None:
        buckets = [(bound, count - before) for (bound, count), (_, before)
                   in zip(buckets, since, strict=True)]
    total = buckets[-1][1] if buckets else 0.0
    for bound, count in buckets:
        if total and count >= quantile * total:
            return bound * 1000
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--move-interval", type=float, default=2.0)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--transport", choices=("play", "unary"), default="play")
    parser.add_argument("--warm-up", type=float, default=20.0,
                        help="seconds of the run before the steady state's figures begin")
    args = parser.parse_args()
    port, metrics_port = free_port(), free_port()
    with tempfile.TemporaryDirectory() as data_dir:
        server = subprocess.Popen(
            [sys.executable, "-m", "server.main", "--listen", f"127.0.0.1:{port}",
             "--metrics-port", str(metrics_port), "--web-port", "0", "--data-dir", data_dir,
             "--unlimited-quotas",
             "--max-streams-per-peer", "0"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=ENV)
        try:
            assert server.stdout is not None and "listening" in server.stdout.readline()
            time.sleep(1.0)
            idle = rss_mb(server.pid)
            load = subprocess.Popen(
                [sys.executable, "-m", "clients.cli", "loadtest", "--server",
                 f"127.0.0.1:{port}", "--tables", str(args.tables), "--duration",
                 str(args.duration), "--processes", str(args.processes), "--move-interval",
                 str(args.move_interval), "--json", "--transport", args.transport],
                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                env=ENV)
            # The steady state: what the histogram took after the start (every table made,
            # its 4 players seated and streaming: a burst no human pace has).
            time.sleep(args.warm_up)
            warm = move_to_view_buckets(metrics_port)
            warm_commits = move_to_view_buckets(metrics_port, COMMITS)
            out, _ = load.communicate()
            assert load.returncode == 0, out[-2000:]
            report = json.loads(out.strip().splitlines()[-1])
            end = move_to_view_buckets(metrics_port)
            end_commits = move_to_view_buckets(metrics_port, COMMITS)
        finally:
            server.terminate()
            server.wait(60)
    view = report["move_to_view_latency_ms"]
    cpu = report["server_cpu_ms_per_move"] or 0.0
    per_table = ((report["server_peak_rss_mb"] or idle) - idle) * 1024 / args.tables
    print(f"{args.tables} tables over {args.transport}, a move per table every "
          f"{args.move_interval} s: "
          f"{report['moves_per_s']} moves/s, errors {report['errors'] or 0}")
    print(f"human_pace_view_p50_ms={view['p50']}")
    print(f"human_pace_view_p99_ms={view['p99']}")
    print(f"human_pace_server_view_p50_ms_at_most={quantile_ms(end, 0.5):g}")
    print(f"human_pace_server_view_p99_ms_at_most={quantile_ms(end, 0.99):g}")
    print(f"human_pace_steady_server_view_p50_ms_at_most={quantile_ms(end, 0.5, warm):g}")
    print(f"human_pace_steady_server_view_p99_ms_at_most={quantile_ms(end, 0.99, warm):g}")
    # A move's way to its players holds its group commit (the disk's fsync): its p99 too.
    print("human_pace_steady_commit_p99_ms_at_most="
          f"{quantile_ms(end_commits, 0.99, warm_commits):g}")
    print(f"human_pace_server_core_share={cpu * report['moves_per_s'] / 1000:.2f}")
    print(f"human_pace_kb_per_table={per_table:.1f}")
    sys.path.insert(0, str(ROOT / "bench"))
    from bare_grpc_memory import measure, measure_at_pace

    connection, stream = measure(args.tables)
    bare = 4 * (connection + stream)
    print(f"human_pace_bare_grpc_kb_per_table={bare:.1f} (a connection {connection:.1f}, "
          f"an open stream {stream:.1f})")
    print(f"human_pace_kb_per_table_over_bare_grpc={per_table - bare:.1f}")
    # The same floor with traffic: the bare echo server at the same pace, tables, clients.
    echo = measure_at_pace(args.tables, args.move_interval, min(args.duration, 30.0),
                           args.processes)
    print(f"human_pace_echo_kb_per_table={echo:.1f}")
    print(f"human_pace_kb_per_table_over_echo={per_table - echo:.1f}")


if __name__ == "__main__":
    main()

"""`make bench-cluster`: Copas nodes sharing a PostgreSQL (a throw-away one, started here),
measured against one node in the same run.

1. Server CPU per move (`copas loadtest`, every server process on the port counted): one
   node vs two nodes (`--workers 2`), the clients following each table's owner
   (``x-copas-owner``: each player calls its table's worker on that worker's own port),
   printing ``cluster_cpu_vs_one_node_ratio=`` (target <= 1.2).
2. A forwarded move vs a direct one: tables made on node A, played through A (direct) or
   through node B by old clients that do not follow the owner (every call and stream relayed
   to A); CPU of both nodes per move, printing ``forwarded_vs_direct_cpu_ratio=`` and the
   latencies.
3. Takeover after kill -9: N open tables (one person and three bots each, waiting for the
   person) on node A; A is killed; the time until node B owns and serves every one of them,
   printing ``takeover_seconds=`` and the lease it includes.
4. Moves/s and p99 at 100 and 1,000 tables: one process (the embedded default, SQLite)
   against `--workers 2` on PostgreSQL, clients following the owner (1,000 tables run 40 s:
   their start is slow), printing ``workers2_vs_one_moves_per_s_ratio=``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc
import psycopg
from copas.v1 import copas_pb2, copas_pb2_grpc

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools.pglocal import LocalPostgres, free_port  # noqa: E402

ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "COPAS_WEB_PORT": "0", "COPAS_METRICS_PORT": "0"}
QUIET = ["--log-level", "warning", "--unlimited-quotas", "--web-port", "0", "--metrics-port",
         "0"]


class Postgres:
    def __init__(self) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="copas-bench-pg-"))
        self.base.chmod(0o755)
        self.server = LocalPostgres(self.base / "pg", free_port())
        self.server.create()
        self.server.start()
        self.count = 0

    def database(self) -> str:
        self.count += 1
        name = f"bench_{os.getpid()}_{self.count}"
        with psycopg.connect(self.server.dsn, autocommit=True) as db:
            db.execute(f'CREATE DATABASE "{name}"')
        return f"{self.server.dsn.rsplit('/', 1)[0]}/{name}"

    def close(self) -> None:
        self.server.stop()
        shutil.rmtree(self.base, ignore_errors=True)


def launch(*flags: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-m", "server.main", *QUIET, *flags], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=ENV)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert "listening" in line, line
    return proc


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def loadtest(server: str, tables: int, duration: float, processes: int,
             via: str = "", follow: bool = True) -> dict[str, Any]:
    """``follow``: players call their table's owner (False: old clients, all through
    ``via`` or ``server``)."""
    command = [sys.executable, "-m", "clients.cli", "loadtest", "--server", server,
               "--tables", str(tables), "--duration", str(duration), "--processes",
               str(processes), "--json"]
    if via:
        command += ["--via", via]
    if not follow:
        command += ["--no-follow-owner"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True,
                          env=ENV)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def line(label: str, report: dict[str, Any]) -> str:
    return (f"{label}: {report['server_cpu_ms_per_move']} ms CPU per move, "
            f"{report['moves_per_s']} moves/s, play p50 {report['play_card_latency_ms']['p50']}"
            f" p99 {report['play_card_latency_ms']['p99']} ms, move-to-view p99 "
            f"{report['move_to_view_latency_ms']['p99']} ms, errors {report['errors'] or 0}")


def cpu_one_vs_two(pg: Postgres, args: argparse.Namespace) -> None:
    one, two = [], []
    for round_number in range(1, args.rounds + 1):
        port = free_port()
        node = launch("--listen", f"127.0.0.1:{port}", "--database", pg.database())
        try:
            report = loadtest(f"127.0.0.1:{port}", args.tables, args.duration, 2)
        finally:
            stop(node)
        one.append(report["server_cpu_ms_per_move"])
        print(line(f"round {round_number} one node ", report), flush=True)
        port = free_port()
        nodes = launch("--listen", f"127.0.0.1:{port}", "--database", pg.database(),
                       "--workers", "2")
        try:
            report = loadtest(f"127.0.0.1:{port}", args.tables, args.duration, 2)
        finally:
            stop(nodes)
        two.append(report["server_cpu_ms_per_move"])
        print(line(f"round {round_number} two nodes", report), flush=True)
    a, b = statistics.median(one), statistics.median(two)
    print(f"one_node_cpu_ms_per_move={a:.3f}")
    print(f"two_nodes_cpu_ms_per_move={b:.3f}")
    print(f"cluster_cpu_vs_one_node_ratio={b / a:.3f}", flush=True)


def forwarded_vs_direct(pg: Postgres, args: argparse.Namespace) -> None:
    dsn = pg.database()
    a_port, b_port = free_port(), free_port()
    a = launch("--listen", f"127.0.0.1:{a_port}", "--database", dsn, "--node-id", "a")
    b = launch("--listen", f"127.0.0.1:{b_port}", "--database", dsn, "--node-id", "b")
    direct, forwarded = [], []
    try:
        for round_number in range(1, args.rounds + 1):
            # Direct: made and played on A (B idle, its CPU counted too).
            report = loadtest(f"127.0.0.1:{a_port}", args.tables, args.duration, 2,
                              via=f"127.0.0.1:{a_port}", follow=False)
            both = report  # loadtest counts the processes on --server and --via
            direct.append(both["server_cpu_ms_per_move"])
            print(line(f"round {round_number} direct   ", both), flush=True)
            report = loadtest(f"127.0.0.1:{a_port}", args.tables, args.duration, 2,
                              via=f"127.0.0.1:{b_port}", follow=False)  # old clients
            forwarded.append(report["server_cpu_ms_per_move"])
            print(line(f"round {round_number} forwarded", report), flush=True)
    finally:
        stop(a)
        stop(b)
    d, f = statistics.median(direct), statistics.median(forwarded)
    print(f"direct_cpu_ms_per_move={d:.3f}")
    print(f"forwarded_cpu_ms_per_move={f:.3f}")
    print(f"forwarded_vs_direct_cpu_ratio={f / d:.3f}", flush=True)


def takeover(pg: Postgres, args: argparse.Namespace) -> None:
    dsn = pg.database()
    a_port, b_port = free_port(), free_port()
    lease = args.lease
    a = launch("--listen", f"127.0.0.1:{a_port}", "--database", dsn, "--node-id", "a",
               "--lease", str(lease), "--max-tables", "100000", "--max-players", "100000",
               "--max-bot-tables", "100000")
    b = launch("--listen", f"127.0.0.1:{b_port}", "--database", dsn, "--node-id", "b",
               "--lease", str(lease), "--max-tables", "100000", "--max-players", "100000",
               "--max-bot-tables", "100000")
    try:
        with grpc.insecure_channel(f"127.0.0.1:{a_port}") as channel:
            stub = copas_pb2_grpc.CopasServiceStub(channel)
            rules = copas_pb2.RulesOverrides(play_timeout_seconds=0, pass_timeout_seconds=0,
                                             moon_timeout_seconds=0, trick_pause_seconds=0,
                                             hand_pause_seconds=0, bot_pace_seconds=0)
            for i in range(args.open_tables):
                table = stub.CreateTable(copas_pb2.CreateTableRequest(
                    bot_seats=3, rules=rules, display_name=f"t{i}")).table
                stub.JoinTable(copas_pb2.JoinTableRequest(table_id=table.table_id,
                                                          display_name=f"p{i}"))
        with psycopg.connect(dsn) as db:
            owned = db.execute("SELECT count(*) FROM tables WHERE owner = 'a' "
                               "AND status = 'open'").fetchone()[0]
        a.send_signal(signal.SIGKILL)
        a.wait()
        killed = time.monotonic()
        with psycopg.connect(dsn, autocommit=True) as db:
            while True:
                moved = db.execute("SELECT count(*) FROM tables WHERE owner = 'b'").fetchone()[0]
                if moved >= owned:
                    break
                if time.monotonic() - killed > lease * 4 + 120:
                    raise SystemExit(f"only {moved} of {owned} tables were taken over")
                time.sleep(0.05)
        claimed = time.monotonic() - killed
        # Served: B answers for the last table (it replayed and re-armed each as it claimed).
        with grpc.insecure_channel(f"127.0.0.1:{b_port}") as channel:
            stub = copas_pb2_grpc.CopasServiceStub(channel)
            listed = stub.ListTables(copas_pb2.ListTablesRequest(page_size=1))
            stub.GetTable(copas_pb2.GetTableRequest(table_id=listed.tables[0].table_id),
                          timeout=30)
        served = time.monotonic() - killed
    finally:
        stop(a)
        stop(b)
    print(f"takeover: {owned} open tables on the killed node, lease {lease} s: all owned by "
          f"the other node after {claimed:.2f} s, serving after {served:.2f} s")
    print(f"takeover_seconds={served:.2f} lease_seconds={lease} "
          f"replay_seconds={max(0.0, served - lease):.2f} tables={owned}", flush=True)


def workers_vs_one(pg: Postgres, args: argparse.Namespace) -> None:
    for tables in args.scale:
        # Long enough that the start (tables made, seats taken, streams opened: through
        # other nodes, in a cluster) is not most of the run.
        duration = max(args.duration, tables / 25)
        port = free_port()
        with tempfile.TemporaryDirectory() as data_dir:
            one = launch("--listen", f"127.0.0.1:{port}", "--data-dir", data_dir,
                         "--max-tables", "100000", "--max-players", "100000")
            try:
                single = loadtest(f"127.0.0.1:{port}", tables, duration, 2)
            finally:
                stop(one)
        port = free_port()
        nodes = launch("--listen", f"127.0.0.1:{port}", "--database", pg.database(),
                       "--workers", "2", "--max-tables", "100000", "--max-players", "100000")
        try:
            pair = loadtest(f"127.0.0.1:{port}", tables, duration, 2)
        finally:
            stop(nodes)
        print(line(f"{tables} tables, one process (SQLite)", single))
        print(line(f"{tables} tables, --workers 2 (PostgreSQL)", pair))
        print(f"tables={tables} one_process_moves_per_s={single['moves_per_s']} "
              f"one_process_p99_ms={single['play_card_latency_ms']['p99']} "
              f"workers2_moves_per_s={pair['moves_per_s']} "
              f"workers2_p99_ms={pair['play_card_latency_ms']['p99']}", flush=True)
        print(f"tables={tables} workers2_vs_one_moves_per_s_ratio="
              f"{pair['moves_per_s'] / max(single['moves_per_s'], 1e-9):.3f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=int, default=100)
    parser.add_argument("--duration", type=float, default=15.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--open-tables", type=int, default=1000)
    parser.add_argument("--lease", type=float, default=5.0)
    parser.add_argument("--scale", type=int, nargs="*", default=[100, 1000])
    parser.add_argument("--only", choices=("cpu", "forward", "takeover", "scale"), nargs="*")
    args = parser.parse_args()
    parts = args.only or ["cpu", "forward", "takeover", "scale"]
    pg = Postgres()
    try:
        if "cpu" in parts:
            cpu_one_vs_two(pg, args)
        if "forward" in parts:
            forwarded_vs_direct(pg, args)
        if "takeover" in parts:
            takeover(pg, args)
        if "scale" in parts:
            workers_vs_one(pg, args)
    finally:
        pg.close()


if __name__ == "__main__":
    main()

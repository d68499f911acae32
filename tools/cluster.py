"""`make cluster`: a local PostgreSQL (data under data/pg, created on first use, on
127.0.0.1:54329) and a Copas node per core sharing port 50051 (`copas-server --workers N`).
Ctrl-C stops the nodes, then the PostgreSQL it started.

`make cluster-ha` (``--ha``): the same nodes on a PostgreSQL that fails over instead
(tools/pgha.py: pg_auto_failover's monitor on 127.0.0.1:54330, a primary and a synchronous
secondary on 54331 and 54332, data under data/pgha), reached with a multi-host DSN that
follows the primary. `python -m tools.pgha kill-primary` (another terminal) forces a
failover; `python -m tools.pgha rejoin NAME` brings the lost node back as a secondary.

    python -m tools.cluster [--workers N] [--pg-port 54329] [--pg-dir data/pg] [server flags]
    python -m tools.cluster --ha [--pg-port 54330] [--pg-dir data/pgha] [server flags]
    make cluster CLUSTER_ARGS='--workers 4 --unlimited-quotas'
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

from tools.pgha import Formation
from tools.pglocal import LocalPostgres, PostgresMissing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make cluster", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2,
                        help="nodes to start (default: one per core)")
    parser.add_argument("--ha", action="store_true",
                        help="a PostgreSQL that fails over (pg_auto_failover), not one server")
    parser.add_argument("--pg-port", type=int, default=0,
                        help="PostgreSQL's port (54329); with --ha the monitor's, the data "
                        "nodes on the next two (54330)")
    parser.add_argument("--pg-dir", default="", help="its data (data/pg; with --ha data/pgha)")
    args, server_flags = parser.parse_known_args(argv)
    directory = Path(args.pg_dir or ("data/pgha" if args.ha else "data/pg"))
    directory.resolve().parent.mkdir(parents=True, exist_ok=True)  # data/ on a fresh clone
    if os.geteuid() == 0:  # the postgres user must reach its directory
        for parent in [directory.resolve().parent, *directory.resolve().parent.parents]:
            if parent == Path("/"):
                break
            parent.chmod(parent.stat().st_mode | 0o011)
    if args.ha:
        return _with_failover(directory, args.pg_port or 54330, args.workers, server_flags)
    postgres = LocalPostgres(directory, args.pg_port or 54329)
    try:
        postgres.create()
    except PostgresMissing as exc:
        print(f"make cluster: {exc}", file=sys.stderr)
        return 2
    started = not postgres.is_running()
    if started:
        try:
            postgres.start()
        except RuntimeError as exc:  # e.g. the port is taken: say so, no traceback
            print(f"make cluster: PostgreSQL did not start on port {args.pg_port}: {exc}\n"
                  "(another port: make cluster CLUSTER_ARGS='--pg-port N')", file=sys.stderr)
            return 2
    print(f"PostgreSQL on {postgres.dsn} (data in {directory})", flush=True)
    code = _nodes(postgres.dsn, workers=args.workers, server_flags=server_flags)
    if started:
        postgres.stop()
        print("PostgreSQL stopped", flush=True)
    return code


def _nodes(dsn: str, *, workers: int, server_flags: list[str]) -> int:
    """``copas-server --workers N`` on ``dsn`` until it stops (Ctrl-C, SIGTERM)."""
    server = subprocess.Popen([sys.executable, "-m", "server.main", "--database", dsn,
                               "--workers", str(workers), *server_flags])
    print(f"Starting {workers} nodes on localhost:50051 (copas play, copas loadtest and "
          "the page on http://localhost:8080 use it as they use one server; Ctrl-C stops "
          "it)", flush=True)
    signal.signal(signal.SIGINT, lambda *_: server.send_signal(signal.SIGINT))
    signal.signal(signal.SIGTERM, lambda *_: server.send_signal(signal.SIGTERM))
    return server.wait()


def _with_failover(directory: Path, port: int, workers: int, server_flags: list[str]) -> int:
    """The nodes on a pg_auto_failover formation in ``directory`` (made on first use, started
    again on the next), stopped after them."""
    try:
        formation = Formation(directory, ports=(port, port + 1, port + 2))
    except RuntimeError as exc:
        print(f"make cluster-ha: {exc}", file=sys.stderr)
        return 2
    try:
        formation.create()
    except PostgresMissing as exc:
        print(f"make cluster-ha: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:  # a port taken, a formation made on other ports: say so
        print(f"make cluster-ha: the formation did not start: {exc}\n(other ports: make "
              "cluster-ha CLUSTER_ARGS='--pg-port N': the monitor on N, PostgreSQL on N+1 and "
              f"N+2; or delete {directory} to start from nothing)", file=sys.stderr)
        formation.stop()
        return 2
    print(f"PostgreSQL with failover on {formation.dsn} (pg_auto_failover: data, logs and its "
          f"monitor in {directory}; a failover: python -m tools.pgha kill-primary --dir "
          f"{directory}, then python -m tools.pgha rejoin NODE --dir {directory})", flush=True)
    try:
        return _nodes(formation.dsn, workers=workers, server_flags=server_flags)
    finally:
        formation.stop()
        print("PostgreSQL (the formation) stopped", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())

"""`make cluster`: a local PostgreSQL (data under data/pg, created on first use, on
127.0.0.1:54329) and a Copas node per core sharing port 50051 (`copas-server --workers N`).
Ctrl-C stops the nodes, then the PostgreSQL it started.

    python -m tools.cluster [--workers N] [--pg-port 54329] [--pg-dir data/pg] [server flags]
    make cluster CLUSTER_ARGS='--workers 4 --unlimited-quotas'
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

from tools.pglocal import LocalPostgres, PostgresMissing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make cluster", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2,
                        help="nodes to start (default: one per core)")
    parser.add_argument("--pg-port", type=int, default=54329)
    parser.add_argument("--pg-dir", default="data/pg")
    args, server_flags = parser.parse_known_args(argv)
    directory = Path(args.pg_dir)
    if os.geteuid() == 0:  # the postgres user must reach its directory
        for parent in [directory.resolve().parent, *directory.resolve().parent.parents]:
            if parent == Path("/"):
                break
            parent.chmod(parent.stat().st_mode | 0o011)
    postgres = LocalPostgres(directory, args.pg_port)
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
    server = subprocess.Popen([sys.executable, "-m", "server.main", "--database", postgres.dsn,
                               "--workers", str(args.workers), *server_flags])
    print(f"Starting {args.workers} nodes on localhost:50051 (copas play, copas loadtest and "
          "the page on http://localhost:8080 use it as they use one server; Ctrl-C stops "
          "it)", flush=True)
    signal.signal(signal.SIGINT, lambda *_: server.send_signal(signal.SIGINT))
    signal.signal(signal.SIGTERM, lambda *_: server.send_signal(signal.SIGTERM))
    code = server.wait()
    if started:
        postgres.stop()
        print("PostgreSQL stopped", flush=True)
    return code


if __name__ == "__main__":
    raise SystemExit(main())

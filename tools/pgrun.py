"""Run a command beside a throw-away PostgreSQL: ``python -m tools.pgrun -- pytest ...``
starts a cluster of its own in a temporary directory (tools/pglocal.py), runs the command
with the server's DSN in ``COPAS_TEST_DATABASE`` (the suite's PostgreSQL pass: see
tests/helpers/servers.py) and stops the server and removes the directory on every path: the
command's end, its failure, Ctrl-C or a SIGTERM of this process. Exits with the command's
exit code."""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from types import FrameType

from tools.pglocal import LocalPostgres, PostgresMissing, free_port

VARIABLE = "COPAS_TEST_DATABASE"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.pgrun", description=__doc__)
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="the command to run (after --)")
    command = parser.parse_args(argv).command
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        parser.error("no command to run")
    base = Path(tempfile.mkdtemp(prefix="copas-pgrun-"))
    base.chmod(0o755)  # the postgres user (when run as root) reaches its directory
    server = LocalPostgres(base / "pg", free_port())
    child: subprocess.Popen[bytes] | None = None

    def forward(signum: int, _frame: FrameType | None) -> None:
        if child is not None and child.poll() is None:
            # The command stops itself, then the server is stopped. A Ctrl-C reached it from
            # the terminal already (a second SIGINT would break off its clean-up).
            if signum != signal.SIGINT:
                child.send_signal(signum)
        else:
            raise KeyboardInterrupt

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.create()
        server.start()
        print(f"PostgreSQL on {server.dsn} for: {' '.join(command)}", flush=True)
        child = subprocess.Popen(command, env={**os.environ, VARIABLE: server.dsn})
        return child.wait()
    except PostgresMissing as missing:
        print(f"tools.pgrun: {missing}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if child is not None and child.poll() is None:
            child.kill()
            child.wait()
        server.stop()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

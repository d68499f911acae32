"""Run one step of the suite in a temporary directory of its own and check that it leaves
nothing running: ``python -m tools.testrun -- pytest ...`` runs the command with ``TMPDIR``
(and so every tmp_path, throw-away PostgreSQL and server data directory) inside a fresh
directory; when the command has ended, any process still holding that directory in its
command line or its environment (a server, a bot worker, a PostgreSQL the step started) is a
leftover: it is named, killed, and the step fails. Exits with the command's exit code, or 1
for leftovers."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType

GRACE = 10.0  # seconds for processes that are stopping already (a server's last commit)


def holders(marker: str) -> dict[int, str]:
    """The processes (pid: command line) whose command line or environment holds ``marker``."""
    found: dict[int, str] = {}
    needle = marker.encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
            environment = (entry / "environ").read_bytes()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if needle in command or needle in environment:
            found[int(entry.name)] = command.replace(b"\0", b" ").decode(errors="replace")
    return found


def leftovers(marker: str, grace: float = GRACE) -> dict[int, str]:
    """``holders`` once those stopping on their own had ``grace`` seconds to do so."""
    deadline = time.monotonic() + grace
    left = holders(marker)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = holders(marker)
    return left


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.testrun", description=__doc__)
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command (after --)")
    command = parser.parse_args(argv).command
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        parser.error("no command to run")
    run_dir = Path(tempfile.mkdtemp(prefix="copas-run-"))
    run_dir.chmod(0o755)  # the postgres user (when run as root) reaches its clusters
    child = subprocess.Popen(command, env={**os.environ, "TMPDIR": str(run_dir)})

    def forward(signum: int, _frame: FrameType | None) -> None:
        if child.poll() is None:
            child.send_signal(signum)

    # A SIGTERM is passed on; a Ctrl-C reaches the command from the terminal itself (a second
    # SIGINT would break off its clean-up), so here it only lets the check below run.
    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, lambda _signum, _frame: None)
    code = child.wait()
    left = leftovers(str(run_dir))
    for pid, line in left.items():
        print(f"tools.testrun: left running after the step: {pid} {line}", file=sys.stderr)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    shutil.rmtree(run_dir, ignore_errors=True)
    if left:
        return code or 1
    return code


if __name__ == "__main__":
    sys.exit(main())

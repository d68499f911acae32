"""Load-test moves/s with durability on (SQLite, fsync per group commit) as a ratio to the
same run with the in-memory store, in the same session (rounds alternate).

Prints both and ``durable_vs_memory_ratio=<float>`` (target >= 0.8).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def load(data_dir: str, tables: int, duration: float, processes: int) -> dict[str, object]:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "server.main", "--listen", f"127.0.0.1:{port}",
         "--metrics-port", "0", "--web-port", "0", "--data-dir", data_dir,
         "--log-level", "warning", "--unlimited-quotas"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert server.stdout is not None and "listening" in server.stdout.readline()
        done = subprocess.run(
            [sys.executable, "-m", "clients.cli", "loadtest", "--server", f"127.0.0.1:{port}",
             "--tables", str(tables), "--duration", str(duration), "--processes",
             str(processes), "--json"], cwd=ROOT, capture_output=True, text=True, check=True)
        report: dict[str, object] = json.loads(done.stdout)
        return report
    finally:
        server.terminate()
        server.wait(30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tables", type=int, default=50)
    parser.add_argument("--duration", type=float, default=10)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    durable, memory = [], []
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory() as data_dir:
            report = load(data_dir, args.tables, args.duration, args.processes)
            assert not report["errors"], report["errors"]
            durable.append(float(report["moves_per_s"]))  # type: ignore[arg-type]
        report = load("memory", args.tables, args.duration, args.processes)
        memory.append(float(report["moves_per_s"]))  # type: ignore[arg-type]
    d, m = statistics.median(durable), statistics.median(memory)
    print(f"durable_moves_per_s={d:.0f}  (rounds: {', '.join(f'{x:.0f}' for x in durable)})")
    print(f"memory_moves_per_s={m:.0f}  (rounds: {', '.join(f'{x:.0f}' for x in memory)})")
    print(f"durable_vs_memory_ratio={d / m:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`copas loadtest` against the Copas server, and the bare grpc.aio echo swarm of the same
shape (bench/echo_swarm.py) as its baseline, at the given numbers of concurrent tables.

Prints, per table count, moves/s and the p99 move-to-view latency of both, and their ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from durability import ROOT, free_port

ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}


def serve(args: list[str]) -> subprocess.Popen[str]:
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=ENV)
    assert proc.stdout is not None and "listening" in proc.stdout.readline()
    return proc


def run(cmd: list[str]) -> dict[str, Any]:
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True, env=ENV)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def compare(tables: int, duration: float, processes: int) -> None:
    port = free_port()
    echo = serve([sys.executable, "bench/echo_swarm.py", "serve", "--port", str(port)])
    try:
        base = run([sys.executable, "bench/echo_swarm.py", "swarm", "--server",
                    f"127.0.0.1:{port}", "--tables", str(tables), "--duration", str(duration),
                    "--processes", str(processes), "--json"])
    finally:
        echo.terminate()
        echo.wait(30)
    port = free_port()
    with tempfile.TemporaryDirectory() as data_dir:
        server = serve([sys.executable, "-m", "server.main", "--listen", f"127.0.0.1:{port}",
                        "--metrics-port", "0", "--web-port", "0", "--data-dir", data_dir,
                        "--log-level",
                        "warning", "--unlimited-quotas"])
        try:
            ours = run([sys.executable, "-m", "clients.cli", "loadtest", "--server",
                        f"127.0.0.1:{port}", "--tables", str(tables), "--duration",
                        str(duration), "--processes", str(processes), "--json"])
        finally:
            server.terminate()
            server.wait(60)
    p99 = ours["move_to_view_latency_ms"]["p99"]
    print(f"tables={tables} copas_moves_per_s={ours['moves_per_s']} "
          f"copas_move_to_view_p99_ms={p99} copas_play_card_p99_ms="
          f"{ours['play_card_latency_ms']['p99']} errors={ours['errors']} "
          f"server_peak_rss_mb={ours['server_peak_rss_mb']}")
    print(f"tables={tables} echo_moves_per_s={base['moves_per_s']} "
          f"echo_move_to_view_p99_ms={base['view_p99_ms']} echo_call_p99_ms={base['play_p99_ms']}")
    print(f"tables={tables} moves_per_s_ratio={ours['moves_per_s'] / base['moves_per_s']:.3f} "
          f"view_p99_ratio={p99 / base['view_p99_ms']:.2f}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tables", type=int, nargs="+", default=[100])
    parser.add_argument("--duration", type=float, default=20)
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))
    for tables in args.tables:
        compare(tables, args.duration, args.processes)
    return 0


if __name__ == "__main__":
    sys.exit(main())

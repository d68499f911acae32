"""Start-up of an empty server, printed (never asserted): the wall time from the process's
start (``copas-server`` as ``make run`` starts it: SQLite in a fresh data directory, the web
page and the metrics on ports of their own) until its health service answers SERVING, and the
CPU the process spent to get there. Each round is a new process; a fresh gRPC channel per
attempt, so no reconnect backoff is counted.

Target (issue 29): under 1 s on a quiet machine.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from clients.loadtest import cpu_seconds  # noqa: E402
from tools.pglocal import free_port  # noqa: E402


def _is_serving(address: str) -> bool:
    with grpc.insecure_channel(address) as channel:
        try:
            answer = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=0.5)
        except grpc.RpcError:
            return False
    return answer.status == health_pb2.HealthCheckResponse.SERVING


def one_start() -> tuple[float, float]:
    """(wall seconds to SERVING, CPU seconds the server spent by then)."""
    port = free_port()
    with tempfile.TemporaryDirectory() as data_dir:
        began = time.perf_counter()
        server = subprocess.Popen(
            [sys.executable, "-m", "server.main", "--listen", f"127.0.0.1:{port}",
             "--data-dir", data_dir, "--web-port", str(free_port()), "--metrics-port",
             str(free_port()), "--log-level", "warning"],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while not _is_serving(f"127.0.0.1:{port}"):
                if server.poll() is not None:
                    raise SystemExit(f"the server exited ({server.returncode})")
                time.sleep(0.005)
            wall = time.perf_counter() - began
            cpu = cpu_seconds(server.pid) or 0.0
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(30)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    walls, cpus = [], []
    for number in range(1, args.rounds + 1):
        wall, cpu = one_start()
        walls.append(wall)
        cpus.append(cpu)
        print(f"round {number}: SERVING after {wall:.3f} s, {cpu:.3f} s of CPU", flush=True)
    print(f"startup_to_serving_s={statistics.median(walls):.3f}")
    print(f"startup_cpu_s={statistics.median(cpus):.3f}", flush=True)


if __name__ == "__main__":
    main()

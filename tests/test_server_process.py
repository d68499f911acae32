"""The server as a process: start-up lines, a taken port, SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import grpc
from copas.v1 import copas_pb2, copas_pb2_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.helpers.servers import free_port

ROOT = Path(__file__).resolve().parent.parent


def launch(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "server.main", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def first_line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    return proc.stdout.readline()


def test_help_lists_the_configuration() -> None:
    out = subprocess.run([sys.executable, "-m", "server.main", "--help"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    for flag in ("--listen", "--metrics-port", "--max-tables", "--max-players",
                 "--max-watchers-per-table", "--play-timeout", "--trick-pause",
                 "--allow-seed", "--web-port", "COPAS_"):
        assert flag in out


async def test_sigterm_drains_and_exits_zero_and_a_taken_port_fails_fast(tmp_path: Path) -> None:
    port, metrics = free_port(), free_port()
    proc = launch("--listen", f"127.0.0.1:{port}", "--metrics-port", str(metrics),
                  "--grace", "2", "--log-format", "json", "--data-dir", str(tmp_path))
    try:
        line = await asyncio.to_thread(first_line, proc)
        assert f"listening on 127.0.0.1:{port}" in line
        assert f"metrics on http://localhost:{metrics}/metrics" in await asyncio.to_thread(
            first_line, proc)
        second = await asyncio.to_thread(
            subprocess.run, [sys.executable, "-m", "server.main", "--listen",
                             f"127.0.0.1:{port}", "--metrics-port", "0", "--data-dir",
                             str(tmp_path / "second")],
            cwd=ROOT, capture_output=True, text=True, timeout=30)
        assert second.returncode != 0 and "cannot listen on 127.0.0.1:" in second.stderr
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = copas_pb2_grpc.CopasServiceStub(channel)
            table = (await stub.CreateTable(copas_pb2.CreateTableRequest())).table
            stream = stub.WatchTable(copas_pb2.WatchTableRequest(table_id=table.table_id))
            assert (await stream.read()).event.WhichOneof("kind") == "snapshot"
            health = health_pb2_grpc.HealthStub(channel)
            assert (await health.Check(health_pb2.HealthCheckRequest())).status == \
                health_pb2.HealthCheckResponse.SERVING
            watch_health = health.Watch(health_pb2.HealthCheckRequest(service=""))
            assert (await watch_health.read()).status == health_pb2.HealthCheckResponse.SERVING
            proc.send_signal(signal.SIGTERM)
            status = await asyncio.wait_for(watch_health.read(), 10)
            assert status.status == health_pb2.HealthCheckResponse.NOT_SERVING
            ended = await asyncio.wait_for(stream.read(), 10)  # the stream is closed
            assert ended is grpc.aio.EOF
        code = await asyncio.to_thread(proc.wait, 15)
        assert code == 0
        assert proc.stderr is not None
        logs = proc.stderr.read()
        assert '"event": "server_stopping"' in logs and '"event": "server_stopped"' in logs
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

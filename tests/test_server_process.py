"""The server as a process: start-up lines, a taken port, SIGTERM."""

from __future__ import annotations

import asyncio
import dataclasses
import signal
from pathlib import Path

import grpc
from copas.v1 import copas_pb2, copas_pb2_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.helpers.servers import ServerProcess, free_port, run_server


def test_help_lists_the_configuration() -> None:
    out = run_server("--help").stdout
    for flag in ("--listen", "--metrics-port", "--max-tables", "--max-players",
                 "--max-watchers-per-table", "--play-timeout", "--trick-pause",
                 "--allow-seed", "--web-port", "COPAS_"):
        assert flag in out


def test_every_setting_is_a_flag_with_its_help() -> None:
    """A Config field is a flag (its help beside its default), or built from flags."""
    from server.config import FLAGS, Config

    fields = {f.name for f in dataclasses.fields(Config)}
    assert fields - {f.name for f in FLAGS} == {"rule_defaults"}  # from --play-timeout ...
    out = run_server("--help").stdout
    for f in FLAGS:
        assert "--" + f.name.replace("_", "-") in out, f.name


async def test_sigterm_drains_and_exits_zero_and_a_taken_port_fails_fast(tmp_path: Path) -> None:
    port, metrics = free_port(), free_port()
    server = await asyncio.to_thread(
        ServerProcess, "--metrics-port", str(metrics), "--grace", "2", "--log-format", "json",
        "--data-dir", str(tmp_path), port=port, log_dir=tmp_path)
    try:
        assert f"listening on 127.0.0.1:{port}" in server.first_line
        assert f"metrics on http://localhost:{metrics}/metrics" in await asyncio.to_thread(
            server.next_line)
        second = await asyncio.to_thread(run_server, "--listen", f"127.0.0.1:{port}",
                                         "--data-dir", str(tmp_path / "second"), timeout=30)
        assert second.returncode != 0 and "cannot listen on 127.0.0.1:" in second.stderr
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub = copas_pb2_grpc.CopasServiceStub(channel)
            table = (await stub.CreateTable(copas_pb2.CreateTableRequest())).table
            stream = stub.WatchTable(copas_pb2.WatchTableRequest(table_id=table.table_id))
            assert (await stream.read()).event.WhichOneof("kind") == "snapshot"
            health = health_pb2_grpc.HealthStub(channel)
            assert (await health.Check(health_pb2.HealthCheckRequest())).status == \
                health_pb2.HealthCheckResponse.SERVING
            watch_health = health.Watch(health_pb2.HealthCheckRequest(service=""))
            assert (await watch_health.read()).status == health_pb2.HealthCheckResponse.SERVING
            server.proc.send_signal(signal.SIGTERM)
            status = await asyncio.wait_for(watch_health.read(), 10)
            assert status.status == health_pb2.HealthCheckResponse.NOT_SERVING
            ended = await asyncio.wait_for(stream.read(), 10)  # the stream is closed
            assert ended is grpc.aio.EOF
        code = await asyncio.to_thread(server.proc.wait, 15)
        assert code == 0
        logs = server.log()
        assert '"event": "server_stopping"' in logs and '"event": "server_stopped"' in logs
    finally:
        server.kill9()

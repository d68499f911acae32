"""One lifecycle for the server (server.lifecycle): a start that fails part-way gives back
exactly what it made (no port left bound, the store closed, no worker or task left), and a
stop gives back everything."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from copas.v1 import copas_pb2, copas_pb2_grpc

from server.main import SetupError, start
from tests.helpers.servers import TEST_DATABASE, config_for_tests, free_port


def can_bind(port: int) -> bool:
    """Nothing listens on ``port`` (SO_REUSEADDR: a closed connection's TIME_WAIT counts not)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def others() -> set[asyncio.Task[object]]:
    """The tasks of the loop besides the test's own."""
    return asyncio.all_tasks() - {asyncio.current_task()}  # type: ignore[arg-type]


@pytest.fixture
def taken() -> Iterator[int]:
    """A loopback port something else listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


async def test_a_start_refused_at_the_metrics_port_gives_back_ports_store_and_workers(
        tmp_path: Path, taken: int) -> None:
    """The metrics port comes after the gRPC ports, the web port, the store, the registry,
    the recovered tables' store and the bots' worker pool: all of them are given back."""
    grpc_port, web_port = free_port(), free_port()
    options = {"listen": f"127.0.0.1:{grpc_port}", "web_port": web_port,
               "web_host": "127.0.0.1", "data_dir": str(tmp_path / "data"), "bot_workers": 1,
               "metrics_host": "127.0.0.1"}
    before = others()
    with pytest.raises(OSError, match="cannot serve metrics"):
        await start(config_for_tests(metrics_port=taken, **options))
    assert others() <= before
    assert can_bind(grpc_port) and can_bind(web_port)
    assert not multiprocessing.active_children()
    # The store was closed: the same data directory (and the same ports) start again.
    running = await start(config_for_tests(metrics_port=free_port(), **options))
    await running.stop(0)


async def test_a_start_refused_at_the_web_port_leaves_no_grpc_port_bound(taken: int) -> None:
    grpc_port = free_port()
    before = others()
    with pytest.raises(OSError):
        await start(config_for_tests(listen=f"127.0.0.1:{grpc_port}", web_port=taken,
                                     web_host="127.0.0.1"))
    assert others() <= before
    assert can_bind(grpc_port)


@pytest.mark.skipif(bool(os.environ.get(TEST_DATABASE)), reason="a data directory's own")
async def test_an_unusable_data_directory_after_the_ports_are_bound_closes_them(
        tmp_path: Path) -> None:
    grpc_port, web_port = free_port(), free_port()
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("not a directory")
    with pytest.raises(SetupError):
        await start(config_for_tests(listen=f"127.0.0.1:{grpc_port}", web_port=web_port,
                                     web_host="127.0.0.1", data_dir=str(not_a_directory)))
    assert can_bind(grpc_port) and can_bind(web_port)


async def test_a_stop_gives_back_every_port_worker_and_task(tmp_path: Path) -> None:
    """A server that served (a bots' game, a watcher, metrics, the web page) stops with no
    task, worker process or port left."""
    grpc_port, web_port, metrics_port = free_port(), free_port(), free_port()
    before = others()
    running = await start(config_for_tests(
        listen=f"127.0.0.1:{grpc_port}", web_port=web_port, web_host="127.0.0.1",
        metrics_port=metrics_port, metrics_host="127.0.0.1", bot_workers=1,
        data_dir=str(tmp_path / "data")))
    async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
        stub = copas_pb2_grpc.CopasServiceStub(channel)
        created = await stub.CreateTable(copas_pb2.CreateTableRequest(bot_seats=3))
        joined = await stub.JoinTable(copas_pb2.JoinTableRequest(
            table_id=created.table.table_id, display_name="Ana"))
        watch = stub.WatchTable(copas_pb2.WatchTableRequest(table_id=created.table.table_id),
                                metadata=(("authorization", f"Bearer {joined.player_token}"),))
        await watch.read()
        await running.stop(1.0)
        watch.cancel()
    assert others() <= before
    assert not multiprocessing.active_children()
    assert can_bind(grpc_port) and can_bind(web_port) and can_bind(metrics_port)

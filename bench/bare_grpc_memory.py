"""What a bare grpc.aio server holds for the players of T tables, before any game: one
connection per player (as `copas loadtest` makes them, like separate devices) and one open
bidirectional stream on each (as the Play stream), the server's handler waiting. The floor
under `make bench-pace`'s memory per table: Copas's own state is what it holds beyond this.

Run alone: `python bench/bare_grpc_memory.py --tables 1000` prints
``bare_grpc_kb_per_connection=``, ``bare_grpc_kb_per_stream=`` and
``bare_grpc_kb_per_table=`` (resident memory of the server process, after its idle memory).
``measure_at_pace`` gives the same floor with traffic: the bare echo server of
bench/echo_swarm.py under a swarm at a human pace (`make bench-pace` prints both).
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SERVER = """
import asyncio, grpc
async def main():
    server = grpc.aio.server(options=[("grpc.server.max_pending_requests", 100_000),
                                      ("grpc.server.max_pending_requests_hard_limit", 100_000)])
    async def play(requests, context):
        await context.write(b"ready")
        async for _ in requests:
            pass
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "bench.Bare", {"Play": grpc.stream_stream_rpc_method_handler(play)}),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(port, flush=True)
    await server.wait_for_termination()
asyncio.run(main())
"""


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def _hold(port: int, players: int, pid: int) -> tuple[float, float]:
    import grpc

    time.sleep(0.5)
    idle = rss_kb(pid)
    channels = [grpc.aio.insecure_channel(f"127.0.0.1:{port}",
                                          options=[("grpc.use_local_subchannel_pool", 1)])
                for _ in range(players)]
    await asyncio.gather(*(c.channel_ready() for c in channels))
    await asyncio.sleep(1.0)
    connected = rss_kb(pid)
    streams: list[Any] = [c.stream_stream("/bench.Bare/Play")() for c in channels]
    await asyncio.gather(*(s.read() for s in streams))
    await asyncio.sleep(1.0)
    streaming = rss_kb(pid)
    for s in streams:
        s.cancel()
    await asyncio.gather(*(c.close() for c in channels))
    return (connected - idle) / players, (streaming - connected) / players


def measure(tables: int, players: int = 4) -> tuple[float, float]:
    """KB per connection and per open stream of a bare grpc.aio server, over
    ``tables`` x ``players`` of each."""
    server = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        return asyncio.run(_hold(port, tables * players, server.pid))
    finally:
        server.kill()
        server.wait(30)


def measure_at_pace(tables: int, move_interval: float, duration: float, processes: int,
                    message_bytes: int = 350) -> float:
    """KB per table of the bare grpc.aio echo server (bench/echo_swarm.py, the Play shape:
    one bidirectional stream per player, each on its own connection, every move fanned out
    to the table's 4 streams) under a swarm of ``tables`` moving once per ``move_interval``:
    its peak resident memory over its idle, as `make bench-pace` reads Copas's. The floor
    with traffic: gRPC's buffers grow with what goes through them, idle streams hold less."""
    root = Path(__file__).resolve().parent
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    server = subprocess.Popen([sys.executable, str(root / "echo_swarm.py"), "serve", "--port",
                               str(port)], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and "listening" in server.stdout.readline()
        time.sleep(0.5)
        idle = peak = rss_kb(server.pid)
        swarm = subprocess.Popen(
            [sys.executable, str(root / "echo_swarm.py"), "swarm", "--server",
             f"127.0.0.1:{port}", "--tables", str(tables), "--duration", str(duration),
             "--processes", str(processes), "--message-bytes", str(message_bytes), "--shape",
             "play", "--move-interval", str(move_interval), "--json"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while swarm.poll() is None:
            peak = max(peak, rss_kb(server.pid))
            time.sleep(0.25)
        assert swarm.returncode == 0, "the echo swarm failed"
        return (peak - idle) / tables
    finally:
        server.kill()
        server.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=int, default=1000)
    args = parser.parse_args()
    connection, stream = measure(args.tables)
    print(f"bare_grpc_kb_per_connection={connection:.1f}")
    print(f"bare_grpc_kb_per_stream={stream:.1f}")
    print(f"bare_grpc_kb_per_table={4 * (connection + stream):.1f}")


if __name__ == "__main__":
    main()

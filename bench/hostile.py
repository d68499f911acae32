"""Floods of issue 27's findings 5 and 6 beside an honest table; does the honest player notice?

Starts the server (its defaults: SQLite in a temporary directory, quotas on; loopback is a
trusted proxy, so the flooders can speak for many addresses with ``x-forwarded-for``) and, per
round, times an honest table of four players (``bench/flood.py``'s victim: a move every 25 ms,
each PlayCard's latency) three times: quiet, beside flood 5, beside flood 6. Each flood runs in
a process of its own.

* Flood 5 (spectators): 64 spectators (eight addresses, eight each) read the honest table's
  stream, and two more addresses try to open 1,024 spectator streams each on a table of bots
  playing fast (the quotas let each hold ``--max-spectator-streams-per-peer``).
* Flood 6 (snapshot amplification): two addresses open spectator streams on a long finished
  game with ``after_sequence=1``, read the snapshot and cancel, as fast as their quota allows.

Prints each phase's p50/p99, the flooders' counts, and ``flood5_p99_ratio`` and
``flood6_p99_ratio`` (the honest p99 beside the flood / quiet, medians over rounds; the target
is <= 2.0 each). Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc
from copas.v1 import copas_pb2, copas_pb2_grpc

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from flood import free_port, p, seat_victim, victim  # type: ignore[import-not-found]  # noqa: E402

FAST = {"trick_pause_seconds": 0.0, "hand_pause_seconds": 0.0, "play_timeout_seconds": 0.0,
        "pass_timeout_seconds": 0.0, "moon_timeout_seconds": 0.0}


def as_client(address: str) -> tuple[tuple[str, str], ...]:
    return (("x-forwarded-for", address),)


async def bot_table(stub: copas_pb2_grpc.CopasServiceStub, seed: str) -> str:
    table = (await stub.CreateTable(copas_pb2.CreateTableRequest(
        seed=seed, bot_seats=4, rules=copas_pb2.RulesOverrides(**FAST)),  # type: ignore[arg-type]
        metadata=as_client("203.0.113.200"))).table
    return str(table.table_id)


async def flood5(server: str, honest_table: str, bots_table: str, stop: asyncio.Event
                 ) -> dict[str, int]:
    """64 spectators of the honest table and two addresses asking 1,024 streams each."""
    counts = {"opened": 0, "refused": 0, "messages": 0}

    async def read(stub: Any, table_id: str, address: str) -> None:
        call = stub.WatchTable(copas_pb2.WatchTableRequest(table_id=table_id),
                               metadata=as_client(address))
        try:
            async for _ in call:
                counts["messages"] += 1
                if stop.is_set():
                    break
            counts["opened"] += 1
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                counts["refused"] += 1
        finally:
            call.cancel()

    channels = [grpc.aio.insecure_channel(server) for _ in range(24)]
    stubs = [copas_pb2_grpc.CopasServiceStub(c) for c in channels]
    tasks = [asyncio.create_task(read(stubs[i % 8], honest_table, f"198.51.100.{i // 8 + 1}"))
             for i in range(64)]
    tasks += [asyncio.create_task(read(stubs[8 + i % 16], bots_table,
                                       f"203.0.113.{1 + i // 1024}")) for i in range(2048)]
    await stop.wait()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for channel in channels:
        await channel.close()
    return counts


async def flood6(server: str, finished_table: str, stop: asyncio.Event) -> dict[str, int]:
    """Two addresses opening and resetting history snapshots as fast as they are let."""
    counts = {"snapshots": 0, "refused": 0}

    async def worker(stub: Any, address: str) -> None:
        request = copas_pb2.WatchTableRequest(table_id=finished_table, after_sequence=1)
        while not stop.is_set():
            call = stub.WatchTable(request, metadata=as_client(address))
            try:
                await call.read()
                counts["snapshots"] += 1
            except grpc.aio.AioRpcError:
                counts["refused"] += 1
                await asyncio.sleep(0.005)
            finally:
                call.cancel()

    channels = [grpc.aio.insecure_channel(server) for _ in range(2)]
    tasks = [asyncio.create_task(worker(copas_pb2_grpc.CopasServiceStub(channels[i % 2]),
                                        f"192.0.2.{1 + i % 2}")) for i in range(16)]
    await stop.wait()
    await asyncio.gather(*tasks, return_exceptions=True)
    for channel in channels:
        await channel.close()
    return counts


async def flooder(kind: str, server: str, tables: list[str]) -> dict[str, int]:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    if kind == "5":
        return await flood5(server, tables[0], tables[1], stop)
    return await flood6(server, tables[0], stop)


async def rounds(address: str, args: argparse.Namespace) -> dict[str, list[float]]:
    p99: dict[str, list[float]] = {"quiet": [], "flood5": [], "flood6": []}
    async with grpc.aio.insecure_channel(address) as channel:
        stub = copas_pb2_grpc.CopasServiceStub(channel)
        finished = await bot_table(stub, "long")
        watch = stub.WatchTable(copas_pb2.WatchTableRequest(table_id=finished))
        async for response in watch:  # a long game: a snapshot after 1 lists many events
            if response.event.view.phase == copas_pb2.PHASE_GAME_OVER:
                break
        watch.cancel()
        print(f"finished game: {response.event.sequence} events", flush=True)
        for number in range(args.rounds):
            for phase in ("quiet", "flood5", "flood6"):
                honest = await seat_victim(stub, f"{number}-{phase}")
                flooding = None
                if phase != "quiet":
                    tables = ([honest[0], await bot_table(stub, f"b{number}")]
                              if phase == "flood5" else [finished])
                    flooding = subprocess.Popen(
                        [sys.executable, __file__, "--flood", phase[-1], address, *tables],
                        cwd=ROOT, stdout=subprocess.PIPE, text=True)
                    await asyncio.sleep(2.0)  # let the flood reach full speed
                latencies = await victim(stub, *honest, args.moves)
                p99[phase].append(p(latencies, 0.99))
                line = (f"{phase:7} round {number + 1}: p50 {p(latencies, .5) * 1e3:.2f} ms, "
                        f"p99 {p(latencies, .99) * 1e3:.2f} ms")
                if flooding is not None:
                    flooding.send_signal(signal.SIGTERM)
                    out, _ = await asyncio.to_thread(flooding.communicate, timeout=60)
                    line += f", flooder {out.strip().splitlines()[-1] if out else '?'}"
                print(line, flush=True)
    return p99


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--moves", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--flood", nargs="+", help=argparse.SUPPRESS)  # a flooder process
    parser.add_argument("--server-flag", action="append", default=[],
                        help="a further flag for the server (e.g. --spectator-tick=0)")
    args = parser.parse_args()
    if args.flood:
        kind, server, *tables = args.flood
        print(json.dumps(asyncio.run(flooder(kind, server, tables))))
        return
    address = f"127.0.0.1:{free_port()}"
    with tempfile.TemporaryDirectory() as data_dir:
        server = subprocess.Popen(
            [sys.executable, "-m", "server.main", "--listen", address, "--metrics-port", "0",
             "--web-port", "0", "--data-dir", data_dir, "--log-level", "warning",
             "--allow-seed", "--trusted-proxies", "127.0.0.1", "--bot-table-pace", "0.01",
             "--bot-policy", "auto", *args.server_flag],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        began = time.monotonic()
        try:
            assert server.stdout is not None and "listening" in server.stdout.readline()
            p99 = asyncio.run(rounds(address, args))
        finally:
            server.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                server.wait(15)
    quiet = statistics.median(p99["quiet"])
    print(f"honest_quiet_p99_ms={quiet * 1e3:.2f}")
    for phase in ("flood5", "flood6"):
        flooded = statistics.median(p99[phase])
        print(f"honest_{phase}_p99_ms={flooded * 1e3:.2f}")
        print(f"{phase}_p99_ratio={flooded / quiet:.3f}")
    print(f"seconds={time.monotonic() - began:.0f}")


if __name__ == "__main__":
    main()

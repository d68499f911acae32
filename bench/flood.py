"""One client floods the server with bad calls; does another table notice?

Starts the server (its defaults: SQLite in a temporary directory, quotas on) and, in the same
run, alternates a quiet phase and a flood phase. In both, a victim table of four players plays
``--moves`` cards, a move every 25 ms, and each PlayCard's latency is timed. In the flood
phase another process, with one connection, sends bad calls as fast as the server answers
them (64 in flight: illegal PlayCards with its own valid token, and calls with a forged
token). The flooder is another client: it comes from an address of its own (the server
trusts loopback as a proxy, and the flooder's calls name ``FLOODER`` in x-forwarded-for), so
the victim's address quota is its own, as it would be across the Internet.

Prints the victim's p50/p99 in both phases, the flooder's calls per second, and
``flood_p99_ratio=<victim p99 while flooded ÷ victim p99 in quiet>`` (medians over rounds).
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

import grpc
from copas.v1 import cards_pb2, copas_pb2, copas_pb2_grpc

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine import Game, Rules  # noqa: E402

FLOODER = "198.51.100.66"  # the flooder's address, forwarded (the victim's is 127.0.0.1)
NO_CLOCK = {"trick_pause_seconds": 0.0, "hand_pause_seconds": 0.0, "play_timeout_seconds": 0.0,
            "pass_timeout_seconds": 0.0, "moon_timeout_seconds": 0.0, "max_hands": 0,
            "point_limit": 1000}


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def seat_victim(stub: copas_pb2_grpc.CopasServiceStub, seed: str,
                      origin: tuple[tuple[str, str], ...] = ()
                      ) -> tuple[str, list[tuple[tuple[str, str], ...]], Game]:
    """A table of four players (made before any flood: a flooder on the same address would
    use up the address's quota for creating and joining), created and joined as ``origin``
    (metadata such as an x-forwarded-for: an address's quota of unfinished tables)."""
    table = (await stub.CreateTable(copas_pb2.CreateTableRequest(
        seed=seed, rules=copas_pb2.RulesOverrides(**NO_CLOCK)),  # type: ignore[arg-type]
        metadata=origin)).table
    tokens = []
    for s in range(4):
        join = await stub.JoinTable(copas_pb2.JoinTableRequest(
            table_id=table.table_id, display_name=f"P{s}"), metadata=origin)
        tokens.append((("authorization", f"Bearer {join.player_token}"),))
    return table.table_id, tokens, Game(Rules(max_hands=0, point_limit=1000), seed)


async def victim(stub: copas_pb2_grpc.CopasServiceStub, table_id: str,
                 tokens: list[tuple[tuple[str, str], ...]], replica: Game, moves: int
                 ) -> list[float]:
    """The four players play on, following the game with the engine replica (the table's
    seed is known), a move every 25 ms (each player well within its quota); the latency
    of each PlayCard, in seconds."""
    latencies: list[float] = []
    while len(latencies) < moves and not replica.is_over:
        await asyncio.sleep(0.025)
        seat = replica.to_act()[0]
        action = replica.auto_action(seat)
        if replica.phase.value == "PLAYING":
            began = time.perf_counter()
            await stub.PlayCard(copas_pb2.PlayCardRequest(
                table_id=table_id, card=cards_pb2.Card(text=str(action.card))),  # type: ignore[union-attr]
                metadata=tokens[seat])
            latencies.append(time.perf_counter() - began)
        else:
            await stub.PassCards(copas_pb2.PassCardsRequest(
                table_id=table_id,
                cards=[cards_pb2.Card(text=str(c)) for c in action.cards]),  # type: ignore[union-attr]
                metadata=tokens[seat])
        replica.apply(action)
    return latencies


async def rounds(address: str, args: argparse.Namespace) -> tuple[list[float], list[float],
                                                                  list[float]]:
    quiet: list[float] = []
    flooded: list[float] = []
    rates: list[float] = []
    async with grpc.aio.insecure_channel(address) as channel:
        stub = copas_pb2_grpc.CopasServiceStub(channel)
        for round_number in range(args.rounds):
            tables = [await seat_victim(stub, f"{round_number}-{i}") for i in range(2)]
            lat = await victim(stub, *tables[0], args.moves)
            quiet.append(p(lat, 0.99))
            print(f"quiet   round {round_number + 1}: p50 {p(lat, .5) * 1e3:.2f} ms, "
                  f"p99 {p(lat, .99) * 1e3:.2f} ms", flush=True)
            flooder = subprocess.Popen(
                [sys.executable, __file__, "--flood-only", address, "--seconds", "600"],
                cwd=ROOT, stdout=subprocess.PIPE, text=True)
            await asyncio.sleep(1.0)  # let the flood reach full speed
            began = time.monotonic()
            lat = await victim(stub, *tables[1], args.moves)
            elapsed = time.monotonic() - began
            flooder.terminate()
            out, _ = await asyncio.to_thread(flooder.communicate, timeout=30)
            sent = json.loads(out.strip().splitlines()[-1])["sent"]
            rate = sent / (elapsed + 1.0)
            flooded.append(p(lat, 0.99))
            print(f"flooded round {round_number + 1}: p50 {p(lat, .5) * 1e3:.2f} ms, "
                  f"p99 {p(lat, .99) * 1e3:.2f} ms, flooder {rate:.0f} bad calls/s",
                  flush=True)
            rates.append(rate)
    return quiet, flooded, rates


async def flood(server: str, seconds: float) -> int:
    """Bad calls as fast as they are answered; returns how many were sent."""
    sent = 0
    async with grpc.aio.insecure_channel(server) as channel:
        stub = copas_pb2_grpc.CopasServiceStub(channel)
        origin = (("x-forwarded-for", FLOODER),)
        table = (await stub.CreateTable(copas_pb2.CreateTableRequest(), metadata=origin)).table
        join = await stub.JoinTable(copas_pb2.JoinTableRequest(table_id=table.table_id,
                                                               display_name="flood"),
                                    metadata=origin)
        good = (("authorization", f"Bearer {join.player_token}"), *origin)
        forged = (("authorization", "Bearer forged-token-forged-token"), *origin)
        bad = copas_pb2.PlayCardRequest(table_id=table.table_id, card=cards_pb2.Card(text="2C"))
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        end = time.monotonic() + seconds

        async def worker(metadata: tuple[tuple[str, str], ...]) -> None:
            nonlocal sent
            while time.monotonic() < end and not stop.is_set():
                with contextlib.suppress(grpc.aio.AioRpcError):
                    await stub.PlayCard(bad, metadata=metadata)
                sent += 1

        await asyncio.gather(*(worker(good if i % 2 else forged) for i in range(64)))
    return sent


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--moves", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--flood-only", help=argparse.SUPPRESS)  # the flooder process
    parser.add_argument("--seconds", type=float, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.flood_only:
        print(json.dumps({"sent": asyncio.run(flood(args.flood_only, args.seconds)),
                          "seconds": args.seconds}))
        return
    port = free_port()
    address = f"127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as data_dir:
        server = subprocess.Popen(
            [sys.executable, "-m", "server.main", "--listen", address, "--metrics-port", "0",
             "--web-port", "0", "--data-dir", data_dir, "--log-level", "warning", "--allow-seed",
             "--trusted-proxies", "127.0.0.1"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            assert server.stdout is not None and "listening" in server.stdout.readline()
            quiet, flooded, rates = asyncio.run(rounds(address, args))
        finally:
            server.terminate()
            server.wait(15)
    quiet_p99 = statistics.median(quiet)
    flood_p99 = statistics.median(flooded)
    print(f"victim_quiet_p99_ms={quiet_p99 * 1e3:.2f}")
    print(f"victim_flooded_p99_ms={flood_p99 * 1e3:.2f}")
    print(f"flooder_calls_per_second={statistics.median(rates):.0f}")
    print(f"flood_p99_ratio={flood_p99 / quiet_p99:.3f}")


if __name__ == "__main__":
    main()

"""How soon each player of a championship on a two-node cluster is told its table: the delay
from a round's seat time (its tables made, in the championship's state) to the
WatchChampionship message that names the player's table arriving at the player, per node.

A throw-away PostgreSQL (started here, Debian's postgresql), two nodes on it, ``--players``
accounts of greedy reference bots split between the nodes (each watches and plays through its
own node), ``--rounds`` rounds of one-hand games with duplicate deals scored by matchpoints.
The node that drives the championship seats every round; the other hears of it by
PostgreSQL's notification. Prints p50, p99 and the most of the delays per node (the players
connected to the driving node, and to the other); asserts nothing. Without PostgreSQL it
says so and stops. ``--watch-tick``: the nodes' --championship-watch-tick (a change's
message waits that long: most of the delay; unset: the server's default).

Run: ``.venv/bin/python bench/championship_cluster.py [--players 23] [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools.pglocal import LocalPostgres, PostgresMissing, free_port  # noqa: E402

TOKEN = "operator-token-for-the-championship-cluster-bench"
ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "COPAS_WEB_PORT": "0", "COPAS_METRICS_PORT": "0"}


def launch(dsn: str, node: str, token_file: Path, extra: list[str]) -> tuple[Any, str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "server.main", "--listen", f"127.0.0.1:{port}", "--database",
         dsn, "--node-id", node, "--unlimited-quotas", "--admin-token-file", str(token_file),
         "--bot-workers", "0", "--lease", "2", "--championship-interval", "0.1",
         "--log-level", "warning", "--web-port", "0", "--metrics-port", "0", *extra],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=ENV)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert "listening" in line, line
    return proc, f"127.0.0.1:{port}"


def stop(proc: Any) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Contender:
    """One account: watches the championship on its node, notes when each round's table
    reached it, and plays it (greedy)."""

    def __init__(self, address: str, token: str, cid: str) -> None:
        self.address = address
        self.token = token
        self.cid = cid
        self.told: dict[int, float] = {}  # round -> the wall clock on its table's arrival

    async def run(self) -> None:
        import grpc
        from copas.v1 import championships_pb2 as pb
        from copas.v1 import championships_pb2_grpc, copas_pb2_grpc

        from clients.bots import run_bot
        from clients.common import Player

        metadata = (("authorization", f"Bearer {self.token}"),)
        async with grpc.aio.insecure_channel(self.address) as channel:
            watcher = championships_pb2_grpc.ChampionshipServiceStub(channel)
            game = copas_pb2_grpc.CopasServiceStub(channel)
            playing: dict[str, asyncio.Task[Any]] = {}
            try:
                async for message in watcher.WatchChampionship(
                        pb.WatchChampionshipRequest(championship_id=self.cid),
                        metadata=metadata):
                    mine = message.your_table
                    if mine.table_id and mine.round_number not in self.told:
                        self.told[mine.round_number] = time.time()
                        playing[mine.table_id] = asyncio.ensure_future(run_bot(
                            Player(game, mine.table_id, mine.seat, mine.player_token),
                            "greedy"))
                    if message.championship.state in (pb.CHAMPIONSHIP_STATE_FINISHED,
                                                      pb.CHAMPIONSHIP_STATE_CANCELLED):
                        return
            finally:
                for task in playing.values():
                    task.cancel()
                await asyncio.gather(*playing.values(), return_exceptions=True)


async def championship(addresses: dict[str, str], players: int, rounds: int
                       ) -> tuple[dict[str, list[float]], str, float]:
    """Plays one; the delays by the players' node, the driving node, the time it took."""
    import grpc
    from copas.admin.v1 import admin_pb2, admin_pb2_grpc
    from copas.v1 import accounts_pb2, accounts_pb2_grpc, championships_pb2_grpc, copas_pb2
    from copas.v1 import championships_pb2 as pb

    operator = (("authorization", f"Bearer {TOKEN}"),)
    names = sorted(addresses)
    home = [names[n % len(names)] for n in range(players)]
    tokens = []
    for n in range(players):
        async with grpc.aio.insecure_channel(addresses[home[n]]) as channel:
            accounts = accounts_pb2_grpc.AccountServiceStub(channel)
            tokens.append((await accounts.SignInDevice(accounts_pb2.SignInDeviceRequest(
                device_secret=secrets.token_urlsafe(24), display_name=f"Bench{n:03}"),
                timeout=30)).session.access_token)
    first = addresses[names[0]]
    async with grpc.aio.insecure_channel(first) as channel:
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        rules = copas_pb2.RulesOverrides(max_hands=1, play_timeout_seconds=10,
                                         pass_timeout_seconds=10, moon_timeout_seconds=10,
                                         trick_pause_seconds=0, hand_pause_seconds=0)
        cid = (await admin.CreateChampionship(admin_pb2.CreateChampionshipRequest(
            settings=pb.ChampionshipSettings(
                display_name="Bench cup", rounds=rounds, rules=rules, duplicate_deals=True,
                scoring=pb.CHAMPIONSHIP_SCORING_MATCHPOINTS, max_players=players),
            reason="bench"), metadata=operator)).championship.championship_id
    for n, token in enumerate(tokens):
        async with grpc.aio.insecure_channel(addresses[home[n]]) as channel:
            await championships_pb2_grpc.ChampionshipServiceStub(channel).Register(
                pb.RegisterRequest(championship_id=cid),
                metadata=(("authorization", f"Bearer {token}"),), timeout=30)
    contenders = [Contender(addresses[home[n]], t, cid) for n, t in enumerate(tokens)]
    tasks = [asyncio.ensure_future(c.run()) for c in contenders]
    await asyncio.sleep(1.0)  # every watch open before the start
    began = time.monotonic()
    async with grpc.aio.insecure_channel(first) as channel:
        await admin_pb2_grpc.AdminServiceStub(channel).StartChampionship(
            admin_pb2.StartChampionshipRequest(championship_id=cid, reason="bench"),
            metadata=operator)
    await asyncio.wait_for(asyncio.gather(*tasks), 60 + 60 * rounds)
    took = time.monotonic() - began
    async with grpc.aio.insecure_channel(first) as channel:
        final = (await championships_pb2_grpc.ChampionshipServiceStub(channel).GetChampionship(
            pb.GetChampionshipRequest(championship_id=cid))).championship
        table = final.rounds[0].tables[0].table_id
        driving = (await admin_pb2_grpc.AdminServiceStub(channel).GetTable(
            admin_pb2.GetTableRequest(table_id=table), metadata=operator)).table.owner_node
    seated = {r.round_number: r.seat_time.ToNanoseconds() / 1e9 for r in final.rounds}
    delays: dict[str, list[float]] = {name: [] for name in names}
    for n, contender in enumerate(contenders):
        for round_no, arrived in contender.told.items():
            delays[home[n]].append(arrived - seated[round_no])
    return delays, driving, took


def spread(values: list[float]) -> str:
    if not values:
        return "none"
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return (f"p50 {statistics.median(ordered) * 1e3:.0f} ms, p99 {p99 * 1e3:.0f} ms, "
            f"max {ordered[-1] * 1e3:.0f} ms ({len(ordered)} tellings)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--players", type=int, default=23)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--watch-tick", type=float, default=None,
                        help="the nodes' --championship-watch-tick (unset: the default)")
    args = parser.parse_args()
    extra = [] if args.watch_tick is None else ["--championship-watch-tick",
                                                str(args.watch_tick)]
    base = Path(tempfile.mkdtemp(prefix="copas-bench-champ-"))
    base.chmod(0o755)  # the postgres user (when run as root) reaches its directory
    server = LocalPostgres(base / "pg", free_port())
    try:
        server.create()
    except PostgresMissing as missing:
        print(f"championship on two nodes: skipped ({missing})")
        shutil.rmtree(base, ignore_errors=True)
        return
    procs = []
    try:
        server.start()
        token_file = base / "operator"
        token_file.write_text(TOKEN + "\n")
        import psycopg

        with psycopg.connect(server.dsn, autocommit=True) as db:
            db.execute('CREATE DATABASE "bench"')
        dsn = f"{server.dsn.rsplit('/', 1)[0]}/bench"
        addresses = {}
        for node in ("a", "b"):
            proc, addresses[node] = launch(dsn, node, token_file, extra)
            procs.append(proc)
        delays, driving, took = asyncio.run(championship(addresses, args.players,
                                                         args.rounds))
        print(f"championship on two nodes: {args.players} players, {args.rounds} rounds, "
              f"{took:.1f} s; node {driving} drives it")
        for node, values in delays.items():
            role = "the driving node" if node == driving else "the other node"
            print(f"  told its table (seat time -> the message at the player), {role} "
                  f"({node}): {spread(values)}")
    finally:
        for proc in procs:
            stop(proc)
        server.stop()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()

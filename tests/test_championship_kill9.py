"""A championship survives kill -9s of its server: one mid-round, one between its games'
ends and their count in the standings (the driver told to wait: a long --championship-
interval). After each restart it carries on from the store; it completes with every game
counted once, no round seated twice, and final standings equal to those recomputed from the
game records alone."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import grpc
from copas.admin.v1 import admin_pb2, admin_pb2_grpc
from copas.v1 import championships_pb2 as pb
from copas.v1 import championships_pb2_grpc, copas_pb2, copas_pb2_grpc

from server.championships.format import table_sizes
from tests.helpers.calls import auth
from tests.helpers.championships import FAST_RULES, BotPlayer, recomputed, records_of, sign_in
from tests.helpers.servers import ServerProcess, free_port

PLAYERS, ROUNDS = 7, 3
TOKEN = "operator-token-for-the-kill-9-test"


def start(data: Path, port: int, interval: float) -> ServerProcess:
    return ServerProcess("--data-dir", str(data), "--unlimited-quotas", "--log-level", "info",
                         "--bot-workers", "0", "--admin-token-file", str(data.parent / "t"),
                         "--championship-interval", str(interval), port=port,
                         log_dir=data.parent)


async def get(address: str, cid: str) -> pb.Championship:
    async with grpc.aio.insecure_channel(address) as channel:
        return (await championships_pb2_grpc.ChampionshipServiceStub(channel).GetChampionship(
            pb.GetChampionshipRequest(championship_id=cid), timeout=10)).championship


async def until(condition: object, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not await condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def games_over(address: str, tables: list[str]) -> bool:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = copas_pb2_grpc.CopasServiceStub(channel)
        for table_id in tables:  # (their records are withheld until the round is over)
            try:
                table = (await stub.GetTable(copas_pb2.GetTableRequest(table_id=table_id),
                                             timeout=10)).table
            except grpc.aio.AioRpcError:
                return False
            if table.phase != copas_pb2.PHASE_GAME_OVER:
                return False
    return True


async def test_kill_9_mid_round_and_before_the_count_lose_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (tmp_path / "t").write_text(TOKEN + "\n")
    port = free_port()
    address = f"127.0.0.1:{port}"
    server = start(data, port, 0.1)
    tasks: list[asyncio.Task[None]] = []
    try:
        sessions = await sign_in(address, [f"K{n}" for n in range(PLAYERS)])
        async with grpc.aio.insecure_channel(address) as channel:
            admin = admin_pb2_grpc.AdminServiceStub(channel)
            champs = championships_pb2_grpc.ChampionshipServiceStub(channel)
            cid = (await admin.CreateChampionship(admin_pb2.CreateChampionshipRequest(
                settings=pb.ChampionshipSettings(
                    display_name="Kill cup", rounds=ROUNDS, rules=FAST_RULES,
                    max_players=PLAYERS, start_when_full=True),
                reason="test"), metadata=(("authorization", f"Bearer {TOKEN}"),))
            ).championship.championship_id
            for session in sessions:
                await champs.Register(pb.RegisterRequest(championship_id=cid),
                                      metadata=auth(session.access_token))
        bots = [BotPlayer(address, s, cid) for s in sessions]
        tasks = [asyncio.ensure_future(b.run()) for b in bots]

        # 1. Mid-round 2: its tables seated and being played.
        async def round_two() -> bool:
            return (await get(address, cid)).current_round == 2
        await until(round_two)
        server.kill9()
        server = start(data, port, 3600.0)  # 2. the driver steps once at start, then waits

        async def round_two_over() -> bool:
            c = await get(address, cid)
            return await games_over(address, [t.table_id for t in c.rounds[1].tables])
        await until(round_two_over)
        waiting = await get(address, cid)
        assert waiting.current_round == 2
        assert not all(t.is_finished for t in waiting.rounds[1].tables)  # ended, not counted
        server.kill9()
        server = start(data, port, 0.1)
        await asyncio.wait_for(asyncio.gather(*tasks), 120)
        final = await get(address, cid)
        assert final.state == pb.CHAMPIONSHIP_STATE_FINISHED
        assert [sorted(len(t.seats) for t in r.tables) for r in final.rounds] == \
            [sorted(table_sizes(PLAYERS))] * ROUNDS
        assert all(t.is_finished for r in final.rounds for t in r.tables)
        assert all(line.games == ROUNDS for line in final.standings)
        ids = [t.table_id for r in final.rounds for t in r.tables]
        assert len(set(ids)) == len(ids) == ROUNDS * len(table_sizes(PLAYERS))
        names_of = {p.player_id: p.display_name for p in final.players}
        expected = recomputed(final, await records_of(address, final))
        assert [(names_of[s.player], s.points, s.games) for s in expected] == \
            [(line.display_name, line.points, line.games) for line in final.standings]
        async with grpc.aio.insecure_channel(address) as channel:  # no table made twice
            records = (await copas_pb2_grpc.CopasServiceStub(channel).ListGameRecords(
                copas_pb2.ListGameRecordsRequest(page_size=100), timeout=10)).records
            tables = (await admin_pb2_grpc.AdminServiceStub(channel).ListTables(
                admin_pb2.ListTablesRequest(page_size=1000),
                metadata=(("authorization", f"Bearer {TOKEN}"),), timeout=10)).tables
        assert sorted(r.record_id for r in records) == sorted(ids)
        assert sorted(t.table_id for t in tables) == sorted(ids)  # none waiting or running
        assert server.stop() == 0
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        server.proc.kill()

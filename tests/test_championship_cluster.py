"""A championship on a two-node PostgreSQL cluster: node a drives it (it holds the
championship's lease), the players register and watch through node b; a is killed -9
mid-round 2; b takes over a's tables and the championship's lease, counts round 2 and seats
round 3 itself. The final standings equal those recomputed from the game records; no game is
lost or counted twice, no table made twice."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import grpc
from copas.admin.v1 import admin_pb2, admin_pb2_grpc
from copas.v1 import championships_pb2 as pb
from copas.v1 import championships_pb2_grpc, copas_pb2, copas_pb2_grpc

from server.championships.format import table_sizes
from tests.helpers.calls import Watch, auth
from tests.helpers.championships import (
    FAST_RULES,
    OPERATOR,
    OPERATOR_CALL,
    BotPlayer,
    championship_of,
    cluster_node,
    recomputed,
    records_of,
    sign_in,
    table_owners,
)
from tests.helpers.servers import ServerProcess, fresh_database

PLAYERS, ROUNDS = 23, 3  # the 23 accounts: tables of 4, 4, 4, 4, 4, 3 each round


async def test_a_node_killed_mid_round_two_and_the_other_carries_on(
        postgres: Any, tmp_path: Path) -> None:
    dsn = fresh_database(postgres.dsn)
    (tmp_path / "operator").write_text(OPERATOR + "\n")
    a = cluster_node(dsn, "a", tmp_path)
    b: ServerProcess | None = None
    tasks: list[asyncio.Task[None]] = []
    try:
        async with grpc.aio.insecure_channel(a.address) as on_a:
            cid = (await admin_pb2_grpc.AdminServiceStub(on_a).CreateChampionship(
                admin_pb2.CreateChampionshipRequest(settings=pb.ChampionshipSettings(
                    display_name="Cluster cup", rounds=ROUNDS, rules=FAST_RULES,
                    max_players=PLAYERS, start_when_full=True), reason="test"),
                metadata=OPERATOR_CALL)).championship.championship_id
        b = cluster_node(dsn, "b", tmp_path)
        sessions = await sign_in(b.address, [f"C{n}" for n in range(PLAYERS)])
        async with grpc.aio.insecure_channel(b.address) as on_b:
            champs = championships_pb2_grpc.ChampionshipServiceStub(on_b)
            for session in sessions:
                await champs.Register(pb.RegisterRequest(championship_id=cid),
                                      metadata=auth(session.access_token))
        deadline = time.monotonic() + 60
        while (c := await championship_of(b.address, cid)).current_round < 1:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        # Whichever node stepped the championship when it filled drives it (its lease): the
        # players follow it through the other node, and the driving node is killed.
        (driving,) = await table_owners(b.address, [t.table_id for t in c.rounds[0].tables])
        killed, survivor = (a, b) if driving == "a" else (b, a)
        bots = [BotPlayer(survivor.address, s, cid) for s in sessions]
        tasks = [asyncio.ensure_future(bot.run()) for bot in bots]
        while (c := await championship_of(survivor.address, cid)).current_round < 2:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        assert await table_owners(survivor.address,
                                  [t.table_id for t in c.rounds[0].tables]) == {driving}
        killed.kill9()
        await asyncio.wait_for(asyncio.gather(*tasks), 120)
        b = survivor
        final = await championship_of(b.address, cid)
        assert final.state == pb.CHAMPIONSHIP_STATE_FINISHED
        assert [sorted(len(t.seats) for t in r.tables) for r in final.rounds] == \
            [sorted(table_sizes(PLAYERS))] * ROUNDS
        assert await table_owners(b.address, [t.table_id for t in final.rounds[-1].tables]) \
            == {"a" if driving == "b" else "b"}
        assert all(line.games == ROUNDS for line in final.standings)
        ids = [t.table_id for r in final.rounds for t in r.tables]
        names_of = {p.player_id: p.display_name for p in final.players}
        expected = recomputed(final, await records_of(b.address, final))
        assert [(names_of[s.player], s.points) for s in expected] == \
            [(line.display_name, line.points) for line in final.standings]
        async with grpc.aio.insecure_channel(b.address) as on_b:
            tables = (await admin_pb2_grpc.AdminServiceStub(on_b).ListTables(
                admin_pb2.ListTablesRequest(page_size=1000), metadata=OPERATOR_CALL,
                timeout=10)).tables
            records = (await copas_pb2_grpc.CopasServiceStub(on_b).ListGameRecords(
                copas_pb2.ListGameRecordsRequest(page_size=100), timeout=10)).records
        assert sorted(t.table_id for t in tables) == sorted(ids)  # none made twice
        assert sorted(r.record_id for r in records) == sorted(ids)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        a.proc.kill()
        if b is not None:
            b.proc.kill()


# Clocks long enough that the game cannot end by itself before the cancel reaches it.
SLOW_RULES = copas_pb2.RulesOverrides(max_hands=1, play_timeout_seconds=60,
                                      pass_timeout_seconds=60, moon_timeout_seconds=60,
                                      trick_pause_seconds=0, hand_pause_seconds=0)


async def test_a_cancel_through_the_other_node_ends_the_games_where_they_run(
        postgres: Any, tmp_path: Path) -> None:
    """An operator cancels through a node that does not drive the championship: the games
    running on the node that does end CLOSED there (its driver sees the cancel). Either node
    may drive it (whichever holds its lease when it starts): the test finds which from the
    table's owner and cancels through the other."""
    dsn = fresh_database(postgres.dsn)
    (tmp_path / "operator").write_text(OPERATOR + "\n")
    nodes = {"a": cluster_node(dsn, "a", tmp_path)}
    try:
        async with grpc.aio.insecure_channel(nodes["a"].address) as on_a:
            cid = (await admin_pb2_grpc.AdminServiceStub(on_a).CreateChampionship(
                admin_pb2.CreateChampionshipRequest(settings=pb.ChampionshipSettings(
                    display_name="Cancelled cup", rounds=2, rules=SLOW_RULES, max_players=4,
                    start_when_full=True), reason="test"),
                metadata=OPERATOR_CALL)).championship.championship_id
        nodes["b"] = cluster_node(dsn, "b", tmp_path)
        sessions = await sign_in(nodes["b"].address, [f"X{n}" for n in range(4)])
        async with grpc.aio.insecure_channel(nodes["b"].address) as on_b:
            champs = championships_pb2_grpc.ChampionshipServiceStub(on_b)
            for session in sessions:
                await champs.Register(pb.RegisterRequest(championship_id=cid),
                                      metadata=auth(session.access_token))
            tokens = []
            for session in sessions:  # each watches its seat and never plays: the clocks run
                async for message in champs.WatchChampionship(pb.WatchChampionshipRequest(
                        championship_id=cid), metadata=auth(session.access_token),
                        timeout=30):
                    if message.your_table.table_id:
                        table_id = message.your_table.table_id
                        tokens.append(message.your_table.player_token)
                        break
        owners = await table_owners(nodes["b"].address, [table_id])
        assert len(owners) == 1
        (driving,) = owners
        driver, other = nodes[driving], nodes["b" if driving == "a" else "a"]
        async with grpc.aio.insecure_channel(driver.address) as on_driver:
            stub = copas_pb2_grpc.CopasServiceStub(on_driver)
            seated = [Watch(stub, table_id, token) for token in tokens]
            for watch in seated:
                await watch.opened()
            assert (await stub.GetTable(copas_pb2.GetTableRequest(table_id=table_id))
                    ).table.phase != copas_pb2.PHASE_GAME_OVER
        async with grpc.aio.insecure_channel(other.address) as on_other:
            cancelled = (await admin_pb2_grpc.AdminServiceStub(on_other).CancelChampionship(
                admin_pb2.CancelChampionshipRequest(championship_id=cid, reason="test"),
                metadata=OPERATOR_CALL)).championship
            assert cancelled.state == pb.CHAMPIONSHIP_STATE_CANCELLED
        async with grpc.aio.insecure_channel(driver.address) as on_driver:
            game = copas_pb2_grpc.CopasServiceStub(on_driver)
            deadline = time.monotonic() + 30
            while (await game.GetTable(copas_pb2.GetTableRequest(table_id=table_id),
                                       timeout=10)).table.phase != copas_pb2.PHASE_GAME_OVER:
                assert time.monotonic() < deadline, "the game never ended where it ran"
                await asyncio.sleep(0.05)
            record = (await game.GetGameRecord(copas_pb2.GetGameRecordRequest(
                record_id=table_id), timeout=10)).record
            for watch in seated:
                await watch.close()
        assert json.loads(record.record_json)["result"]["end_reason"] == "CLOSED"
    finally:
        for node in nodes.values():
            node.proc.kill()


def quiet_node(dsn: str, node_id: str, tmp: Path) -> ServerProcess:
    """A node whose championship watchers never read the store again by themselves: what
    they are told comes from the changes the other nodes notify."""
    return cluster_node(dsn, node_id, tmp, "--championship-watch-recheck", "600")


async def started(nodes: dict[str, ServerProcess], name: str, rounds: int, players: int
                  ) -> tuple[str, list[Any], str]:
    """A championship of ``players`` accounts made, registered and started through node a;
    (its id, the accounts, the node that drives it: the owner of round 1's tables)."""
    a = nodes["a"]
    sessions = await sign_in(a.address, [f"{name[0]}{n}" for n in range(players)])
    async with grpc.aio.insecure_channel(a.address) as on_a:
        admin = admin_pb2_grpc.AdminServiceStub(on_a)
        cid = (await admin.CreateChampionship(admin_pb2.CreateChampionshipRequest(
            settings=pb.ChampionshipSettings(display_name=name, rounds=rounds,
                                             rules=FAST_RULES, max_players=players),
            reason="test"), metadata=OPERATOR_CALL)).championship.championship_id
        champs = championships_pb2_grpc.ChampionshipServiceStub(on_a)
        for session in sessions:
            await champs.Register(pb.RegisterRequest(championship_id=cid),
                                  metadata=auth(session.access_token))
        await admin.StartChampionship(admin_pb2.StartChampionshipRequest(
            championship_id=cid, reason="test"), metadata=OPERATOR_CALL)
    deadline = time.monotonic() + 60
    while not (c := await championship_of(a.address, cid)).rounds:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    (driving,) = await table_owners(a.address, [t.table_id for t in c.rounds[0].tables])
    return cid, sessions, driving


async def test_a_node_that_does_not_drive_tells_its_watchers_of_each_round_at_once(
        postgres: Any, tmp_path: Path) -> None:
    """The review's finding: players connected to the node that does not run the championship
    were told of a new round about 4.5 s late (its watchers read the store every 5 s) and
    ranked as no-shows. Here no node rereads by itself (a 600 s backstop): every round still
    reaches the watchers of the node that does not drive it, since every node hears each
    change as it is written, and the players play the whole championship through it."""
    dsn = fresh_database(postgres.dsn)
    (tmp_path / "operator").write_text(OPERATOR + "\n")
    nodes = {"a": quiet_node(dsn, "a", tmp_path), "b": quiet_node(dsn, "b", tmp_path)}
    tasks: list[asyncio.Task[None]] = []
    try:
        cid, sessions, driving = await started(nodes, "Told cup", 3, 8)
        other = nodes["b" if driving == "a" else "a"]
        bots = [BotPlayer(other.address, s, cid) for s in sessions]
        tasks = [asyncio.ensure_future(bot.run()) for bot in bots]
        await asyncio.wait_for(asyncio.gather(*tasks), 120)
        final = await championship_of(other.address, cid)
        assert final.state == pb.CHAMPIONSHIP_STATE_FINISHED
        assert all(line.games == 3 for line in final.standings)
        assert [len(bot.played) for bot in bots] == [3] * 8  # told each round's table
        assert await table_owners(
            other.address, [t.table_id for r in final.rounds for t in r.tables]) == {driving}
        records = await records_of(other.address, final)
        assert all(s.get("acted") is not False for r in records.values() for s in r["seats"])
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for process in nodes.values():
            process.proc.kill()


async def test_a_drained_node_hands_its_championship_over(postgres: Any, tmp_path: Path
                                                        ) -> None:
    """The review's finding: a drained node kept its championships and could not seat their
    rounds (NODE_DRAINING, retried every second). Draining the driving node mid-round gives
    its championship up with its tables: the other node counts the round and seats the
    next, and the championship ends."""
    dsn = fresh_database(postgres.dsn)
    (tmp_path / "operator").write_text(OPERATOR + "\n")
    nodes = {"a": cluster_node(dsn, "a", tmp_path), "b": cluster_node(dsn, "b", tmp_path)}
    tasks: list[asyncio.Task[None]] = []
    try:
        cid, sessions, driving = await started(nodes, "Drained cup", 3, 8)
        other = nodes["b" if driving == "a" else "a"]
        bots = [BotPlayer(other.address, s, cid) for s in sessions]
        tasks = [asyncio.ensure_future(bot.run()) for bot in bots]
        deadline = time.monotonic() + 60
        while (await championship_of(other.address, cid)).current_round < 2:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        async with grpc.aio.insecure_channel(nodes[driving].address) as on_driver:
            drained = await admin_pb2_grpc.AdminServiceStub(on_driver).Drain(
                admin_pb2.DrainRequest(), metadata=OPERATOR_CALL)
        assert drained.is_draining
        await asyncio.wait_for(asyncio.gather(*tasks), 120)
        final = await championship_of(other.address, cid)
        assert final.state == pb.CHAMPIONSHIP_STATE_FINISHED
        assert all(line.games == 3 for line in final.standings)
        survivor = "b" if driving == "a" else "a"
        assert await table_owners(other.address, [t.table_id for t in final.rounds[2].tables]) \
            == {survivor}
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for process in nodes.values():
            process.proc.kill()

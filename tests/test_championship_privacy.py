"""Hidden until it cannot help (issue 38): with duplicate deals, the tables of a round play the
same cards, so nothing of one table may be read while another still plays: a finished table's
record (its seed, passes and every card) is withheld from everyone until the round ends, and
nobody but its players watches a table. Once the round is over, its records are published."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import grpc
from copas.admin.v1 import admin_pb2, admin_pb2_grpc
from copas.v1 import championships_pb2 as pb
from copas.v1 import championships_pb2_grpc, copas_pb2

from clients.common import error_reason
from tests.helpers.calls import auth, play_out
from tests.helpers.championships import sign_in
from tests.helpers.servers import serving

ADMIN_TOKEN = "operator-token-for-the-privacy-tests"
SLOW = copas_pb2.RulesOverrides(max_hands=1, play_timeout_seconds=600, pass_timeout_seconds=600,
                                moon_timeout_seconds=600, trick_pause_seconds=0,
                                hand_pause_seconds=0)


async def _reason(call: Any) -> str:
    try:
        await call
    except grpc.aio.AioRpcError as error:
        return error_reason(error)
    return "OK"


async def _tables(champs: Any, cid: str, sessions: list[Any]) -> dict[str, dict[int, str]]:
    """Each table of round 1 and its players' tokens, from each person's WatchChampionship."""
    tables: dict[str, dict[int, str]] = {}
    for session in sessions:
        stream = champs.WatchChampionship(pb.WatchChampionshipRequest(championship_id=cid),
                                          metadata=auth(session.access_token))
        async for message in stream:
            if message.your_table.table_id:
                mine = message.your_table
                tables.setdefault(mine.table_id, {})[mine.seat] = mine.player_token
                break
        stream.cancel()
    return tables


async def test_a_duplicate_rounds_records_are_withheld_and_its_tables_not_watched(
        tmp_path: Path) -> None:
    token_file = tmp_path / "admin-token"
    token_file.write_text(ADMIN_TOKEN + "\n")
    async with serving(admin_token_file=str(token_file), championship_interval=0.05,
                       rate_one_network=True) as (running, game), \
            grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        champs = championships_pb2_grpc.ChampionshipServiceStub(channel)
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        operator = (("authorization", f"Bearer {ADMIN_TOKEN}"),)
        made = (await admin.CreateChampionship(admin_pb2.CreateChampionshipRequest(
            settings=pb.ChampionshipSettings(display_name="Duplicate Cup", rounds=1,
                                             rules=SLOW, duplicate_deals=True),
            reason="a test"), metadata=operator)).championship
        cid = made.championship_id
        sessions = await sign_in(f"127.0.0.1:{running.port}", [f"Dup {n}" for n in range(8)])
        for session in sessions:
            await champs.Register(pb.RegisterRequest(championship_id=cid),
                                  metadata=auth(session.access_token))
        await admin.StartChampionship(admin_pb2.StartChampionshipRequest(
            championship_id=cid, reason="a test"), metadata=operator)
        tables = await _tables(champs, cid, sessions)
        assert len(tables) == 2 and all(len(seats) == 4 for seats in tables.values())
        first, second = sorted(tables)
        # Nobody but its players watches either table, while they play or after.
        for table_id in (first, second):
            assert await _reason(game.WatchTable(copas_pb2.WatchTableRequest(
                table_id=table_id)).read()) == "SPECTATING_CLOSED"
        await play_out(game, first, tables[first])  # one table ends; the other still plays
        for call in (game.GetGameRecord(copas_pb2.GetGameRecordRequest(record_id=first)),
                     game.GetGameRecord(copas_pb2.GetGameRecordRequest(record_id=first),
                                        metadata=auth(sessions[0].access_token))):
            assert await _reason(call) == "RECORD_WITHHELD"
        listed = await game.ListGameRecords(copas_pb2.ListGameRecordsRequest(page_size=100))
        assert first not in [r.record_id for r in listed.records]
        assert await _reason(game.WatchTable(copas_pb2.WatchTableRequest(
            table_id=first)).read()) == "SPECTATING_CLOSED"
        # Nor its scores: the championship shows the table ended (once counted) but none of
        # its results, and no standings, until the round ends; the lobby's summary no totals.
        for _ in range(400):
            c = (await champs.GetChampionship(pb.GetChampionshipRequest(
                championship_id=cid))).championship
            shown = {t.table_id: t for t in c.rounds[0].tables}
            if shown[first].is_finished:
                break
            await asyncio.sleep(0.05)
        assert shown[first].is_finished and not shown[second].is_finished
        assert not c.rounds[0].is_finished
        assert all((s.total, s.place, s.points, s.matchpoints) == (0, 0, 0, 0)
                   for t in shown.values() for s in t.seats)
        assert all(line.games == 0 and line.points == 0 for line in c.standings)
        for table_id in (first, second):
            summary = (await game.GetTable(copas_pb2.GetTableRequest(table_id=table_id))).table
            assert [s.total for s in summary.seats] == [0, 0, 0, 0]
        # Its own players still see their table, and the other table's players theirs.
        view = (await game.GetView(copas_pb2.GetViewRequest(table_id=second),
                                   metadata=auth(tables[second][0]))).view
        assert view.phase != copas_pb2.PHASE_GAME_OVER and len(view.hand) > 0
        # The round ends: its records are published, with the deal they share.
        await play_out(game, second, tables[second])
        for _ in range(400):
            c = (await champs.GetChampionship(pb.GetChampionshipRequest(
                championship_id=cid))).championship
            if c.state == pb.CHAMPIONSHIP_STATE_FINISHED:
                break
            await asyncio.sleep(0.05)
        assert c.state == pb.CHAMPIONSHIP_STATE_FINISHED
        records = [(await game.GetGameRecord(copas_pb2.GetGameRecordRequest(
            record_id=table_id))).record for table_id in (first, second)]
        assert {r.championship_id for r in records} == {cid}
        assert records[0].seed == records[1].seed  # duplicate deals: the same cards
        # Now every result is shown, as the records give them.
        shown = {t.table_id: t for t in c.rounds[0].tables}
        for record in records:
            totals = [s.total for s in shown[record.record_id].seats]
            assert totals == [s.total for s in record.seats] and sum(totals) > 0
        assert all(line.games == 1 for line in c.standings)
        assert all(json.loads(r.record_json)["actions"] for r in records)


async def test_a_championship_without_duplicate_deals_keeps_its_records_for_the_rounds_end(
        tmp_path: Path) -> None:
    """The same rule without duplicate deals (a round's results are published together);
    spectators may watch such tables."""
    token_file = tmp_path / "admin-token"
    token_file.write_text(ADMIN_TOKEN + "\n")
    async with serving(admin_token_file=str(token_file), championship_interval=0.05) \
            as (running, game), grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") \
            as channel:
        champs = championships_pb2_grpc.ChampionshipServiceStub(channel)
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        operator = (("authorization", f"Bearer {ADMIN_TOKEN}"),)
        cid = (await admin.CreateChampionship(admin_pb2.CreateChampionshipRequest(
            settings=pb.ChampionshipSettings(display_name="Open Cup", rounds=1, rules=SLOW,
                                             duplicate_deals=False),
            reason="a test"), metadata=operator)).championship.championship_id
        sessions = await sign_in(f"127.0.0.1:{running.port}", [f"Open {n}" for n in range(8)])
        for session in sessions:
            await champs.Register(pb.RegisterRequest(championship_id=cid),
                                  metadata=auth(session.access_token))
        await admin.StartChampionship(admin_pb2.StartChampionshipRequest(
            championship_id=cid, reason="a test"), metadata=operator)
        tables = await _tables(champs, cid, sessions)
        first, second = sorted(tables)
        watch = game.WatchTable(copas_pb2.WatchTableRequest(table_id=second))
        assert (await watch.read()).event.view.table_id == second  # a spectator is welcome
        watch.cancel()
        await play_out(game, first, tables[first])
        assert await _reason(game.GetGameRecord(copas_pb2.GetGameRecordRequest(
            record_id=first))) == "RECORD_WITHHELD"

"""Every field a client sets comes back where the contract shows it: a table's name, preset,
rules and bot policy in CreateTable's answer, GetTable, ListTables, WatchLobby and the game's
record; a player's name and seat in JoinTable's answer, the table's summary and the views."""

from __future__ import annotations

import asyncio
from typing import Any

from copas.v1 import copas_pb2

from tests.helpers.calls import Watch, auth, is_over
from tests.helpers.servers import serving

RULES = copas_pb2.RulesOverrides(
    players=4, max_hands=1, point_limit=77, moon=copas_pb2.MOON_RULE_SHOOTER_CHOICE,
    points_on_first_trick=True, queen_breaks_hearts=True, play_timeout_seconds=21.5,
    pass_timeout_seconds=33.0, moon_timeout_seconds=14.0, trick_pause_seconds=0.0,
    hand_pause_seconds=0.0)


def check_rules(rules: copas_pb2.Rules) -> None:
    assert (rules.players, rules.max_hands, rules.point_limit, rules.moon) == \
        (4, 1, 77, copas_pb2.MOON_RULE_SHOOTER_CHOICE)
    assert rules.points_on_first_trick and rules.queen_breaks_hearts
    assert (rules.play_timeout_seconds, rules.pass_timeout_seconds,
            rules.moon_timeout_seconds) == (21.5, 33.0, 14.0)


def check_summary(table: copas_pb2.TableSummary, table_id: str, name: str) -> None:
    assert table.table_id == table_id
    assert table.display_name == name
    assert table.preset == "classic"
    assert table.bot_policy == "duck"
    assert table.rating == "with_bots"
    check_rules(table.rules)
    assert [s.is_bot for s in table.seats] == [False, False, True, True]


async def lobby_snapshot(stub: Any) -> list[copas_pb2.TableSummary]:
    call = stub.WatchLobby(copas_pb2.WatchLobbyRequest())
    try:
        first = await asyncio.wait_for(call.read(), 10)
        return list(first.snapshot.tables)
    finally:
        call.cancel()


async def test_what_a_client_sets_on_a_table_comes_back_everywhere_it_is_shown() -> None:
    async with serving() as (_, stub):
        made = (await stub.CreateTable(copas_pb2.CreateTableRequest(
            preset="classic", rules=RULES, bot_seats=2, display_name="Alice table",
            bot_policy="duck", rating="with_bots"))).table
        table_id = made.table_id
        check_summary(made, table_id, "Alice table")
        got = (await stub.GetTable(copas_pb2.GetTableRequest(table_id=table_id))).table
        check_summary(got, table_id, "Alice table")
        listed = (await stub.ListTables(copas_pb2.ListTablesRequest())).tables
        check_summary(next(t for t in listed if t.table_id == table_id), table_id,
                      "Alice table")
        lobby = await lobby_snapshot(stub)
        check_summary(next(t for t in lobby if t.table_id == table_id), table_id,
                      "Alice table")

        joined = await stub.JoinTable(copas_pb2.JoinTableRequest(
            table_id=table_id, display_name="Bruno", seat=1))
        assert joined.seat == 1
        assert joined.table.seats[1].display_name == "Bruno"
        assert joined.table.seats[1].is_taken and not joined.table.seats[0].is_taken
        check_summary(joined.table, table_id, "Alice table")
        view = (await stub.GetView(copas_pb2.GetViewRequest(table_id=table_id),
                                   metadata=auth(joined.player_token))).view
        assert view.seat == 1 and view.table_id == table_id
        assert view.players[1].display_name == "Bruno"
        check_rules(view.rules)
        other = await stub.JoinTable(copas_pb2.JoinTableRequest(
            table_id=table_id, display_name="Carla"))
        assert other.seat == 0 and other.table.seats[0].display_name == "Carla"
        watch = Watch(stub, table_id, other.player_token)
        started = await watch.opened()
        assert [p.display_name for p in started.view.players] == \
            ["Carla", "Bruno", "Cleo", "Dario"]
        await watch.close()


async def test_a_table_without_a_name_shows_its_id_and_records_keep_the_name() -> None:
    async with serving() as (_, stub):
        unnamed = (await stub.CreateTable(copas_pb2.CreateTableRequest(
            rules=copas_pb2.RulesOverrides(pass_timeout_seconds=0)))).table
        assert unnamed.display_name == unnamed.table_id
        got = (await stub.GetTable(copas_pb2.GetTableRequest(table_id=unnamed.table_id))).table
        assert got.display_name == unnamed.table_id

        bots = (await stub.CreateTable(copas_pb2.CreateTableRequest(
            preset="quick", bot_seats=4, display_name="Bots' table", bot_policy="greedy",
            rating="off", rules=copas_pb2.RulesOverrides(point_limit=40, trick_pause_seconds=0,
                                           hand_pause_seconds=0)))).table
        assert bots.display_name == "Bots' table"
        watch = Watch(stub, bots.table_id)
        await watch.wait_for(is_over, timeout=30)
        await watch.close()
        record = (await stub.GetGameRecord(copas_pb2.GetGameRecordRequest(
            record_id=bots.table_id))).record
        assert record.display_name == "Bots' table"
        assert record.preset == "quick" and record.table_id == bots.table_id
        assert record.rules.point_limit == 40 and record.rating == "off"
        assert [s.display_name for s in record.seats] == ["Ada", "Basil", "Cleo", "Dario"]
        listed = (await stub.ListGameRecords(copas_pb2.ListGameRecordsRequest())).records
        mine = next(r for r in listed if r.record_id == bots.table_id)
        assert mine.display_name == "Bots' table" and mine.preset == "quick"

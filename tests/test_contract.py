"""The contract as a frontend reads it: deadlines on every view that asks someone to act,
views after the whole action, endings, the lobby, quick match, GetView, error reasons,
reflection v1, metrics labels."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path
from typing import Any

import grpc
import pytest
from copas.v1 import copas_pb2, errors_pb2
from grpc_reflection.v1alpha import reflection_pb2

from engine import Game, Reason
from server.errors import REASONS, ServiceError
from tests.helpers.calls import Watch, auth, drive, is_over, join_all, new_table
from tests.helpers.games import rules_of
from tests.helpers.servers import serving

ROOT = Path(__file__).resolve().parent.parent


def seconds(ts: Any) -> float:
    return float(ts.seconds + ts.nanos / 1e9)


def check_view_promises(messages: list[copas_pb2.TableEvent], bots: set[int],
                        timeouts: dict[int, float]) -> int:
    """Every view asking a person to act carries the enforced deadline with the time left
    (an away seat's turn alone may take none: it is played at once, RULES.md "Away seats");
    no view shows a deadline already past; the events of one action share one view, and the
    last is marked. Returns how many views asked a person to act."""
    asked = 0
    group: list[copas_pb2.TableEvent] = []
    for m in messages:
        if m.WhichOneof("kind") == "snapshot":
            assert not group, "a snapshot inside an action"
            continue
        view = m.view
        people = [s for s in view.to_act if s not in bots]
        present = [s for s in people if not view.players[s].is_away]
        if present and not view.HasField("paused_until") and view.phase in timeouts:
            asked += 1
            assert view.HasField("deadline"), f"no deadline on {m.WhichOneof('kind')}: {view}"
            left = seconds(view.time_left)
            assert 0 < left <= timeouts[view.phase] + 0.001
            assert seconds(view.deadline) > seconds(m.time), "a deadline already past"
        if view.HasField("deadline"):
            assert people, "a deadline for nobody"
        if view.HasField("paused_until"):
            assert not view.to_act and seconds(view.pause_left) >= 0
        group.append(m)
        if m.is_last_in_action:
            first = group[0].view.SerializeToString(deterministic=True)
            assert all(g.view.SerializeToString(deterministic=True) == first for g in group)
            group = []
    return asked


async def test_every_view_asking_a_person_to_act_has_the_deadline_the_server_enforces() -> None:
    timeouts = {"pass_timeout_seconds": 5.0, "play_timeout_seconds": 5.0,
                "moon_timeout_seconds": 5.0, "trick_pause_seconds": 0.02,
                "hand_pause_seconds": 0.02}
    by_phase = {copas_pb2.PHASE_PASSING: 5.0, copas_pb2.PHASE_PLAYING: 5.0,
                copas_pb2.PHASE_MOON_CHOICE: 5.0}
    async with serving(allow_seed=True) as (_, stub):
        table = await new_table(stub, preset="quick", seed="3", bots=3, **timeouts)
        token = (await join_all(stub, table.table_id, 1))[0].player_token
        mine = Watch(stub, table.table_id, token)
        spectator = Watch(stub, table.table_id)
        game = Game(rules_of(table), "3")
        await drive(stub, table.table_id, {0: token}, {0: mine}, game)
        for w in (mine, spectator):
            await w.wait_for(lambda m: m.WhichOneof("kind") == "game_over")
            assert check_view_promises(w.messages[1:], {1, 2, 3}, by_phase) > 10
            await w.close()
        # A person who never acts: the timeouts play for them; views never show a deadline
        # that has passed, nor one for the seat that just ran out of time.
        short = {**timeouts, "pass_timeout_seconds": 0.2, "play_timeout_seconds": 0.2}
        table = await new_table(stub, preset="quick", seed="5", bots=2, **short)
        first = (await join_all(stub, table.table_id, 1))[0]
        watch = Watch(stub, table.table_id, first.player_token)
        await watch.opened()  # before the game starts: it sees the first timeout
        await join_all(stub, table.table_id, 1)
        await watch.wait_for(lambda m: m.WhichOneof("kind") == "game_over", timeout=30)
        assert any(m.WhichOneof("kind") == "turn_timed_out" for m in watch.messages)
        asked = check_view_promises(watch.messages[1:], {2, 3},
                                    {copas_pb2.PHASE_PASSING: 0.2, copas_pb2.PHASE_PLAYING: 0.2})
        assert asked > 5
        await watch.close()


async def test_the_end_of_a_game_reaches_a_client_event_by_event() -> None:
    async with serving(allow_seed=True) as (_, stub):
        table = await new_table(stub, preset="quick", seed="8", bots=3)
        token = (await join_all(stub, table.table_id, 1))[0].player_token
        watch = Watch(stub, table.table_id, token)
        game = Game(rules_of(table), "8")
        await drive(stub, table.table_id, {0: token}, {0: watch}, game)
        over = await watch.wait_for(lambda m: m.WhichOneof("kind") == "game_over")
        assert over.is_last_in_action
        kinds = watch.kinds()
        end = kinds.index("game_over")
        # The last action's events, in order: the last card, its trick, the hand's score.
        last_action = kinds[end - 3:end + 1]
        assert last_action == ["card_played", "trick_won", "hand_scored", "game_over"]
        assert watch.messages[end - 2].trick_won.trick.cards[-1].card == \
            watch.messages[end - 3].card_played.card
        await watch.close()


async def test_get_view_and_the_small_traps() -> None:
    async with serving(allow_seed=True) as (_, stub):
        table = await new_table(stub, seed="4", bots=2)
        joins = await join_all(stub, table.table_id, 2)
        mine = await stub.GetView(copas_pb2.GetViewRequest(table_id=table.table_id),
                                  metadata=auth(joins[0].player_token))
        assert mine.view.seat == joins[0].seat and len(mine.view.hand) == 13
        assert mine.sequence > 0
        seen = await stub.GetView(copas_pb2.GetViewRequest(table_id=table.table_id))
        assert not seen.view.hand and not seen.view.HasField("seat")
        assert not seen.view.trick.HasField("leader"), "an empty trick has no leader"
        # A seat that left gets SEAT_HAS_LEFT, whatever it tries.
        await stub.LeaveTable(copas_pb2.LeaveTableRequest(table_id=table.table_id),
                              metadata=auth(joins[1].player_token))
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.PassCards(copas_pb2.PassCardsRequest(
                table_id=table.table_id, cards=list(mine.view.hand[:3])),
                metadata=auth(joins[1].player_token))
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        after = await stub.GetView(copas_pb2.GetViewRequest(table_id=table.table_id))
        assert after.view.players[joins[1].seat].has_left
        history = Watch(stub, table.table_id, after_sequence=1)
        head = await history.wait_for(lambda m: True)
        left_event = next(e for e in head.snapshot.missed_events
                          if e.WhichOneof("kind") == "player_left")
        assert left_event.player_left.phase == copas_pb2.PHASE_PASSING
        await history.close()


def taken(summary: copas_pb2.TableSummary) -> int:
    return sum(seat.is_taken for seat in summary.seats)


async def test_lobby_filters_watch_lobby_and_quick_match() -> None:
    async with serving(allow_seed=True) as (_, stub):
        lobby = stub.WatchLobby(copas_pb2.WatchLobbyRequest(only_joinable=True,
                                                             preset="quick"))
        first = await lobby.read()
        assert first.WhichOneof("event") == "snapshot" and not first.snapshot.tables
        # A table of the preset's own rules (as a quick match opens them): quick matches
        # join it. One with other rules (new_table sets no clock, no pauses) they do not.
        await new_table(stub, preset="quick", seed=None)
        quick = (await stub.CreateTable(copas_pb2.CreateTableRequest(preset="quick"))).table
        await new_table(stub, preset="online", seed=None)
        added = await lobby.read()
        while added.table_added.table_id != quick.table_id:  # the custom one came first
            added = await lobby.read()
        # Quick match seats people at the open quick table, then opens a new one.
        ids = []
        for i in range(5):
            answer = await stub.JoinTable(copas_pb2.JoinTableRequest(
                preset="quick", display_name=f"Q{i}"))
            ids.append(answer.table.table_id)
        assert ids[:4] == [quick.table_id] * 4 and ids[4] != quick.table_id
        # A table's changes within one commit are coalesced (its last summary only), so
        # the new table's creation and its first seat may arrive as one table_added.
        events: list[copas_pb2.WatchLobbyResponse] = []

        def seen_all() -> bool:
            return (any(e.table_removed == quick.table_id for e in events)
                    and any(e.table_added.table_id == ids[4] for e in events))

        async with asyncio.timeout(10):
            while not seen_all():
                events.append(await lobby.read())
        kinds = [e.WhichOneof("event") for e in events]
        assert kinds[:3] == ["table_changed"] * 3  # three seats taken
        assert [taken(e.table_changed) for e in events[:3]] == [1, 2, 3]
        assert kinds.index("table_removed") == 3  # the fourth seat: full, no longer joinable
        opened = next(e.table_added for e in events if e.table_added.table_id == ids[4])
        later = [e.table_changed for e in events if e.table_changed.table_id == ids[4]]
        assert taken(later[-1] if later else opened) == 1  # Q4 sits at the new table
        lobby.cancel()
        listed = await stub.ListTables(copas_pb2.ListTablesRequest(only_joinable=True))
        assert listed.tables[0].table_id == ids[4]  # newest first
        assert quick.table_id not in {t.table_id for t in listed.tables}  # it is full
        assert {t.preset for t in listed.tables} == {"quick", "online"}
        online = await stub.ListTables(copas_pb2.ListTablesRequest(preset="online"))
        assert {t.preset for t in online.tables} == {"online"}
        bots = await new_table(stub, seed="1", bots=4)
        watch = Watch(stub, bots.table_id)
        await watch.wait_for(is_over)
        await watch.close()
        plain = await stub.ListTables(copas_pb2.ListTablesRequest())
        assert bots.table_id not in {t.table_id for t in plain.tables}
        everything = await stub.ListTables(copas_pb2.ListTablesRequest(include_finished=True))
        assert bots.table_id in {t.table_id for t in everything.tables}


def test_every_reason_the_server_can_send_is_in_the_contract() -> None:
    assert {str(r) for r in Reason} <= REASONS  # the engine's
    with pytest.raises(ValueError):
        ServiceError.invalid("x", "SOMETHING_ELSE")
    # Every reason written in the server's code is one of the contract's.
    found = set()
    for path in (ROOT / "server").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and node.value.isupper() and "_" in node.value and len(node.value) > 6:
                found.add(node.value)
    unknown = {r for r in found if r not in REASONS
               and not r.startswith(("COPAS_", "PHASE_", "ERROR_REASON_"))}
    assert not unknown, f"reasons not in copas.v1.ErrorReason: {unknown}"
    assert errors_pb2.ErrorReason.Value("ERROR_REASON_UNSPECIFIED") == 0


async def test_reflection_v1_and_metrics_labels() -> None:
    async with serving(metrics_port=0) as (running, stub):
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            for version in ("v1", "v1alpha"):
                call = channel.stream_stream(
                    f"/grpc.reflection.{version}.ServerReflection/ServerReflectionInfo",
                    request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
                    response_deserializer=reflection_pb2.ServerReflectionResponse.FromString)()
                await call.write(reflection_pb2.ServerReflectionRequest(list_services=""))
                names = {s.name for s in (await call.read()).list_services_response.service}
                assert {"copas.v1.CopasService", "grpc.reflection.v1.ServerReflection"} <= names
                await call.write(reflection_pb2.ServerReflectionRequest(
                    file_containing_symbol="copas.v1.CopasService"))
                assert (await call.read()).file_descriptor_response.file_descriptor_proto
                await call.done_writing()
        table = await new_table(stub, seed=None, bots=4)
        watch = Watch(stub, table.table_id)
        await watch.wait_for(is_over)
        await watch.close()
        sample = running.metrics.registry.get_sample_value
        while running.quotas.open_streams():  # the server has seen the stream end
            await asyncio.sleep(0.01)
        assert sample("process_cpu_seconds_total") is not None
        assert sample("copas_games_finished_total", {"reason": "hand_limit"}) == 1.0
        from prometheus_client import generate_latest

        body = generate_latest(running.metrics.registry).decode()
        assert 'copas_tables{phase="game_over"}' in body
        assert "copas_stream_duration_seconds_count" in body

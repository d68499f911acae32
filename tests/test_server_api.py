"""Errors, idempotency, reconnects, paging, operations: through gRPC on loopback."""

from __future__ import annotations

import asyncio
import importlib.metadata
import urllib.request
from typing import Any

import grpc
import pytest
from copas.v1 import cards_pb2, copas_pb2, copas_pb2_grpc
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from grpc_status import rpc_status

from engine import Game, Phase
from tests.helpers.calls import (
    Watch,
    auth,
    card_pb,
    finished_bot_table,
    is_over,
    join_all,
    new_table,
)
from tests.helpers.games import rules_of
from tests.helpers.servers import serving


def error_reason(error: grpc.aio.AioRpcError) -> str:
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    assert status is not None, "no rich status"
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            assert info.domain == "copas.v1.CopasService"
            return info.reason
    raise AssertionError("no ErrorInfo detail")


async def expect(call: Any, code: grpc.StatusCode, reason: str | None = None) -> str:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call
    assert err.value.code() == code, err.value.details()
    assert err.value.details()
    got = error_reason(err.value)
    if reason is not None:
        assert got == reason
    return got


async def started_table(stub: Any, seed: str = "42") -> tuple[Any, list[Any], Game]:
    table = await new_table(stub, seed=seed)
    joins = await join_all(stub, table.table_id, 4)
    replica = Game(rules_of(table), seed)
    return table, joins, replica


async def test_each_error_has_its_code_and_changes_nothing(stub: Any) -> None:
    table, joins, replica = await started_table(stub)
    tid = table.table_id
    token = {j.seat: j.player_token for j in joins}
    spectator = Watch(stub, tid)
    first = await spectator.wait_for(lambda m: m.view.phase == copas_pb2.PHASE_PASSING)
    seq_before = spectator.latest().sequence
    hand0 = replica.hand(0)
    other = replica.hand(1)
    pass_req = copas_pb2.PassCardsRequest
    # Malformed: INVALID_ARGUMENT.
    await expect(stub.PassCards(pass_req(table_id=tid, cards=[card_pb(hand0[0])]),
                                metadata=auth(token[0])),
                 grpc.StatusCode.INVALID_ARGUMENT, "PASS_NEEDS_THREE_CARDS")
    await expect(stub.PlayCard(copas_pb2.PlayCardRequest(
        table_id=tid, card=cards_pb2.Card(text="1Z")), metadata=auth(token[0])),
        grpc.StatusCode.INVALID_ARGUMENT, "INVALID_CARD")
    await expect(stub.PlayCard(copas_pb2.PlayCardRequest(
        table_id=tid, card=cards_pb2.Card(suit=cards_pb2.SUIT_HEARTS, rank=cards_pb2.RANK_ACE,
                                          text="2C")), metadata=auth(token[0])),
        grpc.StatusCode.INVALID_ARGUMENT, "INVALID_CARD")
    await expect(stub.CreateTable(copas_pb2.CreateTableRequest(
        rules=copas_pb2.RulesOverrides(players=7))), grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_RULES")
    await expect(stub.CreateTable(copas_pb2.CreateTableRequest(preset="fast")),
                 grpc.StatusCode.INVALID_ARGUMENT, "INVALID_RULES")
    await expect(stub.JoinTable(copas_pb2.JoinTableRequest(table_id=tid, display_name="")),
                 grpc.StatusCode.INVALID_ARGUMENT, "INVALID_NAME")
    # Illegal now: FAILED_PRECONDITION with the engine's reason.
    await expect(stub.PassCards(pass_req(table_id=tid, cards=[card_pb(c) for c in other[:3]]),
                                metadata=auth(token[0])),
                 grpc.StatusCode.FAILED_PRECONDITION, "CARD_NOT_IN_HAND")
    await expect(stub.PlayCard(copas_pb2.PlayCardRequest(table_id=tid, card=card_pb(hand0[0])),
                               metadata=auth(token[0])),
                 grpc.StatusCode.FAILED_PRECONDITION, "WRONG_PHASE")
    # Unknown table, bad tokens, another table's token.
    await expect(stub.GetTable(copas_pb2.GetTableRequest(table_id="t_nope")),
                 grpc.StatusCode.NOT_FOUND, "TABLE_NOT_FOUND")
    await expect(stub.PassCards(pass_req(table_id=tid, cards=[card_pb(c) for c in hand0[:3]])),
                 grpc.StatusCode.UNAUTHENTICATED)
    await expect(stub.PassCards(pass_req(table_id=tid, cards=[card_pb(c) for c in hand0[:3]]),
                                metadata=auth("forged")), grpc.StatusCode.UNAUTHENTICATED)
    await expect(stub.PassCards(pass_req(table_id=tid, cards=[card_pb(c) for c in hand0[:3]]),
                                metadata=(("authorization", "Basic abc"),)),
                 grpc.StatusCode.UNAUTHENTICATED)
    other_table = await new_table(stub, seed="9")
    await expect(stub.PassCards(pass_req(table_id=other_table.table_id,
                                         cards=[card_pb(c) for c in hand0[:3]]),
                                metadata=auth(token[0])),
                 grpc.StatusCode.PERMISSION_DENIED, "WRONG_TABLE")
    await expect(stub.WatchTable(copas_pb2.WatchTableRequest(
        table_id=other_table.table_id), metadata=auth(token[0])).read(),
        grpc.StatusCode.PERMISSION_DENIED)
    # A full table.
    await expect(stub.JoinTable(copas_pb2.JoinTableRequest(table_id=tid, display_name="late")),
                 grpc.StatusCode.RESOURCE_EXHAUSTED, "TABLE_FULL")
    # Nothing changed: no event was numbered (the table's sequence is where it was), and the
    # next action is the very next event the spectator sees.
    view = await stub.GetView(copas_pb2.GetViewRequest(table_id=tid), metadata=auth(token[0]))
    assert view.sequence == seq_before
    passed = await stub.PassCards(pass_req(table_id=tid, cards=[card_pb(c) for c in hand0[:3]]),
                                  metadata=auth(token[0]))
    assert passed.sequence == seq_before + 1
    after = await spectator.wait_for(lambda m: m.sequence > seq_before)
    assert after.sequence == seq_before + 1 and after.WhichOneof("kind") == "pass_chosen"
    again = (await stub.GetTable(copas_pb2.GetTableRequest(table_id=tid))).table
    assert again.phase == copas_pb2.PHASE_PASSING and first.view.phase == again.phase
    await spectator.close()


async def test_illegal_play_reports_the_rule(stub: Any) -> None:
    table, joins, replica = await started_table(stub, seed="42")
    tid = table.table_id
    token = {j.seat: j.player_token for j in joins}
    for s in range(4):
        cards = replica.auto_action(s).cards  # type: ignore[union-attr]
        await stub.PassCards(copas_pb2.PassCardsRequest(
            table_id=tid, cards=[card_pb(c) for c in cards]), metadata=auth(token[s]))
        replica.apply(replica.auto_action(s))
    leader = replica.turn
    wrong = next(c for c in replica.hand(leader) if c != replica.opening_card)
    await expect(stub.PlayCard(copas_pb2.PlayCardRequest(table_id=tid, card=card_pb(wrong)),
                               metadata=auth(token[leader])),
                 grpc.StatusCode.FAILED_PRECONDITION, "MUST_LEAD_OPENING_CARD")
    not_turn = (leader + 1) % 4
    await expect(stub.PlayCard(copas_pb2.PlayCardRequest(
        table_id=tid, card=card_pb(replica.hand(not_turn)[0])), metadata=auth(token[not_turn])),
        grpc.StatusCode.FAILED_PRECONDITION, "NOT_YOUR_TURN")
    await stub.PlayCard(copas_pb2.PlayCardRequest(
        table_id=tid, card=card_pb(replica.opening_card)), metadata=auth(token[leader]))
    replica.play(leader, replica.opening_card)
    nxt = replica.turn
    hand = replica.hand(nxt)
    offsuit = [c for c in hand if c.suit != replica.opening_card.suit]
    if len(offsuit) < len(hand):  # holds clubs: an off-suit card breaks "follow suit"
        await expect(stub.PlayCard(copas_pb2.PlayCardRequest(
            table_id=tid, card=card_pb(offsuit[0])), metadata=auth(token[nxt])),
            grpc.StatusCode.FAILED_PRECONDITION, "MUST_FOLLOW_SUIT")


async def test_a_repeated_request_id_is_applied_once(stub: Any) -> None:
    table, joins, replica = await started_table(stub, seed="42")
    tid = table.table_id
    token = {j.seat: j.player_token for j in joins}
    spectator = Watch(stub, tid)
    await spectator.wait_for(lambda m: True)  # its snapshot comes before any pass
    for s in range(4):
        action = replica.auto_action(s)
        request = copas_pb2.PassCardsRequest(table_id=tid, request_id=f"pass-{s}",
                                             cards=[card_pb(c) for c in action.cards])  # type: ignore[union-attr]
        first = await stub.PassCards(request, metadata=auth(token[s]))
        again = await stub.PassCards(request, metadata=auth(token[s]))
        assert first.sequence == again.sequence
        replica.apply(action)
    leader = replica.turn
    play = copas_pb2.PlayCardRequest(table_id=tid, card=card_pb(replica.opening_card),
                                     request_id="lead")
    answers = [await stub.PlayCard(play, metadata=auth(token[leader])) for _ in range(3)]
    assert len({a.sequence for a in answers}) == 1
    # A failed request is remembered too: the retry returns the same error.
    bad = copas_pb2.PlayCardRequest(table_id=tid, card=card_pb(replica.opening_card),
                                    request_id="bad")
    for _ in range(2):
        await expect(stub.PlayCard(bad, metadata=auth(token[leader])),
                     grpc.StatusCode.FAILED_PRECONDITION, "NOT_YOUR_TURN")
    await spectator.wait_for(lambda m: m.WhichOneof("kind") == "card_played")
    await asyncio.sleep(0.05)
    assert sum(m.WhichOneof("kind") == "card_played" for m in spectator.messages) == 1
    assert sum(m.WhichOneof("kind") == "pass_chosen" for m in spectator.messages) == 4
    await spectator.close()


async def test_reconnect_gets_missed_events_or_a_gap(stub: Any, server: Any) -> None:
    table = await new_table(stub, seed="5", bots=3)
    join = (await join_all(stub, table.table_id, 1))[0]
    token = join.player_token
    first = Watch(stub, table.table_id, token)
    snap = await first.wait_for(lambda m: m.view.phase == copas_pb2.PHASE_PASSING)
    seen = snap.sequence
    await first.close()
    replica = Game(rules_of(table), "5")
    action = replica.auto_action(0)
    await stub.PassCards(copas_pb2.PassCardsRequest(
        table_id=table.table_id, cards=[card_pb(c) for c in action.cards]),  # type: ignore[union-attr]
        metadata=auth(token))
    again = Watch(stub, table.table_id, token, after_sequence=seen)
    head = await again.wait_for(lambda m: True)
    assert head.WhichOneof("kind") == "snapshot" and not head.snapshot.has_gap
    missed = head.snapshot.missed_events
    assert missed and missed[0].sequence == seen + 1
    assert [m.sequence for m in missed] == list(range(seen + 1, head.sequence + 1))
    assert "pass_chosen" in [m.WhichOneof("kind") for m in missed]
    assert all(not m.HasField("view") for m in missed)
    assert head.view.phase == copas_pb2.PHASE_PLAYING and len(head.view.received) == 3
    await again.close()
    # A stale sequence on a server that keeps little history: a snapshot that says so.
    async with serving(allow_seed=True, history=4) as (_, small_stub):
        t2 = await finished_bot_table(small_stub, seed="5")
        late = Watch(small_stub, t2.table_id, after_sequence=1)
        head = await late.wait_for(lambda m: True)
        assert head.snapshot.has_gap and len(head.snapshot.missed_events) == 4
        assert [m.sequence for m in head.snapshot.missed_events] == \
            list(range(head.sequence - 3, head.sequence + 1))
        assert head.view.phase == copas_pb2.PHASE_GAME_OVER
        await late.close()
        # Within the little it keeps: exactly the events after the one asked, and no gap.
        recent = Watch(small_stub, t2.table_id, after_sequence=head.sequence - 2)
        tail = await recent.wait_for(lambda m: True)
        assert not tail.snapshot.has_gap
        assert [m.sequence for m in tail.snapshot.missed_events] == \
            [head.sequence - 1, head.sequence]
        await recent.close()


async def test_slow_watchers_get_a_snapshot_instead_of_the_backlog(stub: Any) -> None:
    async with serving(allow_seed=True, watcher_queue=8, bot_table_pace=0.002) as (small, s):
        table = await new_table(s, seed="5", bots=4)
        # A client that does not read: a small HTTP/2 window, so its stream backs up.
        reader = grpc.aio.insecure_channel(
            f"127.0.0.1:{small.port}",
            options=[("grpc.http2.lookahead_bytes", 1024), ("grpc.http2.bdp_probe", 0)])
        call = copas_pb2_grpc.CopasServiceStub(reader).WatchTable(
            copas_pb2.WatchTableRequest(table_id=table.table_id))
        head = await call.read()
        assert head.event.WhichOneof("kind") == "snapshot"
        # Without reading, let the bots play far ahead.
        live = small.registry.get(table.table_id)
        watcher = next(iter(live.fanout.watchers))
        while not live.is_finished:
            await asyncio.sleep(0.01)
            assert len(watcher.queue) <= 8
        kinds = []
        while True:
            msg = await call.read()
            kinds.append(msg.event.WhichOneof("kind"))
            if msg.event.view.phase == copas_pb2.PHASE_GAME_OVER:
                break
        assert "snapshot" in kinds and len(kinds) < 60
        call.cancel()
        await reader.close()


async def test_list_tables_pages_newest_first(stub: Any) -> None:
    created = [(await new_table(stub, seed=None)).table_id for _ in range(5)]
    first = await stub.ListTables(copas_pb2.ListTablesRequest(page_size=2))
    second = await stub.ListTables(copas_pb2.ListTablesRequest(
        page_size=2, page_token=first.next_page_token))
    ids = [t.table_id for t in (*first.tables, *second.tables)]
    assert ids == created[::-1][:4]
    assert first.tables[0].phase == copas_pb2.PHASE_WAITING_FOR_PLAYERS
    assert [s.is_taken for s in first.tables[0].seats] == [False] * 4
    await expect(stub.ListTables(copas_pb2.ListTablesRequest(page_token="@@")),
                 grpc.StatusCode.INVALID_ARGUMENT, "INVALID_PAGE_TOKEN")


async def test_seeds_need_allow_seed_and_tables_have_limits() -> None:
    async with serving(max_tables=1) as (running, s):
        await expect(s.CreateTable(copas_pb2.CreateTableRequest(seed="1")),
                     grpc.StatusCode.PERMISSION_DENIED, "SEED_NOT_ALLOWED")
        await s.CreateTable(copas_pb2.CreateTableRequest())
        await expect(s.CreateTable(copas_pb2.CreateTableRequest()),
                     grpc.StatusCode.RESOURCE_EXHAUSTED, "SERVER_FULL")
        assert len(list(running.registry.live())) == 1


async def test_health_reflection_and_metrics(server: Any, stub: Any) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", "copas.v1.CopasService"):
            answer = await health.Check(health_pb2.HealthCheckRequest(service=service))
            assert answer.status == health_pb2.HealthCheckResponse.SERVING
        reflect = reflection_pb2_grpc.ServerReflectionStub(channel)
        call = reflect.ServerReflectionInfo()
        await call.write(reflection_pb2.ServerReflectionRequest(list_services=""))
        listed = await call.read()
        await call.done_writing()
        names = {s.name for s in listed.list_services_response.service}
        assert "copas.v1.CopasService" in names and "grpc.health.v1.Health" in names
    table = await finished_bot_table(stub, seed="3")
    assert table.phase == copas_pb2.PHASE_GAME_OVER
    url = f"http://127.0.0.1:{server.metrics_port}/metrics"
    body = await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=5).read().decode())
    for name in ("copas_tables{", "copas_seats_connected", "copas_watch_streams",
                 "copas_actions_total", "copas_rpc_duration_seconds_bucket",
                 "copas_timeouts_total", "copas_leavers_total", "copas_games_finished_total",
                 "copas_moons_total"):
        assert name in body, name
    assert 'copas_tables{phase="game_over"} 1.0' in body
    assert 'copas_rpc_duration_seconds_count{code="OK",method="CreateTable"}' in body
    assert "copas_games_finished_total{" in body


async def test_the_signals_an_on_call_dashboard_shows_first(server: Any, stub: Any) -> None:
    """Issue 20's signals, on a real server with its SQLite log: a watched bot game fills
    move-to-view (one sample per event written to the stream), commit latency and batch
    size, bot decision time; the build's version is there."""
    table = await new_table(stub, bots=4, seed="8")
    watch = Watch(stub, table.table_id)
    await watch.wait_for(is_over, timeout=60)
    await watch.close()
    sample = server.metrics.registry.get_sample_value
    events = len([m for m in watch.messages if m.WhichOneof("kind") != "snapshot"])
    assert events > 50
    # Every event written was timed (the last few may be written after the client let go).
    assert abs(sample("copas_move_to_view_seconds_count") - events) <= 5
    assert 0 < sample("copas_move_to_view_seconds_sum") < 60
    assert sample("copas_commit_duration_seconds_count") > 0
    assert sample("copas_commit_batch_writes_count") == \
        sample("copas_commit_duration_seconds_count")
    assert sample("copas_commit_batch_writes_sum") >= sample("copas_commit_batch_writes_count")
    decisions = sample("copas_bot_decision_seconds_count", {"where": "here"})
    assert decisions is not None and decisions >= 52  # 13 tricks of 4 cards at least
    assert sample("copas_build_info", {"version": importlib.metadata.version("copas")}) == 1


async def test_finished_tables_are_released_after_their_ttl() -> None:
    # One stream sees the game end and then ends itself when the table goes: a second call
    # made after the game is over could come after the (short) TTL on a slow machine.
    # That a finished table stays readable for its TTL is what finished_bot_table relies on.
    async with serving(allow_seed=True, finished_table_ttl=0.2) as (_, s):
        table = await new_table(s, bots=4, seed="3")
        watch = Watch(s, table.table_id)
        await watch.wait_for(is_over, timeout=30)
        await asyncio.wait_for(watch.task, 5)  # the stream ends when the table goes
        assert watch.error is None
        await expect(s.GetTable(copas_pb2.GetTableRequest(table_id=table.table_id)),
                     grpc.StatusCode.NOT_FOUND)


def test_replica_agrees_on_phase_names() -> None:
    assert {p.value for p in Phase} <= {n.removeprefix("PHASE_") for n in copas_pb2.Phase.keys()}  # noqa: SIM118


async def test_create_table_seats_its_caller_in_the_same_request_or_makes_no_table() -> None:
    async with serving() as (_, stub):
        def listed() -> Any:
            return stub.ListTables(copas_pb2.ListTablesRequest(page_size=100))

        before = {t.table_id for t in (await listed()).tables}
        for name, reason in (("Bot 7", "NAME_RESERVED"), ("", "INVALID_NAME"),
                             ("x" * 33, "INVALID_NAME")):
            await expect(stub.CreateTable(copas_pb2.CreateTableRequest(
                bot_seats=3, display_name="Bot 7's table", player_display_name=name,
                request_id="r" * 32)), grpc.StatusCode.INVALID_ARGUMENT, reason)
        await expect(stub.CreateTable(copas_pb2.CreateTableRequest(
            bot_seats=3, player_display_name="Ana", request_id="short")),
            grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST_ID")  # it unlocks a token
        assert {t.table_id for t in (await listed()).tables} == before, "no table was left"
        request = copas_pb2.CreateTableRequest(
            bot_seats=3, display_name="Ana's table", player_display_name="Ana",
            request_id="s" * 32, rules=copas_pb2.RulesOverrides(trick_pause_seconds=0))
        made = await stub.CreateTable(request)
        assert made.player_token and made.seat == 0
        assert made.table.seats[0].display_name == "Ana" and made.table.seats[0].is_taken
        assert made.table.phase == copas_pb2.PHASE_PASSING  # full: the game started
        again = await stub.CreateTable(request)  # a retry: the same table, seat and token
        assert (again.table.table_id, again.seat, again.player_token) == (
            made.table.table_id, made.seat, made.player_token)
        view = (await stub.GetTable(copas_pb2.GetTableRequest(
            table_id=made.table.table_id))).table
        assert [s.display_name for s in view.seats] == ["Ana", "Basil", "Cleo", "Dario"]
        watch = Watch(stub, made.table.table_id, made.player_token)
        assert (await watch.opened()).view.hand  # the token is the seat's
        await watch.close()
        plain = await stub.CreateTable(copas_pb2.CreateTableRequest(bot_seats=3))
        assert not plain.player_token and not any(
            s.is_taken and not s.is_bot for s in plain.table.seats)


async def test_a_quick_match_table_has_a_name_not_its_id() -> None:
    async with serving() as (_, stub):
        joined = await stub.JoinTable(copas_pb2.JoinTableRequest(
            preset="online", display_name="Ana"))
        assert joined.table.display_name == "Quick match"

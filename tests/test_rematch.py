"""A rematch (issue 30): the same people at the same seats of a new table after a finished
game, over gRPC on loopback. Each person accepts with their old seat's token and gets their
old seat back; the seats are kept for them alone for the window, then bots take the
unclaimed ones; the old table points to the new one; retries are answered once."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import grpc
import pytest
from copas.v1 import accounts_pb2, accounts_pb2_grpc, copas_pb2, copas_pb2_grpc

from engine import Game
from tests.helpers.calls import Watch, auth, drive, join_all, new_table, quota_details
from tests.helpers.championships import sign_in
from tests.helpers.games import rules_of
from tests.helpers.servers import serving

SEED = "30"


async def refusal(call: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call
    return refused.value.code(), quota_details(refused.value)[0]


async def finished_game(stub: copas_pb2_grpc.CopasServiceStub
                        ) -> tuple[copas_pb2.TableSummary, dict[int, str]]:
    """A one-hand game of two people (seats 0 and 1) and two bots, played to its end; the
    people's tokens by seat."""
    table = await new_table(stub, preset="quick", seed=SEED, bots=2)
    joins = await join_all(stub, table.table_id, 2)
    tokens = {j.seat: j.player_token for j in joins}
    watches = {s: Watch(stub, table.table_id, tokens[s]) for s in tokens}
    await drive(stub, table.table_id, tokens, watches, Game(rules_of(table), SEED))
    for watch in watches.values():
        await watch.close()
    over = (await stub.GetTable(copas_pb2.GetTableRequest(table_id=table.table_id))).table
    assert over.phase == copas_pb2.PHASE_GAME_OVER
    return over, tokens


def rematch(stub: copas_pb2_grpc.CopasServiceStub, table_id: str, token: str | None,
            request_id: str = "") -> Any:
    return stub.Rematch(copas_pb2.RematchRequest(table_id=table_id, request_id=request_id),
                        metadata=auth(token) if token else None)


async def summary(stub: copas_pb2_grpc.CopasServiceStub, table_id: str
                  ) -> copas_pb2.TableSummary:
    return (await stub.GetTable(copas_pb2.GetTableRequest(table_id=table_id))).table


async def test_a_rematch_seats_the_same_people_at_their_old_seats(stub: Any) -> None:
    old, tokens = await finished_game(stub)
    first = await rematch(stub, old.table_id, tokens[1], f"r-{uuid.uuid4().hex}")
    new_id = first.table.table_id
    assert new_id != old.table_id and first.seat == 1
    assert (await summary(stub, old.table_id)).rematch_table_id == new_id
    new = await summary(stub, new_id)
    assert (new.display_name, new.preset, new.rules, new.bot_policy) == \
        (old.display_name, old.preset, old.rules, old.bot_policy)
    assert [(s.is_taken, s.is_bot, s.display_name) for s in new.seats] == [
        (False, False, ""), (True, False, "P1"), (True, True, old.seats[2].display_name),
        (True, True, old.seats[3].display_name)]
    assert new.phase == copas_pb2.PHASE_WAITING_FOR_PLAYERS
    # Seat 0 is kept for P0: a stranger with the link is refused, P0 takes it.
    assert await refusal(stub.JoinTable(copas_pb2.JoinTableRequest(
        table_id=new_id, display_name="Stranger"))) == \
        (grpc.StatusCode.PERMISSION_DENIED, "REMATCH_SEAT_RESERVED")
    joinable = (await stub.ListTables(copas_pb2.ListTablesRequest(
        only_joinable=True, page_size=100))).tables
    assert new_id not in {t.table_id for t in joinable}  # not offered to strangers
    request_id = f"r-{uuid.uuid4().hex}"
    second = await rematch(stub, old.table_id, tokens[0], request_id)
    assert (second.table.table_id, second.seat) == (new_id, 0)
    again = await rematch(stub, old.table_id, tokens[0], request_id)  # a retry: the same
    assert (again.seat, again.player_token) == (0, second.player_token)
    view = (await stub.GetView(copas_pb2.GetViewRequest(table_id=new_id),
                               metadata=auth(second.player_token))).view
    assert view.seat == 0 and view.phase == copas_pb2.PHASE_PASSING  # everyone back: it runs
    assert len(view.hand) == 13
    assert [p.display_name for p in view.players][:2] == ["P0", "P1"]
    # A second accept under another request id: the seat is already theirs.
    assert await refusal(rematch(stub, old.table_id, tokens[0], f"r-{uuid.uuid4().hex}")) == \
        (grpc.StatusCode.FAILED_PRECONDITION, "REMATCH_ALREADY_ACCEPTED")


async def test_the_rematch_offer_comes_on_the_streams_open_at_the_finished_table(
        stub: Any) -> None:
    """Issue 40: the people still at a finished table (and its spectators) are told of its
    rematch on the streams they have, once, as soon as one of them asked for it; a stream
    opened later, GetView and GetTable show it in the view and the summary."""
    old, tokens = await finished_game(stub)
    seated = Watch(stub, old.table_id, tokens[0])
    spectator = Watch(stub, old.table_id)
    for watch in (seated, spectator):
        first = await watch.wait_for(lambda m: m.WhichOneof("kind") == "snapshot", timeout=20)
        assert first.view.phase == copas_pb2.PHASE_GAME_OVER and not first.view.rematch_table_id
    new_id = (await rematch(stub, old.table_id, tokens[1], f"r-{uuid.uuid4().hex}")).table.table_id
    for watch in (seated, spectator):
        told = await watch.wait_for(lambda m: m.WhichOneof("kind") == "rematch_offered",
                                    timeout=20)
        assert told.rematch_offered.table_id == new_id and told.view.rematch_table_id == new_id
        assert told.sequence == first.sequence  # live, not numbered: the history is the same
    await rematch(stub, old.table_id, tokens[0], f"r-{uuid.uuid4().hex}")  # once only
    later = Watch(stub, old.table_id, tokens[1])
    snapshot = await later.wait_for(lambda m: m.WhichOneof("kind") == "snapshot", timeout=20)
    assert snapshot.view.rematch_table_id == new_id
    view = (await stub.GetView(copas_pb2.GetViewRequest(table_id=old.table_id),
                               metadata=auth(tokens[0]))).view
    assert view.rematch_table_id == new_id and view.seat == 0 and len(view.players) == 4
    for watch in (seated, spectator, later):
        await watch.close()
    assert sum(m.WhichOneof("kind") == "rematch_offered" for m in seated.messages) == 1
    assert not any(m.WhichOneof("kind") == "rematch_offered" for m in later.messages)


async def test_bad_rematch_calls_are_refused_with_their_reasons(stub: Any) -> None:
    old, tokens = await finished_game(stub)
    running = await new_table(stub, preset="quick", seed=SEED, bots=3)
    runner = (await join_all(stub, running.table_id, 1))[0]
    assert await refusal(rematch(stub, running.table_id, runner.player_token)) == \
        (grpc.StatusCode.FAILED_PRECONDITION, "GAME_NOT_OVER")
    assert await refusal(rematch(stub, old.table_id, runner.player_token)) == \
        (grpc.StatusCode.PERMISSION_DENIED, "NOT_SEATED_THERE")
    assert (await refusal(rematch(stub, old.table_id, None)))[0] == \
        grpc.StatusCode.UNAUTHENTICATED
    assert await refusal(rematch(stub, "t_nothere", tokens[0])) == \
        (grpc.StatusCode.NOT_FOUND, "TABLE_NOT_FOUND")
    assert (await summary(stub, old.table_id)).rematch_table_id == ""  # nothing was made


async def test_bots_take_the_seats_nobody_claimed_in_time() -> None:
    async with serving(rematch_window=0.3, allow_seed=True) as (_, stub):
        old, tokens = await finished_game(stub)
        first = await rematch(stub, old.table_id, tokens[0])
        watch = Watch(stub, first.table.table_id, first.player_token)
        started = await watch.wait_for(
            lambda m: m.view.phase == copas_pb2.PHASE_PASSING, timeout=20)
        await watch.close()
        assert [(p.display_name, p.is_bot) for p in started.view.players] == [
            ("P0", False), ("Basil", True), (old.seats[2].display_name, True),
            (old.seats[3].display_name, True)]  # a bot took P1's seat
        assert await refusal(rematch(stub, old.table_id, tokens[1])) == \
            (grpc.StatusCode.FAILED_PRECONDITION, "REMATCH_STARTED")


async def test_a_signed_in_person_comes_back_by_their_account() -> None:
    """A person who sat signed in shows their account (a new tab of their browser has no seat
    token): the same old seat; another account is not seated there."""
    async with serving(allow_seed=True) as (running, stub):
        ann, other = await sign_in(f"127.0.0.1:{running.port}", ["Ann", "Other"])
        table = await new_table(stub, preset="quick", seed=SEED, bots=3)
        joined = await stub.JoinTable(copas_pb2.JoinTableRequest(table_id=table.table_id),
                                      metadata=auth(ann.access_token))
        watch = Watch(stub, table.table_id, joined.player_token)
        await drive(stub, table.table_id, {joined.seat: joined.player_token},
                    {joined.seat: watch}, Game(rules_of(table), SEED))
        await watch.close()
        assert await refusal(rematch(stub, table.table_id, other.access_token)) == \
            (grpc.StatusCode.PERMISSION_DENIED, "NOT_SEATED_THERE")
        back = await rematch(stub, table.table_id, ann.access_token)
        assert (back.seat, back.table.seats[0].display_name) == (joined.seat, "Ann")
        assert back.table.phase == copas_pb2.PHASE_PASSING  # the only person: it starts


async def test_after_signing_out_everywhere_a_kept_seat_token_takes_no_rematch_as_them(
        ) -> None:
    """A person signed in at a table signs out everywhere (a lost phone): the seat token that
    phone kept does not carry their account into the rematch (it would play rated games as
    them), and no rematch is made; signed in again, their account takes its old seat."""
    async with serving(allow_seed=True) as (running, stub), \
            grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        accounts = accounts_pb2_grpc.AccountServiceStub(channel)
        device = accounts_pb2.SignInDeviceRequest(device_secret=uuid.uuid4().hex * 2,
                                                  display_name="Ann")
        ann = (await accounts.SignInDevice(device)).session
        table = await new_table(stub, preset="quick", seed=SEED, bots=3)
        joined = await stub.JoinTable(copas_pb2.JoinTableRequest(
            table_id=table.table_id), metadata=auth(ann.access_token))
        watch = Watch(stub, table.table_id, joined.player_token)
        await drive(stub, table.table_id, {joined.seat: joined.player_token},
                    {joined.seat: watch}, Game(rules_of(table), SEED))
        await watch.close()
        ended = await accounts.SignOut(accounts_pb2.SignOutRequest(everywhere=True),
                                       metadata=auth(ann.access_token))
        assert ended.sessions_ended == 1
        assert await refusal(rematch(stub, table.table_id, joined.player_token)) == \
            (grpc.StatusCode.UNAUTHENTICATED, "SESSION_REVOKED")
        assert not (await summary(stub, table.table_id)).rematch_table_id
        again = (await accounts.SignInDevice(device)).session
        back = await rematch(stub, table.table_id, again.access_token)
        assert (back.seat, back.table.seats[joined.seat].display_name) == \
            (joined.seat, "Ann")


async def test_a_rematch_with_a_bot_in_an_unclaimed_seat_comes_back_after_a_restart(
        tmp_path: Path) -> None:
    """The bot's seat is in the rematch table's log (a join without a token): a restart
    replays it, and the person's new token still opens their seat."""
    options = {"rematch_window": 0.3, "allow_seed": True, "data_dir": str(tmp_path)}
    async with serving(**options) as (_, stub):
        old, tokens = await finished_game(stub)
        first = await rematch(stub, old.table_id, tokens[0])
        new_id = first.table.table_id
        watch = Watch(stub, new_id, first.player_token)
        before = await watch.wait_for(lambda m: m.view.phase == copas_pb2.PHASE_PASSING,
                                      timeout=20)
        await watch.close()
    async with serving(**options) as (_, stub):
        view = (await stub.GetView(copas_pb2.GetViewRequest(table_id=new_id),
                                   metadata=auth(first.player_token))).view
        assert view.seat == 0 and view.phase == copas_pb2.PHASE_PASSING
        assert [(p.display_name, p.is_bot) for p in view.players] == \
            [(p.display_name, p.is_bot) for p in before.view.players]
        assert view.players[1].is_bot and list(view.hand) == list(before.view.hand)


async def test_after_a_restart_the_old_table_points_to_its_rematch_and_its_seats_stay_kept(
        tmp_path: Path) -> None:
    """The pointer is the rematch table's own (in its log's meta): after a restart the old
    table names its rematch again, a stranger's JoinTable is still refused there, the other
    person still takes their old seat, and then bots take nobody's seat but the game starts."""
    options = {"rematch_window": 60.0, "allow_seed": True, "data_dir": str(tmp_path)}
    async with serving(**options) as (_, stub):
        old, tokens = await finished_game(stub)
        first = await rematch(stub, old.table_id, tokens[0])
        new_id = first.table.table_id
        assert (await summary(stub, old.table_id)).rematch_table_id == new_id
    async with serving(**options) as (_, stub):
        assert (await summary(stub, old.table_id)).rematch_table_id == new_id
        assert await refusal(stub.JoinTable(copas_pb2.JoinTableRequest(
            table_id=new_id, display_name="Stranger"))) == \
            (grpc.StatusCode.PERMISSION_DENIED, "REMATCH_SEAT_RESERVED")
        second = await rematch(stub, old.table_id, tokens[1])
        assert (second.table.table_id, second.seat) == (new_id, 1)
        assert second.table.phase == copas_pb2.PHASE_PASSING  # both back: it started
        assert [s.display_name for s in second.table.seats][:2] == \
            [s.display_name for s in old.seats][:2]


async def test_a_request_id_is_one_persons_and_a_refused_first_call_makes_no_rematch(
        ) -> None:
    """Another person's retry under your request_id does not get your seat and token
    (REQUEST_ID_REUSED); a first Rematch refused (its request_id already spent on a join)
    leaves no table and no pointer behind; a rematch nobody came back to goes at the end of
    its window, with no game and no record, and a later Rematch makes a new one."""
    async with serving(rematch_window=0.3, allow_seed=True) as (_, stub):
        old, tokens = await finished_game(stub)
        used = f"r-{uuid.uuid4().hex}"
        other = await new_table(stub, preset="quick", bots=3)
        await stub.JoinTable(copas_pb2.JoinTableRequest(
            table_id=other.table_id, display_name="Q", request_id=used))
        tables_before = {t.table_id for t in (await stub.ListTables(
            copas_pb2.ListTablesRequest(page_size=100))).tables}
        assert (await refusal(rematch(stub, old.table_id, tokens[0], used)))[1] == \
            "REQUEST_ID_REUSED"
        assert (await summary(stub, old.table_id)).rematch_table_id == ""
        assert {t.table_id for t in (await stub.ListTables(
            copas_pb2.ListTablesRequest(page_size=100))).tables} == tables_before

        mine = f"r-{uuid.uuid4().hex}"
        first = await rematch(stub, old.table_id, tokens[0], mine)
        assert await refusal(rematch(stub, old.table_id, tokens[1], mine)) == \
            (grpc.StatusCode.INVALID_ARGUMENT, "REQUEST_ID_REUSED")
        await stub.LeaveTable(copas_pb2.LeaveTableRequest(table_id=first.table.table_id),
                              metadata=auth(first.player_token))
        # Nobody holds a seat of it now: at the window's end it goes, and nothing is made.
        gone = first.table.table_id
        for _ in range(200):
            if (await summary(stub, old.table_id)).rematch_table_id == "":
                break
            await asyncio.sleep(0.05)  # the window (0.3 s) runs on the server's clock
        assert (await summary(stub, old.table_id)).rematch_table_id == ""
        assert (await refusal(stub.GetTable(copas_pb2.GetTableRequest(table_id=gone))))[0] \
            == grpc.StatusCode.NOT_FOUND
        records = (await stub.ListGameRecords(copas_pb2.ListGameRecordsRequest())).records
        assert gone not in {r.record_id for r in records}
        again = await rematch(stub, old.table_id, tokens[1])
        assert again.table.table_id not in ("", gone) and again.seat == 1


async def test_a_person_who_left_the_game_takes_no_part_in_its_rematch() -> None:
    async with serving(allow_seed=True) as (_, stub):
        table = await new_table(stub, preset="quick", seed=SEED, bots=2)
        joins = await join_all(stub, table.table_id, 2)
        tokens = {j.seat: j.player_token for j in joins}
        await stub.LeaveTable(copas_pb2.LeaveTableRequest(table_id=table.table_id),
                              metadata=auth(tokens[1]))
        watch = Watch(stub, table.table_id, tokens[0])
        await drive(stub, table.table_id, {0: tokens[0]}, {0: watch},
                    Game(rules_of(table), SEED))
        await watch.close()
        assert await refusal(rematch(stub, table.table_id, tokens[1])) == \
            (grpc.StatusCode.PERMISSION_DENIED, "SEAT_HAS_LEFT")
        assert (await summary(stub, table.table_id)).rematch_table_id == ""
        back = await rematch(stub, table.table_id, tokens[0])
        assert back.seat == 0

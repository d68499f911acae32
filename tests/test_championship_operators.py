"""The tournament director's tools through the contract, on a served server: CheckIn and the
operators' championship calls (pause and resume, correct, disqualify, re-seat), each
refusal's status and reason, each call's audit line; and reference bots playing a duplicate
championship scored by matchpoints with Buchholz, pairings announced ahead and a final table,
whose final standings are those recomputed from the game records alone."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import structlog
from copas.admin.v1 import admin_pb2, admin_pb2_grpc
from copas.v1 import championships_pb2 as pb
from copas.v1 import championships_pb2_grpc, copas_pb2, copas_pb2_grpc
from google.protobuf.timestamp_pb2 import Timestamp

from engine.rules import Rules
from server.championships.format import ChampionshipRules, Scoring
from tests.helpers.calls import Watch, auth
from tests.helpers.championships import FAST_RULES, BotPlayer, recomputed, records_of, sign_in
from tests.helpers.servers import serving

ADMIN_TOKEN = "operator-token-for-the-director-tests"
ADMIN = (("authorization", f"Bearer {ADMIN_TOKEN}"),)
SLOW_RULES = copas_pb2.RulesOverrides(max_hands=1, play_timeout_seconds=60,
                                      pass_timeout_seconds=60, moon_timeout_seconds=60,
                                      trick_pause_seconds=0, hand_pause_seconds=0)


class Served:
    def __init__(self, running: Any, channel: grpc.aio.Channel) -> None:
        self.address = f"127.0.0.1:{running.port}"
        self.champs = championships_pb2_grpc.ChampionshipServiceStub(channel)
        self.admin = admin_pb2_grpc.AdminServiceStub(channel)
        self.game = copas_pb2_grpc.CopasServiceStub(channel)


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    token_file = tmp_path / "admin-token"
    token_file.write_text(ADMIN_TOKEN + "\n")
    async with serving(admin_token_file=str(token_file), championship_interval=0.05) \
            as (running, _), grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        yield Served(running, channel)


async def refused(code: grpc.StatusCode, reason: str, call: Any) -> None:
    from google.rpc import error_details_pb2, status_pb2

    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    found = ""
    for key, value in caught.value.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            for detail in status_pb2.Status.FromString(value).details:
                info = error_details_pb2.ErrorInfo()
                if detail.Unpack(info):
                    found = info.reason
    assert (caught.value.code(), found) == (code, reason), caught.value.details()


def at(seconds_from_now: float) -> Timestamp:
    stamp = Timestamp()
    stamp.FromNanoseconds(int((time.time() + seconds_from_now) * 1e9))
    return stamp


async def your_table(served: Served, cid: str, token: str) -> pb.YourTable:
    async for message in served.champs.WatchChampionship(pb.WatchChampionshipRequest(
            championship_id=cid), metadata=auth(token), timeout=30):
        if message.your_table.table_id:
            return message.your_table
    raise AssertionError("the championship ended without a table")


async def test_check_in_and_the_operators_calls_with_their_reasons_and_audit_lines(
        served: Served) -> None:
    sessions = await sign_in(served.address, [f"D{n}" for n in range(5)])
    await refused(grpc.StatusCode.INVALID_ARGUMENT, "MATCHPOINTS_NEED_DUPLICATE_DEALS",
                  served.admin.CreateChampionship(admin_pb2.CreateChampionshipRequest(
                      settings=pb.ChampionshipSettings(
                          display_name="Cup", rounds=2, rules=SLOW_RULES,
                          scoring=pb.CHAMPIONSHIP_SCORING_MATCHPOINTS), reason="test"),
                      metadata=ADMIN))
    # Check-in opens 2 s from now (28 s before the start): they register before it.
    cid = (await served.admin.CreateChampionship(admin_pb2.CreateChampionshipRequest(
        settings=pb.ChampionshipSettings(display_name="Cup", rounds=2, rules=SLOW_RULES,
                                         start_time=at(30), check_in_seconds=28),
        reason="test"), metadata=ADMIN)).championship.championship_id
    for session in sessions[:4]:
        await served.champs.Register(pb.RegisterRequest(championship_id=cid),
                                     metadata=auth(session.access_token))
    check_in = served.champs.CheckIn
    await refused(grpc.StatusCode.FAILED_PRECONDITION, "CHECK_IN_NOT_OPEN",
                  check_in(pb.CheckInRequest(championship_id=cid),
                           metadata=auth(sessions[0].access_token)))
    deadline = time.monotonic() + 10
    while True:  # until check-in opens
        try:
            checked = (await check_in(pb.CheckInRequest(championship_id=cid),
                                      metadata=auth(sessions[0].access_token))).championship
            break
        except grpc.aio.AioRpcError:
            assert time.monotonic() < deadline, "check-in never opened"
            await asyncio.sleep(0.1)
    await refused(grpc.StatusCode.UNAUTHENTICATED, "SIGN_IN_REQUIRED",
                  served.champs.CheckIn(pb.CheckInRequest(championship_id=cid)))
    await refused(grpc.StatusCode.FAILED_PRECONDITION, "NOT_REGISTERED",
                  served.champs.CheckIn(pb.CheckInRequest(championship_id=cid),
                                        metadata=auth(sessions[4].access_token)))
    assert [p.is_checked_in for p in checked.players] == [True, False, False, False]
    assert [p.is_you for p in checked.players] == [True, False, False, False]
    # Two more check in; the operator starts it now: D3 never checked in.
    for session in sessions[1:3]:
        await served.champs.CheckIn(pb.CheckInRequest(championship_id=cid),
                                    metadata=auth(session.access_token))
    started = (await served.admin.StartChampionship(admin_pb2.StartChampionshipRequest(
        championship_id=cid, reason="all here"), metadata=ADMIN)).championship
    assert [p.display_name for p in started.players] == ["D0", "D1", "D2"]  # D3 did not
    await refused(grpc.StatusCode.FAILED_PRECONDITION, "CHECK_IN_CLOSED",
                  served.champs.CheckIn(pb.CheckInRequest(championship_id=cid),
                                        metadata=auth(sessions[0].access_token)))
    mine = await your_table(served, cid, sessions[0].access_token)
    watch = Watch(served.game, mine.table_id, mine.player_token)
    await watch.opened()

    pause = served.admin.PauseChampionship
    await refused(grpc.StatusCode.INVALID_ARGUMENT, "MISSING_REASON",
                  pause(admin_pb2.PauseChampionshipRequest(championship_id=cid,
                                                           is_paused=True), metadata=ADMIN))
    with structlog.testing.capture_logs() as logs:
        paused = (await pause(admin_pb2.PauseChampionshipRequest(
            championship_id=cid, is_paused=True, reason="a fire drill"), metadata=ADMIN)
                  ).championship
        assert paused.is_paused
        held = await watch.wait_for(lambda m: m.WhichOneof("kind") == "table_held")
        assert held.table_held.is_held and held.view.is_held and not held.view.to_act
        await refused(grpc.StatusCode.FAILED_PRECONDITION, "TABLE_PAUSED",
                      served.game.PassCards(copas_pb2.PassCardsRequest(
                          table_id=mine.table_id, cards=list(held.view.hand[:3])),
                          metadata=auth(mine.player_token)))
        await pause(admin_pb2.PauseChampionshipRequest(
            championship_id=cid, is_paused=False, reason="back"), metadata=ADMIN)
        released = await watch.wait_for(lambda m: m.WhichOneof("kind") == "table_held"
                                        and not m.table_held.is_held)
        assert released.view.HasField("deadline") and mine.seat in released.view.to_act
        await refused(grpc.StatusCode.FAILED_PRECONDITION, "ROUND_NOT_ANNOUNCED",
                      served.admin.ReseatChampionshipRound(
                          admin_pb2.ReseatChampionshipRoundRequest(
                              championship_id=cid, round_number=2,
                              player_a=started.players[0].player_id,
                              player_b=started.players[1].player_id, reason="test"),
                          metadata=ADMIN))
        await refused(grpc.StatusCode.NOT_FOUND, "CHAMPIONSHIP_TABLE_NOT_FOUND",
                      served.admin.CorrectChampionshipResult(
                          admin_pb2.CorrectChampionshipResultRequest(
                              championship_id=cid, round_number=1, table_number=2,
                              totals=[0, 0, 0], reason="test"), metadata=ADMIN))
        await refused(grpc.StatusCode.FAILED_PRECONDITION, "TABLE_NOT_COUNTED",
                      served.admin.CorrectChampionshipResult(
                          admin_pb2.CorrectChampionshipResultRequest(
                              championship_id=cid, round_number=1, table_number=1,
                              totals=[0, 0, 0], reason="test"), metadata=ADMIN))
        player = started.players[2].player_id
        out = (await served.admin.DisqualifyChampionshipPlayer(
            admin_pb2.DisqualifyChampionshipPlayerRequest(
                championship_id=cid, player=player, reason="abuse at the table"),
            metadata=ADMIN)).championship
        assert out.players[2].is_disqualified
        await refused(grpc.StatusCode.FAILED_PRECONDITION, "ALREADY_DISQUALIFIED",
                      served.admin.DisqualifyChampionshipPlayer(
                          admin_pb2.DisqualifyChampionshipPlayerRequest(
                              championship_id=cid, player=player, reason="again"),
                          metadata=ADMIN))
    audit = [line for line in logs if line.get("event") == "admin_call"]
    assert [(a["method"], a["outcome"]) for a in audit] == [
        ("PauseChampionship", "ok"), ("PauseChampionship", "ok"),
        ("ReseatChampionshipRound", "ROUND_NOT_ANNOUNCED"),
        ("CorrectChampionshipResult", "CHAMPIONSHIP_TABLE_NOT_FOUND"),
        ("CorrectChampionshipResult", "TABLE_NOT_COUNTED"),
        ("DisqualifyChampionshipPlayer", "ok"),
        ("DisqualifyChampionshipPlayer", "ALREADY_DISQUALIFIED")]
    assert (audit[0]["championship_id"], audit[0]["is_paused"], audit[0]["reason"]) == (
        cid, True, "a fire drill")
    assert (audit[4]["round_number"], audit[4]["table_number"], audit[4]["totals"]) == (
        1, 1, [0, 0, 0])
    assert (audit[5]["player"], audit[5]["reason"]) == (player, "abuse at the table")
    await watch.close()


async def test_bots_play_matchpoints_with_buchholz_announced_pairings_and_a_final(
        served: Served) -> None:
    sessions = await sign_in(served.address, [f"Dup{n}" for n in range(8)])
    made = (await served.admin.CreateChampionship(admin_pb2.CreateChampionshipRequest(
        settings=pb.ChampionshipSettings(
            display_name="Duplicate cup", rounds=2, rules=FAST_RULES, duplicate_deals=True,
            scoring=pb.CHAMPIONSHIP_SCORING_MATCHPOINTS, buchholz=True, final_table=3,
            pairing_notice_seconds=0.3, max_players=8, start_when_full=True),
        reason="test"), metadata=ADMIN)).championship
    cid = made.championship_id
    announced: list[pb.Championship] = []

    async def follow() -> None:  # a spectator sees each round announced before its tables
        async for message in served.champs.WatchChampionship(pb.WatchChampionshipRequest(
                championship_id=cid), timeout=120):
            if message.championship.rounds and message.championship.rounds[-1].is_announced:
                announced.append(message.championship)
            if message.championship.state == pb.CHAMPIONSHIP_STATE_FINISHED:
                return
    spectator = asyncio.ensure_future(follow())
    for session in sessions:
        await served.champs.Register(pb.RegisterRequest(championship_id=cid),
                                     metadata=auth(session.access_token))
    bots = [BotPlayer(served.address, s, cid) for s in sessions]
    await asyncio.wait_for(asyncio.gather(*(b.run() for b in bots), spectator), 120)
    final = (await served.champs.GetChampionship(pb.GetChampionshipRequest(
        championship_id=cid))).championship
    assert final.state == pb.CHAMPIONSHIP_STATE_FINISHED and final.current_round == 3
    assert [(r.round_number, r.is_final, len(r.tables)) for r in final.rounds] == [
        (1, False, 2), (2, False, 2), (3, True, 1)]
    assert {r.round_number for c in announced for r in c.rounds if r.is_announced} == {1, 2, 3}
    for shown in announced:
        assert all(not t.table_id for t in shown.rounds[-1].tables)
        assert shown.rounds[-1].start_time.ToNanoseconds() > 0
    rules = ChampionshipRules(2, Rules(), True, Scoring.MATCHPOINTS, True, 3)
    expected = recomputed(final, await records_of(served.address, final), rules)
    assert [(s.player, s.place, int(s.decided_by) + 1, s.final) for s in expected] == [
        (line.player_id, line.place, line.decided_by, line.final_place)
        for line in final.standings]
    assert [(float(s.percentage), float(s.buchholz)) for s in expected] == [
        (line.percentage, line.buchholz) for line in final.standings]
    assert [line.decided_by for line in final.standings[:3]] == [pb.TIE_BREAK_FINAL] * 3
    assert sum(s.percentage for r in final.rounds[:2] for t in r.tables
               for s in t.seats) == pytest.approx(8 * 50 * 2)  # each group averages 50

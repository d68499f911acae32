"""Championships run by the server on one node: each bad input refused with its reason and
nothing changed; 13 accounts of reference bots play a 4-round championship whose final
standings are those recomputed from the game records alone; a player who withdraws in round 1
leaves the game it is in and is seated in no later round (5+4+4, then 4+4+4), and a no-show is
dropped from the next rounds, so no seat of a later round is played by the server; an
operator's cancel ends the running games."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from copas.admin.v1 import admin_pb2, admin_pb2_grpc
from copas.v1 import championships_pb2 as pb
from copas.v1 import championships_pb2_grpc, copas_pb2, copas_pb2_grpc

from engine import Rules
from tests.helpers.calls import auth
from tests.helpers.championships import (
    FAST_RULES,
    BotPlayer,
    recomputed,
    records_of,
    sign_in,
)
from tests.helpers.servers import serving

ADMIN_TOKEN = "operator-token-for-the-championship-tests"
ADMIN = (("authorization", f"Bearer {ADMIN_TOKEN}"),)


class Served:
    def __init__(self, running: Any, channel: grpc.aio.Channel) -> None:
        self.running = running
        self.address = f"127.0.0.1:{running.port}"
        self.champs = championships_pb2_grpc.ChampionshipServiceStub(channel)
        self.admin = admin_pb2_grpc.AdminServiceStub(channel)
        self.game = copas_pb2_grpc.CopasServiceStub(channel)


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    token_file = tmp_path / "admin-token"
    token_file.write_text(ADMIN_TOKEN + "\n")
    async with serving(admin_token_file=str(token_file), championship_interval=0.05,
                       championships_per_account=1) as (running, _), \
            grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        yield Served(running, channel)


def settings(**changes: Any) -> pb.ChampionshipSettings:
    base: dict[str, Any] = {"display_name": "Cup", "rounds": 4, "preset": "online",
                            "rules": FAST_RULES}
    return pb.ChampionshipSettings(**{**base, **changes})


async def refused(reason: str, code: grpc.StatusCode, call: Any) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    error = caught.value
    assert (error.code(), _reasons(error)) == (code, reason), error.details()


def _reasons(error: grpc.aio.AioRpcError) -> str:
    from google.rpc import error_details_pb2, status_pb2

    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status.FromString(value)
            for detail in status.details:
                info = error_details_pb2.ErrorInfo()
                if detail.Unpack(info):
                    return info.reason
    return ""


async def test_bad_inputs_are_each_refused_with_their_reason(served: Served) -> None:
    owner, p1, p2, p3, p4 = await sign_in(served.address, ["Owner", "P1", "P2", "P3", "P4"])
    me = auth(owner.access_token)
    create = served.champs.CreateChampionship
    await refused("SIGN_IN_REQUIRED", grpc.StatusCode.UNAUTHENTICATED,
                  create(pb.CreateChampionshipRequest(settings=settings())))
    await refused("INVALID_ROUNDS", grpc.StatusCode.INVALID_ARGUMENT,
                  create(pb.CreateChampionshipRequest(settings=settings(rounds=10_000)),
                         metadata=me))
    await refused("INVALID_ROUNDS", grpc.StatusCode.INVALID_ARGUMENT,
                  create(pb.CreateChampionshipRequest(settings=settings(rounds=0)), metadata=me))
    await refused("INVALID_PLAYER_LIMITS", grpc.StatusCode.INVALID_ARGUMENT,
                  create(pb.CreateChampionshipRequest(settings=settings(max_players=2)),
                         metadata=me))
    await refused("INVALID_RULES", grpc.StatusCode.INVALID_ARGUMENT,
                  create(pb.CreateChampionshipRequest(settings=settings(
                      rules=copas_pb2.RulesOverrides(point_limit=-5))), metadata=me))
    await refused("INVALID_RULES", grpc.StatusCode.INVALID_ARGUMENT,
                  create(pb.CreateChampionshipRequest(settings=settings(
                      rules=copas_pb2.RulesOverrides(play_timeout_seconds=0))), metadata=me))
    await refused("INVALID_RULES", grpc.StatusCode.INVALID_ARGUMENT,
                  create(pb.CreateChampionshipRequest(settings=settings(preset="nope")),
                         metadata=me))
    # Another game's options are refused as at a table of the championships' game.
    await refused("INVALID_RULES", grpc.StatusCode.INVALID_ARGUMENT,
                  create(pb.CreateChampionshipRequest(settings=settings(
                      rules=copas_pb2.RulesOverrides(
                          bisca=copas_pb2.BiscaRulesOverrides(hand_size=7)))), metadata=me))
    listed = await served.champs.ListChampionships(pb.ListChampionshipsRequest(
        include_finished=True))
    assert not listed.championships  # nothing was made by the refusals
    made = (await create(pb.CreateChampionshipRequest(settings=settings(max_players=3)),
                         metadata=me)).championship
    await refused("TOO_MANY_CHAMPIONSHIPS", grpc.StatusCode.RESOURCE_EXHAUSTED,
                  create(pb.CreateChampionshipRequest(settings=settings()), metadata=me))
    cid = made.championship_id
    register = served.champs.Register
    await refused("CHAMPIONSHIP_NOT_FOUND", grpc.StatusCode.NOT_FOUND,
                  register(pb.RegisterRequest(championship_id="c_nope"), metadata=me))
    await refused("SIGN_IN_REQUIRED", grpc.StatusCode.UNAUTHENTICATED,
                  register(pb.RegisterRequest(championship_id=cid),
                           metadata=auth("not-a-token-of-anyone")))
    await refused("SIGN_IN_REQUIRED", grpc.StatusCode.UNAUTHENTICATED,
                  register(pb.RegisterRequest(championship_id=cid)))  # no credential at all
    for session in (owner, p1):
        await register(pb.RegisterRequest(championship_id=cid),
                       metadata=auth(session.access_token))
    await refused("ALREADY_REGISTERED", grpc.StatusCode.FAILED_PRECONDITION,
                  register(pb.RegisterRequest(championship_id=cid), metadata=me))
    await refused("NOT_ENOUGH_PLAYERS", grpc.StatusCode.FAILED_PRECONDITION,
                  served.admin.StartChampionship(admin_pb2.StartChampionshipRequest(
                      championship_id=cid, reason="test"), metadata=ADMIN))
    await refused("CHAMPIONSHIP_NOT_RUNNING", grpc.StatusCode.FAILED_PRECONDITION,
                  served.champs.Withdraw(pb.WithdrawRequest(championship_id=cid), metadata=me))
    await refused("NOT_REGISTERED", grpc.StatusCode.FAILED_PRECONDITION,
                  served.champs.Unregister(pb.UnregisterRequest(championship_id=cid),
                                           metadata=auth(p3.access_token)))
    # A banned account is refused: its ban ended its sessions (and it cannot sign in again).
    await served.admin.BanAccount(admin_pb2.BanAccountRequest(
        account_id=p3.account.account_id, is_banned=True, reason="test"), metadata=ADMIN)
    await refused("SESSION_REVOKED", grpc.StatusCode.UNAUTHENTICATED,
                  register(pb.RegisterRequest(championship_id=cid),
                           metadata=auth(p3.access_token)))
    await refused("NOT_REGISTERED", grpc.StatusCode.FAILED_PRECONDITION,
                  served.admin.RemoveChampionshipPlayer(admin_pb2.RemoveChampionshipPlayerRequest(
                      championship_id=cid, account_id="a_nobody", reason="test"),
                      metadata=ADMIN))
    await register(pb.RegisterRequest(championship_id=cid), metadata=auth(p2.access_token))
    await refused("CHAMPIONSHIP_FULL", grpc.StatusCode.RESOURCE_EXHAUSTED,
                  register(pb.RegisterRequest(championship_id=cid),
                           metadata=auth(p4.access_token)))
    got = (await served.champs.GetChampionship(pb.GetChampionshipRequest(
        championship_id=cid), metadata=me)).championship
    assert got.player_count == 3 and got.is_registered
    assert got.state == pb.CHAMPIONSHIP_STATE_REGISTERING
    await served.admin.StartChampionship(admin_pb2.StartChampionshipRequest(
        championship_id=cid, reason="test"), metadata=ADMIN)
    await refused("REGISTRATION_CLOSED", grpc.StatusCode.FAILED_PRECONDITION,
                  served.champs.Unregister(pb.UnregisterRequest(championship_id=cid),
                                           metadata=me))
    await served.champs.Withdraw(pb.WithdrawRequest(championship_id=cid), metadata=me)
    await refused("ALREADY_WITHDRAWN", grpc.StatusCode.FAILED_PRECONDITION,
                  served.champs.Withdraw(pb.WithdrawRequest(championship_id=cid), metadata=me))
    cancelled = (await served.admin.CancelChampionship(admin_pb2.CancelChampionshipRequest(
        championship_id=cid, reason="test"), metadata=ADMIN)).championship
    assert cancelled.state == pb.CHAMPIONSHIP_STATE_CANCELLED
    (table,) = cancelled.rounds[0].tables
    summary = (await served.game.GetTable(copas_pb2.GetTableRequest(
        table_id=table.table_id))).table
    assert summary.phase == copas_pb2.PHASE_GAME_OVER  # its game ended CLOSED
    await refused("CHAMPIONSHIP_NOT_RUNNING", grpc.StatusCode.FAILED_PRECONDITION,
                  served.admin.CancelChampionship(admin_pb2.CancelChampionshipRequest(
                      championship_id=cid, reason="test"), metadata=ADMIN))


async def play_championship(address: str, champs: Any, admin: Any, players: int,
                            rounds: int, *, withdraw: int = -1, absent: int = -1
                            ) -> tuple[pb.Championship, list[Any]]:
    sessions = await sign_in(address, [f"Robo{n:02}" for n in range(players)])
    made = (await admin.CreateChampionship(admin_pb2.CreateChampionshipRequest(
        settings=settings(rounds=rounds, max_players=players, start_when_full=True),
        reason="test"), metadata=ADMIN)).championship
    for session in sessions:
        await champs.Register(pb.RegisterRequest(championship_id=made.championship_id),
                              metadata=auth(session.access_token))
    bots = [BotPlayer(address, s, made.championship_id) for n, s in enumerate(sessions)
            if n != absent]  # the absent one registers, then never comes
    tasks = [asyncio.ensure_future(b.run()) for b in bots]
    if withdraw >= 0:
        while not bots[withdraw].played:
            await asyncio.sleep(0.05)
        await champs.Withdraw(pb.WithdrawRequest(championship_id=made.championship_id),
                              metadata=auth(sessions[withdraw].access_token))
    await asyncio.wait_for(asyncio.gather(*tasks), 120)
    final = (await champs.GetChampionship(pb.GetChampionshipRequest(
        championship_id=made.championship_id))).championship
    return final, sessions


async def test_thirteen_bots_play_four_rounds_and_the_records_give_the_standings(
        served: Served) -> None:
    began = time.monotonic()
    final, _ = await play_championship(served.address, served.champs, served.admin,
                                              13, 4, withdraw=12)
    assert final.state == pb.CHAMPIONSHIP_STATE_FINISHED and final.seed
    # Robo12 withdrew in round 1: rounds 2 to 4 are paired without it (12 players: 4+4+4).
    assert [sorted(len(t.seats) for t in r.tables) for r in final.rounds] == \
        [[4, 4, 5]] + [[4, 4, 4]] * 3
    assert all(t.is_finished for r in final.rounds for t in r.tables)
    names_of = {p.player_id: p.display_name for p in final.players}
    records = await records_of(served.address, final)
    expected = recomputed(final, records)
    assert [(names_of[s.player], s.points, s.games) for s in expected] == \
        [(line.display_name, line.points, line.games) for line in final.standings]
    assert [int(s.decided_by) + 1 for s in expected] == [
        line.decided_by for line in final.standings]
    games = {line.display_name: line.games for line in final.standings}
    assert games.pop("Robo12") == 1 and set(games.values()) == {4}
    # The withdrawn player left the game it was in (a leaver, 0 points there), keeps that
    # result in the standings and is seated in no later round.
    withdrawn = next(line for line in final.standings if line.display_name == "Robo12")
    assert withdrawn.has_withdrawn
    (seat,) = [s for t in final.rounds[0].tables for s in t.seats if s.display_name == "Robo12"]
    assert seat.has_left and seat.points == 0
    assert all(s.display_name != "Robo12" for r in final.rounds[1:] for t in r.tables
               for s in t.seats)
    # So no seat of a later round is played by the server: everyone there came and stayed.
    for round_ in final.rounds[1:]:
        for table in round_.tables:
            record = records[table.table_id]
            assert not record["result"]["leavers"]
            assert all(s.get("acted") is not False for s in record["seats"])
    seating = served.running.metrics.championship_seating
    took = sample(seating, "copas_championship_seating_seconds_sum") / \
        sample(seating, "copas_championship_seating_seconds_count")
    print(f"13 bots, 4 rounds: {time.monotonic() - began:.1f} s; seating a round of 13 "
          f"(3 tables made, seated, on disk): {took * 1e3:.1f} ms")


async def test_a_no_show_is_ranked_behind_everyone_at_its_table(served: Served) -> None:
    """A registered player who never comes: their seat is played by the server (away, at
    once), the record says they made no move of their own, and they rank last at their
    table (0 championship points), as a leaver would, whatever their game's total."""
    final, sessions = await play_championship(served.address, served.champs, served.admin,
                                              4, 1, absent=2)
    assert final.state == pb.CHAMPIONSHIP_STATE_FINISHED
    records = await records_of(served.address, final)
    (record,) = records.values()
    acted = {s["name"]: s.get("acted", True) for s in record["seats"]}
    absent = sessions[2].account.display_name
    assert acted == {s.account.display_name: s.account.display_name != absent
                     for s in sessions}
    line = next(line for line in final.standings if line.display_name == "Robo02")
    assert line.points == 0 and final.standings[-1].display_name == "Robo02"
    names_of = {p.player_id: p.display_name for p in final.players}
    expected = recomputed(final, records)
    assert [(names_of[s.player], s.points) for s in expected] == \
        [(line.display_name, line.points) for line in final.standings]


async def test_a_no_show_is_dropped_and_no_later_seat_is_played_by_the_server(
        served: Served) -> None:
    """drop_absent (the default): the player who never came to round 1 is not seated in
    round 2, so round 2's table is four people who all came and stayed (no seat of theirs
    played by the clocks); the no-show keeps its one game in the standings, dropped."""
    final, _ = await play_championship(served.address, served.champs, served.admin, 5, 2,
                                       absent=4)
    assert final.state == pb.CHAMPIONSHIP_STATE_FINISHED
    assert [[len(t.seats) for t in r.tables] for r in final.rounds] == [[5], [4]]
    records = await records_of(served.address, final)
    (first,) = final.rounds[0].tables
    acted = {s["name"]: s.get("acted", True) for s in records[first.table_id]["seats"]}
    assert acted["Robo04"] is False  # the no-show
    (second,) = final.rounds[1].tables
    assert "Robo04" not in [s.display_name for s in second.seats]
    record = records[second.table_id]
    assert not record["result"]["leavers"]
    assert all(s.get("acted") is not False for s in record["seats"])
    line = next(line for line in final.standings if line.display_name == "Robo04")
    assert line.is_dropped and line.games == 1
    names_of = {p.player_id: p.display_name for p in final.players}
    assert [(names_of[s.player], s.points, s.games) for s in recomputed(final, records)] == \
        [(line.display_name, line.points, line.games) for line in final.standings]


async def test_a_championship_starts_by_itself_at_its_time(served: Served) -> None:
    from google.protobuf.timestamp_pb2 import Timestamp

    sessions = await sign_in(served.address, ["T0", "T1", "T2"])
    at = Timestamp()
    at.FromNanoseconds(int((time.time() + 1.0) * 1e9))
    made = (await served.admin.CreateChampionship(admin_pb2.CreateChampionshipRequest(
        settings=settings(rounds=1, start_time=at), reason="test"),
        metadata=ADMIN)).championship
    cid = made.championship_id
    for session in sessions:
        await served.champs.Register(pb.RegisterRequest(championship_id=cid),
                                     metadata=auth(session.access_token))
    now = (await served.champs.GetChampionship(pb.GetChampionshipRequest(
        championship_id=cid))).championship
    assert now.state == pb.CHAMPIONSHIP_STATE_REGISTERING  # not before its time
    stream = served.champs.WatchChampionship(pb.WatchChampionshipRequest(championship_id=cid),
                                             metadata=auth(sessions[0].access_token))
    async for message in stream:
        if message.your_table.table_id:
            break
    assert message.championship.state == pb.CHAMPIONSHIP_STATE_RUNNING
    assert message.championship.begin_time.ToNanoseconds() >= at.ToNanoseconds()
    (table,) = message.championship.rounds[0].tables
    assert message.your_table.table_id == table.table_id
    # The message is every watcher's: a person finds their own seat by their player id.
    assert [s.player_id == message.your_player_id for s in table.seats].count(True) == 1
    assert message.your_player_id.startswith("p_") and not any(s.is_you for s in table.seats)
    stream.cancel()
    listed = (await served.champs.ListChampionships(pb.ListChampionshipsRequest())
              ).championships
    assert [c.championship_id for c in listed] == [cid] and not listed[0].rounds


def sample(metric: Any, name: str) -> float:
    """One sample of one metric object (its own collect, not the whole registry's)."""
    return next(x.value for family in metric.collect() for x in family.samples
                if x.name == name)


async def test_metrics_count_rounds_and_seating_time(served: Served) -> None:
    await play_championship(served.address, served.champs, served.admin, 3, 2)
    metrics = served.running.metrics
    assert sample(metrics.championship_rounds, "copas_championship_rounds_seated_total") == 2
    seated = sample(metrics.championship_seating, "copas_championship_seating_seconds_count")
    took = sample(metrics.championship_seating, "copas_championship_seating_seconds_sum")
    assert seated == 2
    print(f"seating a round of 3 (its table made, seated, on disk): {took / seated * 1e3:.1f} ms")


async def test_a_driver_killed_while_seating_seats_the_same_round_at_the_same_tables() -> None:
    """The tables are made and seated, then the round's write fails (as a kill -9 before it
    would leave it): the next step makes no new table and seats everyone where they were."""
    from server.championships.driver import Driver
    from server.championships.model import Registration, Spec
    from server.championships.store import SqliteChampionshipStore
    from server.championships.tables import LocalTables
    from server.observability import Metrics
    from server.tables.clock import ManualScheduler
    from tests.helpers.servers import registry_for_tests

    registry: Any = registry_for_tests(ManualScheduler())
    store = SqliteChampionshipStore(":memory:")

    await store.create(Spec("c_1", "Cup", "online", Rules.preset("online", max_hands=1), 2,
                            False, 9, 3, None, False, 0.0, "seed", "", 1.0))
    for n in range(9):
        await store.register("c_1", Registration(f"a_{n}", f"P{n}", 10.0 + n), 9)
    await store.start("c_1", 20.0, 3)
    driver = Driver(store, LocalTables(registry), registry.store, Metrics())
    real = store.seat_round

    async def dies(*args: Any) -> bool:
        raise RuntimeError("killed before the round's write")
    store.seat_round = dies  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        await driver.step("c_1")
    first = {t.id: [s.account_id for s in t.seats] for t in registry.live()}
    assert sorted(len(v) for v in first.values()) == [4, 5]
    store.seat_round = real  # type: ignore[method-assign]
    await driver.step("c_1")
    again = {t.id: [s.account_id for s in t.seats] for t in registry.live()}
    assert again == first
    loaded = await store.load("c_1")
    assert loaded is not None and {t.table_id: list(t.players) for t in loaded.tables} == first
    await driver.step("c_1")  # nothing more to seat while round 1 plays
    assert {t.id for t in registry.live()} == set(first)

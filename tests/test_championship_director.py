"""A tournament director's tools (docs/RULES.md "Championships", docs/OPERATING.md), from the
rules: the scoring options the server hands the engine, registration that opens and closes at
set times, late entry, check-in, no-shows dropped, a time limit per round, pairings announced
before a round, pause and resume, a result corrected, a player disqualified, an announced
round re-seated, a final table. On one manual clock (``Director``: the store, the tables, the
driver and the service, no network), so nothing waits for real time; each refusal with its
reason, and a refused call changes nothing. The contract's side (gRPC, the audit log) is in
test_championship_operators.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from copas.v1 import championships_pb2 as pb
from copas.v1 import copas_pb2

from engine import GameEndReason
from server.championships.format import (
    ChampionshipRules,
    GameResult,
    Scoring,
    TieBreak,
    final_standings,
    seat_final,
    standings,
)
from server.championships.model import Championship
from server.errors import ServiceError
from server.rpc.championships import championship_pb
from tests.helpers.championships import Director


@pytest.fixture
async def director() -> AsyncIterator[Director]:
    made = Director()
    yield made
    made.close()


async def refused(reason: str, call: Any) -> ServiceError:
    with pytest.raises(ServiceError) as caught:
        await call
    assert caught.value.reason == reason, caught.value.message
    return caught.value


def results_of(c: Championship, *, rounds: int | None = None) -> list[GameResult]:
    """The counted games by public player ids (as the records give them)."""
    ids = {a: c.player_id(a) for a in c.players()}
    last = c.spec.rounds if rounds is None else rounds
    return [GameResult(k.result.round_no, k.result.table, tuple(ids[p] for p in k.result.players),
                       k.result.totals, tuple(ids[p] for p in k.result.leavers),
                       tuple(ids[p] for p in k.result.no_shows))
            for k in c.counted if k.result.round_no <= last]


def lines(c: Championship) -> list[tuple[str, int]]:
    return [(s.player, s.place) for s in c.standings()]


# ---------------------------------------------------------------- the settings


async def test_the_directors_settings_are_checked_and_nothing_is_made_by_a_refusal(
        director: Director) -> None:
    now = director.clock.now()
    bad: list[tuple[str, dict[str, Any]]] = [
        ("MATCHPOINTS_NEED_DUPLICATE_DEALS", {"scoring": Scoring.MATCHPOINTS}),
        ("INVALID_CHAMPIONSHIP", {"final_table": 2}),
        ("INVALID_CHAMPIONSHIP", {"final_table": 6}),
        ("INVALID_CHAMPIONSHIP", {"final_table": 5, "max_players": 4}),
        ("INVALID_CHAMPIONSHIP", {"late_entry_rounds": 3}),  # 2 rounds
        ("INVALID_CHAMPIONSHIP", {"late_entry_rounds": -1}),
        ("INVALID_CHAMPIONSHIP", {"check_in": 60.0}),  # no start time
        ("INVALID_CHAMPIONSHIP", {"check_in": 60.0, "start_at": now + 600,
                                  "start_when_full": True, "max_players": 8}),
        ("INVALID_CHAMPIONSHIP", {"check_in": 86401.0, "start_at": now + 600}),
        ("INVALID_CHAMPIONSHIP", {"round_time_limit": -1.0}),
        ("INVALID_CHAMPIONSHIP", {"round_time_limit": float("nan")}),
        ("INVALID_CHAMPIONSHIP", {"pairing_notice": 3601.0}),
        ("INVALID_CHAMPIONSHIP", {"registration_closes": now - 1}),
        ("INVALID_CHAMPIONSHIP", {"registration_opens": now + 20,
                                  "registration_closes": now + 10}),
        ("INVALID_CHAMPIONSHIP", {"registration_opens": now + 20, "start_at": now + 10}),
    ]
    for reason, settings in bad:
        await refused(reason, director.create(**settings))
    assert await director.store.page(10, 0, True) == []
    cid = await director.create(
        duplicate_deals=True, scoring=Scoring.MATCHPOINTS, buchholz=True, final_table=3,
        registration_opens=now + 10, registration_closes=now + 500, late_entry_rounds=1,
        check_in=60.0, start_at=now + 600, round_time_limit=900.0, pairing_notice=30.0)
    c = await director.service.get(cid)
    assert c.spec.rules == ChampionshipRules(2, c.spec.game, True, Scoring.MATCHPOINTS, True, 3)
    assert c.spec.drop_absent  # a new championship's default
    shown = championship_pb(c, is_full=True).settings
    assert (shown.scoring, shown.buchholz, shown.final_table, shown.late_entry_rounds,
            shown.check_in_seconds, shown.drop_absent, shown.round_time_limit_seconds,
            shown.pairing_notice_seconds) == (pb.CHAMPIONSHIP_SCORING_MATCHPOINTS, True, 3, 1,
                                              60.0, True, 900.0, 30.0)
    assert shown.registration_open_time.ToNanoseconds() == int((now + 10) * 1e9)
    assert shown.registration_close_time.ToNanoseconds() == int((now + 500) * 1e9)


# ---------------------------------------------------------------- registration and check-in


async def test_registration_opens_and_closes_at_its_times(director: Director) -> None:
    now = director.clock.now()
    cid = await director.create(registration_opens=now + 100, registration_closes=now + 200)
    error = await refused("REGISTRATION_NOT_OPEN", director.register(cid, [0]))
    assert "1970-01-12T13:48:20Z" in error.message  # when it opens, as the message says
    director.clock.advance(100)
    await director.register(cid, range(3))
    director.clock.advance(100)
    await refused("REGISTRATION_CLOSED", director.register(cid, [3]))
    c = await director.service.get(cid)
    assert c.players() == ["a_00", "a_01", "a_02"]  # the refusals wrote nothing


async def test_late_entrants_play_from_the_next_round_until_round_n_is_paired(
        director: Director) -> None:
    cid = await director.create(rounds=3, late_entry_rounds=2)
    await director.register(cid, range(4))
    await director.service.start(cid)
    c = await director.service.get(cid)
    assert c.seated_round == 1 and sorted(c.plays(1)) == [f"a_0{n}" for n in range(4)]
    await director.register(cid, [4, 5])  # during round 1: they play from round 2
    c = await director.play_round(cid)
    assert [r.first_round for r in c.registrations] == [1, 1, 1, 1, 2, 2]
    assert c.seated_round == 2 and sorted(len(t.players) for t in c.tables_of(2)) == [3, 3]
    await refused("REGISTRATION_CLOSED", director.register(cid, [6]))  # round 2 is paired
    c = await director.play_round(cid)
    games = {s.player: s.games for s in c.standings()}
    late = {c.player_id("a_04"), c.player_id("a_05")}
    assert {games[p] for p in late} == {1} and {games[p] for p in set(games) - late} == {2}
    # The standings are the engine's for these results: nothing scored before round 2.
    assert lines(c) == [(s.player, s.place) for s in standings(
        results_of(c), [c.player_id(a) for a in c.players()], c.spec.seed, c.spec.rules)]
    shown = championship_pb(c, is_full=True)
    assert [p.first_round for p in shown.players] == [1, 1, 1, 1, 2, 2]


async def test_check_in_before_the_start_and_who_did_not_is_not_seated(
        director: Director) -> None:
    now = director.clock.now()
    plain = await director.create()
    await director.register(plain, [0])
    await refused("CHECK_IN_NOT_OPEN", director.service.check_in(plain, "a_00"))
    cid = await director.create(start_at=now + 100, check_in=50.0)
    await director.register(cid, range(5))
    await refused("CHECK_IN_NOT_OPEN", director.service.check_in(cid, "a_00"))
    director.clock.advance(60)  # the window is open: 40 s left
    for n in (0, 1, 2, 0):  # a second check-in changes nothing
        await director.service.check_in(cid, f"a_{n:02}")
    await refused("NOT_REGISTERED", director.service.check_in(cid, "a_09"))
    await director.register(cid, [5])  # registering in the window checks in
    c = await director.step(cid)
    assert c.phase.value == "registering"  # not before its time
    assert [r.checked_in is not None for r in c.registrations] == [True, True, True, False,
                                                                   False, True]
    assert [p.is_checked_in for p in championship_pb(c, is_full=True).players] == [
        True, True, True, False, False, True]
    director.clock.advance(40)
    c = await director.step(cid)
    assert c.phase.value == "running"
    assert c.players() == ["a_00", "a_01", "a_02", "a_05"]  # a_03, a_04 never checked in
    assert sorted(p for t in c.tables_of(1) for p in t.players) == c.players()
    await refused("CHECK_IN_CLOSED", director.service.check_in(cid, "a_00"))


async def test_an_operators_start_removes_who_has_not_checked_in(director: Director) -> None:
    now = director.clock.now()
    cid = await director.create(start_at=now + 100, check_in=50.0)
    await director.register(cid, range(4))
    director.clock.advance(60)
    for n in range(3):
        await director.service.check_in(cid, f"a_{n:02}")
    c = await director.service.start(cid)
    assert c.players() == ["a_00", "a_01", "a_02"] and c.seated_round == 1


# ---------------------------------------------------------------- absent players


async def test_a_no_show_is_dropped_from_the_next_rounds_and_keeps_what_it_won(
        director: Director) -> None:
    cid = await director.create(rounds=3)
    await director.register(cid, range(5))
    await director.service.start(cid)
    c = await director.play_round(cid, absent={"a_04"})
    (result,) = [k.result for k in c.counted]
    assert result.no_shows == ("a_04",)  # never acted: the record says so
    assert [r.dropped for r in c.registrations] == [0, 0, 0, 0, 2]
    assert c.seated_round == 2 and sorted(c.tables_of(2)[0].players) == [
        "a_00", "a_01", "a_02", "a_03"]
    shown = championship_pb(c, is_full=True)
    assert [p.is_dropped for p in shown.players] == [False] * 4 + [True]
    line = next(s for s in shown.standings if s.player_id == c.player_id("a_04"))
    assert line.is_dropped and line.games == 1
    c = await director.play_round(cid)
    c = await director.play_round(cid)
    assert c.phase.value == "finished"
    games = {s.player: s.games for s in c.standings()}
    assert games[c.player_id("a_04")] == 1 and sorted(games.values()) == [1, 3, 3, 3, 3]
    assert lines(c) == [(s.player, s.place) for s in standings(
        results_of(c), [c.player_id(a) for a in c.players()], c.spec.seed, c.spec.rules)]


async def test_no_later_round_seats_a_dropped_player(director: Director) -> None:
    """A no-show dropped after round 1 is at no table of rounds 2 and 3, so no seat there is
    played by the server for them: each later game is its four people's."""
    cid = await director.create(rounds=3)
    await director.register(cid, range(5))
    await director.service.start(cid)
    await director.play_round(cid, absent={"a_02"})
    c = await director.play_round(cid)
    c = await director.play_round(cid)
    assert c.phase.value == "finished"
    for round_no in (2, 3):
        (table,) = c.tables_of(round_no)
        assert sorted(table.players) == ["a_00", "a_01", "a_03", "a_04"]
        live = director.table(table.table_id)
        assert all(s.has_acted for s in live.seats) and not any(live.game.has_left)
    assert sorted((k.result.round_no, k.result.no_shows) for k in c.counted) == [
        (1, ("a_02",)), (2, ()), (3, ())]


async def test_a_player_who_withdrew_is_not_seated_in_the_rounds_paired_after(
        director: Director) -> None:
    """Withdrawn mid-round 1: they leave that game (a leaver, their result kept) and are
    paired in no later round (9 players, 5+4, then 8: 4+4), so no seat of theirs is played
    by the server after their withdrawal; the standings are the results' own."""
    cid = await director.create(rounds=3)
    await director.register(cid, range(9))
    await director.service.start(cid)
    c = await director.service.withdraw(cid, "a_08")
    (table,) = [t for t in c.tables_of(1) if "a_08" in t.players]
    c = await director.step(cid)  # the driver makes them leave the game they are in
    assert director.table(table.table_id).game.has_left[table.players.index("a_08")]
    c = await director.play_round(cid)
    (counted,) = [k.result for k in c.counted if k.table_id == table.table_id]
    assert counted.leavers == ("a_08",)
    assert [len(t.players) for t in c.tables_of(2)] == [4, 4]
    assert all("a_08" not in t.players for t in c.tables_of(2))
    c = await director.play_round(cid)
    c = await director.play_round(cid)
    assert c.phase.value == "finished"
    assert all("a_08" not in t.players for t in c.tables_of(3))
    games = {s.player: s.games for s in c.standings()}
    assert games.pop(c.player_id("a_08")) == 1 and set(games.values()) == {3}
    assert lines(c) == [(s.player, s.place) for s in standings(
        results_of(c), [c.player_id(a) for a in c.players()], c.spec.seed, c.spec.rules)]
    shown = championship_pb(c, is_full=True)
    line = next(s for s in shown.standings if s.player_id == c.player_id("a_08"))
    assert line.has_withdrawn and line.games == 1 and not line.is_dropped


async def test_a_pairing_made_before_a_withdrawal_still_seats_them_who_leave_at_once(
        director: Director) -> None:
    """A pairing is fixed once made: a player who withdraws after their round was announced
    is seated as announced and leaves at once; the round after is paired without them."""
    cid = await director.create(rounds=3, pairing_notice=30.0)
    await director.register(cid, range(8))
    await director.service.start(cid)
    director.clock.advance(30)
    await director.step(cid)
    c = await director.play_round(cid)
    assert 2 in c.announced and not c.tables_of(2)
    await director.service.withdraw(cid, "a_03")
    director.clock.advance(30)
    c = await director.step(cid)
    (table,) = [t for t in c.tables_of(2) if "a_03" in t.players]
    assert director.table(table.table_id).game.has_left[table.players.index("a_03")]
    c = await director.play_round(cid)
    assert [k.result.leavers for k in c.counted if k.table_id == table.table_id] == [("a_03",)]
    (paired,) = c.announced.values()
    assert sorted(len(t) for t in paired.tables) == [3, 4]
    assert all("a_03" not in t for t in paired.tables)


async def test_without_drop_absent_a_no_show_plays_every_round(director: Director) -> None:
    cid = await director.create(rounds=2, drop_absent=False)
    await director.register(cid, range(4))
    await director.service.start(cid)
    c = await director.play_round(cid, absent={"a_03"})
    assert c.counted[0].result.no_shows == ("a_03",)
    assert "a_03" in c.tables_of(2)[0].players


async def test_a_leaver_is_not_dropped_and_fewer_than_three_left_ends_it(
        director: Director) -> None:
    cid = await director.create(rounds=3)
    await director.register(cid, range(4))
    await director.service.start(cid)
    c = await director.service.get(cid)
    (table,) = c.tables_of(1)
    live = director.table(table.table_id)
    from engine import Leave

    live.act(table.players.index("a_00"), Leave(table.players.index("a_00")))
    c = await director.play_round(cid, absent={"a_02", "a_03"})
    assert c.counted[0].result.leavers == ("a_00",)
    assert [r.dropped for r in c.registrations] == [0, 0, 2, 2]
    assert c.phase.value == "finished" and c.seated_round == 1  # 2 left: no round 2


# ---------------------------------------------------------------- time limit and pause


LONG = {**Director.RULES, "max_hands": 3, "play_timeout": 600.0, "pass_timeout": 600.0}


async def pass_all(director: Director, table_id: str) -> None:
    table = director.table(table_id)
    game = table.game
    for seat in list(game.to_act()):
        table.act(seat, game.auto_action(seat))


async def test_the_round_time_limit_ends_the_games_still_running(director: Director) -> None:
    cid = await director.create(rounds=2, round_time_limit=60.0, overrides=LONG)
    await director.register(cid, range(8))
    c = await director.service.start(cid)
    seated = c.rounds[1]
    assert c.time_limits == {1: seated + 60.0}
    first, second = c.tables_of(1)
    director.play(first.table_id)  # one table finishes in time
    await pass_all(director, second.table_id)  # the other passes, then nobody plays
    director.clock.advance(59)
    c = await director.step(cid)
    assert len(c.counted) == 1 and not director.table(second.table_id).is_finished
    director.clock.advance(1)
    c = await director.step(cid)  # the limit ends it...
    game = director.table(second.table_id).game
    assert game.is_over and game.end_reason is GameEndReason.TIME_LIMIT
    assert list(game.totals) == [0, 0, 0, 0]  # the hand in progress does not count
    c = await director.step(cid)  # ...and its record is counted
    assert {k.end_reason for k in c.counted} == {GameEndReason.HAND_LIMIT,
                                                 GameEndReason.TIME_LIMIT}
    assert not c.counted[1].result.no_shows  # they passed: they came
    assert c.seated_round == 2
    shown = championship_pb(c, is_full=True)
    assert shown.rounds[0].time_limit.ToNanoseconds() == int((seated + 60.0) * 1e9)
    assert [t.end_reason for t in shown.rounds[0].tables] == [
        copas_pb2.GAME_END_REASON_HAND_LIMIT, copas_pb2.GAME_END_REASON_TIME_LIMIT]


async def test_a_paused_championship_holds_its_tables_and_its_clock(director: Director) -> None:
    cid = await director.create(rounds=2, round_time_limit=60.0, overrides=LONG)
    await director.register(cid, range(4))
    c = await director.service.start(cid)
    (table,) = c.tables_of(1)
    live = director.table(table.table_id)
    await pass_all(director, table.table_id)
    director.clock.advance(30)
    c = await director.service.pause(cid, True)
    assert c.paused == director.clock.now() and live.is_held
    assert championship_pb(c, is_full=True).is_paused and live.view(None).is_held
    again = await director.service.pause(cid, True)  # paused already: nothing changes
    assert again.version == c.version
    director.clock.advance(1000)  # far past the limit and every clock: nothing happens
    c = await director.step(cid)
    assert not live.is_finished and not c.counted and live.is_held
    c = await director.service.pause(cid, False)
    assert c.paused is None and not live.is_held
    assert c.time_limits[1] == c.rounds[1] + 60.0 + 1000  # moved on by the pause
    assert live.deadline == director.clock.now() + 600.0  # the turn's whole time
    director.clock.advance(29)
    c = await director.step(cid)
    assert not live.is_finished
    director.clock.advance(1)
    await director.step(cid)
    assert live.game.end_reason is GameEndReason.TIME_LIMIT


async def test_a_paused_championship_seats_no_round(director: Director) -> None:
    cid = await director.create(rounds=2)
    await director.register(cid, range(4))
    c = await director.service.start(cid)
    director.play(c.tables_of(1)[0].table_id)  # its game ends, then the pause comes
    await director.service.pause(cid, True)
    c = await director.step(cid)
    assert c.is_round_over(1) and c.seated_round == 1  # counted, but nothing seated
    c = await director.step(cid)
    assert c.seated_round == 1
    await director.service.pause(cid, False)
    c = await director.step(cid)
    assert c.seated_round == 2
    c = await director.play_round(cid)
    assert c.phase.value == "finished"
    await refused("CHAMPIONSHIP_NOT_RUNNING", director.service.pause(cid, True))


# ---------------------------------------------------------------- pairings announced


async def test_pairings_are_announced_ahead_and_an_operator_swaps_two_players(
        director: Director) -> None:
    cid = await director.create(rounds=2, pairing_notice=30.0, round_pause=50.0)
    await director.register(cid, range(8))
    c = await director.service.start(cid)
    assert c.seated_round == 0 and c.current_round == 1 and not c.tables
    announced = c.announced[1]
    assert announced.starts == director.clock.now() + 30.0
    shown = championship_pb(c, is_full=True).rounds
    assert [(r.round_number, r.is_announced) for r in shown] == [(1, True)]
    assert shown[0].start_time.ToNanoseconds() == int(announced.starts * 1e9)
    assert all(not t.table_id for t in shown[0].tables)
    assert [[s.player_id for s in t.seats] for t in shown[0].tables] == [
        [c.player_id(p) for p in table] for table in announced.tables]
    a, b = announced.tables[0][1], announced.tables[1][2]
    await refused("INVALID_SWAP", director.service.reseat(cid, 1, a, announced.tables[0][0]))
    await refused("PLAYER_NOT_IN_ROUND", director.service.reseat(cid, 1, a, "a_39"))
    await refused("ROUND_NOT_ANNOUNCED", director.service.reseat(cid, 2, a, b))
    c = await director.service.reseat(cid, 1, c.player_id(a), b)  # by player id or account
    swapped = c.announced[1].tables
    assert swapped[0][1] == b and swapped[1][2] == a
    director.clock.advance(29)
    c = await director.step(cid)
    assert c.seated_round == 0
    director.clock.advance(1)
    c = await director.step(cid)
    assert [t.players for t in c.tables_of(1)] == list(swapped)  # seated as announced
    assert not c.announced
    await refused("ROUND_ALREADY_STARTED", director.service.reseat(cid, 1, a, b))
    c = await director.play_round(cid)
    # Round 2's pairings come during the pause after round 1: announced 50 - 30 = 20 s after
    # its end, shown with round 1's results; its tables are made 30 s later.
    assert c.current_round == 1
    director.clock.advance(20)
    c = await director.step(cid)
    assert c.current_round == 2 and c.seated_round == 1 and c.is_round_over(1)
    shown = championship_pb(c, is_full=True).rounds
    assert [(r.round_number, r.is_finished, r.is_announced) for r in shown] == [
        (1, True, False), (2, False, True)]
    director.clock.advance(30)
    c = await director.step(cid)
    assert c.seated_round == 2


# ---------------------------------------------------------------- corrected, disqualified


async def test_an_operator_corrects_a_counted_result_and_the_standings_follow(
        director: Director) -> None:
    cid = await director.create(rounds=2)
    await director.register(cid, range(4))
    c = await director.service.start(cid)
    (table,) = c.tables_of(1)
    from server.championships.service import Correction

    await refused("TABLE_NOT_COUNTED", director.service.correct(cid, Correction(1, 1, (1, 2, 3,
                                                                                        4))))
    c = await director.play_round(cid)
    before = c.counted[0]
    await refused("CHAMPIONSHIP_TABLE_NOT_FOUND",
                  director.service.correct(cid, Correction(1, 2, (1, 2, 3, 4))))
    await refused("INVALID_RESULT", director.service.correct(cid, Correction(1, 1, (1, 2, 3))))
    await refused("INVALID_RESULT", director.service.correct(cid, Correction(1, 1,
                                                                             (1, 2, 3, -4))))
    await refused("INVALID_RESULT", director.service.correct(cid, Correction(
        1, 1, (1, 2, 3, 4), True, (0,), (0,))))
    await refused("INVALID_RESULT", director.service.correct(cid, Correction(
        1, 1, (1, 2, 3, 4), True, (7,))))
    assert (await director.service.get(cid)).counted == [before]  # nothing changed
    winner = table.players[3]
    c = await director.service.correct(cid, Correction(1, 1, (26, 0, 0, 0), True, (0,), (),
                                                       "a scoring slip"))
    fixed = c.counted[0]
    assert fixed.result.totals == (26, 0, 0, 0) and fixed.result.leavers == (table.players[0],)
    assert (fixed.corrected, fixed.correction, fixed.end_reason) == (
        director.clock.now(), "a scoring slip", before.end_reason)
    assert fixed.counted == before.counted
    assert lines(c) == [(s.player, s.place) for s in standings(
        results_of(c), [c.player_id(a) for a in c.players()], c.spec.seed, c.spec.rules)]
    assert c.standings()[0].player in {c.player_id(p) for p in table.players[1:]}
    shown = championship_pb(c, is_full=True).rounds[0].tables[0]
    assert shown.is_corrected and [s.total for s in shown.seats] == [26, 0, 0, 0]
    assert shown.seats[0].has_left and winner
    c = await director.play_round(cid)
    assert c.phase.value == "finished"
    # The last round's results are corrected after the end too; the final standings follow.
    (last,) = c.tables_of(2)
    c = await director.service.correct(cid, Correction(2, 1, (0, 10, 20, 30)))
    assert c.phase.value == "finished" and last.table_id in c.counted_ids()
    assert next(k for k in c.counted if k.table_id == last.table_id).result.totals == (
        0, 10, 20, 30)
    assert lines(c) == [(s.player, s.place) for s in standings(
        results_of(c), [c.player_id(a) for a in c.players()], c.spec.seed, c.spec.rules)]
    other = await director.create()
    await director.register(other, range(4))
    await director.service.start(other)
    await director.play_round(other)
    await director.service.cancel(other)
    await refused("RESULT_LOCKED", director.service.correct(other, Correction(1, 1, (0,) * 4)))


async def test_a_disqualified_player_leaves_plays_no_more_and_is_ranked_last(
        director: Director) -> None:
    cid = await director.create(rounds=2)
    await director.register(cid, range(5))
    await refused("CHAMPIONSHIP_NOT_RUNNING", director.service.disqualify(cid, "a_00"))
    c = await director.service.start(cid)
    (table,) = c.tables_of(1)
    live = director.table(table.table_id)
    await refused("NOT_REGISTERED", director.service.disqualify(cid, "a_39"))
    c = await director.service.disqualify(cid, c.player_id("a_01"))  # by player id
    assert live.game.has_left[table.players.index("a_01")]  # out of the game at once
    await refused("ALREADY_DISQUALIFIED", director.service.disqualify(cid, "a_01"))
    c = await director.play_round(cid)
    assert "a_01" not in c.tables_of(2)[0].players and len(c.tables_of(2)[0].players) == 4
    c = await director.play_round(cid)
    last = c.standings()[-1]
    assert last.player == c.player_id("a_01") and last.disqualified and last.games == 1
    shown = championship_pb(c, is_full=True)
    assert shown.standings[-1].is_disqualified and shown.players[1].is_disqualified


# ---------------------------------------------------------------- scoring and the final


async def test_matchpoints_buchholz_and_a_final_table_as_the_engine_scores_them(
        director: Director) -> None:
    cid = await director.create(rounds=2, duplicate_deals=True, scoring=Scoring.MATCHPOINTS,
                                buchholz=True, final_table=3)
    await director.register(cid, range(8))
    await director.service.start(cid)
    await director.play_round(cid)
    c = await director.play_round(cid, absent={"a_07"})  # a no-show in round 2: dropped
    rules = c.spec.rules
    ids = [c.player_id(a) for a in c.players()]
    before = standings(results_of(c), ids, c.spec.seed, rules)
    assert lines(c) == [(s.player, s.place) for s in before]  # the final not yet played
    assert [(s.percentage, s.buchholz) for s in c.standings()] == [
        (s.percentage, s.buchholz) for s in before]
    shown = championship_pb(c, is_full=True)
    assert [(line.percentage, line.buchholz, line.matchpoints) for line in shown.standings] == [
        (float(s.percentage), float(s.buchholz), float(s.matchpoints)) for s in before]
    assert {line.decided_by for line in shown.standings} <= {
        pb.TIE_BREAK_POINTS, pb.TIE_BREAK_BUCHHOLZ, pb.TIE_BREAK_FIRSTS,
        pb.TIE_BREAK_RELATIVE_POINTS, pb.TIE_BREAK_HEAD_TO_HEAD, pb.TIE_BREAK_DRAW}
    seats = {(r.round_number, t.table_number, s.seat): s.percentage
             for r in shown.rounds if not r.is_final for t in r.tables for s in t.seats}
    assert seats == {(b.round_no, b.table, b.seat): float(b.percentage)
                     for s in before for b in s.boards}
    assert c.seated_round == 3 and c.tables_of(3)
    (final,) = c.tables_of(3)
    passed = {c.player_id("a_07")}
    assert [c.player_id(p) for p in final.players] == seat_final(
        rules, before, c.spec.seed, passed_over=passed)
    assert shown.rounds[-1].is_final and shown.current_round == 3
    c = await director.play_round(cid)
    assert c.phase.value == "finished"
    final_game = next(k.result for k in c.counted if k.result.round_no == 3)
    ids_of = {a: c.player_id(a) for a in c.players()}
    expected = final_standings(before, GameResult(
        3, 1, tuple(ids_of[p] for p in final_game.players), final_game.totals),
        passed_over=passed if ids_of["a_07"] in [s.player for s in before[:3]] else ())
    assert lines(c) == [(s.player, s.place) for s in expected]
    assert [s.decided_by for s in c.standings()[:3]] == [TieBreak.FINAL] * 3
    shown = championship_pb(c, is_full=True)
    assert [line.decided_by for line in shown.standings[:3]] == [pb.TIE_BREAK_FINAL] * 3
    assert sorted(line.final_place for line in shown.standings[:3])[0] == 1
    assert {line.games for line in shown.standings[:3]} == {2}  # the final adds no game


async def test_the_final_passes_over_a_player_who_withdrew_and_needs_enough_players(
        director: Director) -> None:
    cid = await director.create(rounds=1, final_table=3, round_pause=100.0)
    await director.register(cid, range(8))
    await director.service.start(cid)
    c = await director.play_round(cid)
    before = c.standings()
    top = c.accounts_by_player_id()[before[0].player]
    await director.service.withdraw(cid, top)  # in the pause: no final for them
    director.clock.advance(100)
    c = await director.step(cid)
    (final,) = c.tables_of(2)
    assert sorted(c.player_id(p) for p in final.players) == sorted(
        s.player for s in before[1:4])
    c = await director.play_round(cid)
    after = c.standings()
    assert {s.player for s in after[:3]} == {s.player for s in before[1:4]}
    assert after[3].player == before[0].player and after[3].place == 4  # then everyone else
    assert [s.player for s in after[4:]] == [s.player for s in before[4:]]
    # Four players, a final of four, one dropped after round 1: no final is played.
    other = await director.create(rounds=1, final_table=4)
    await director.register(other, range(4))
    await director.service.start(other)
    c = await director.play_round(other, absent={"a_03"})
    assert c.phase.value == "finished" and c.seated_round == 1

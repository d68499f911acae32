"""Championships of Bisca (docs/RULES.md, "Championships": "A Bisca championship"): the game
says the tables' sizes (2, one of 3 when the count is odd), its final's (2 or 3) and that the
most game points win, which places, championship points, relative points and matchpoints
follow. Over a real server on loopback: 4 and 5 signed-in reference bots play two rounds to the
end, the standings equal those recomputed from the Bisca records alone, the games move only
Bisca ratings of their kind (as a Hearts championship's games move Hearts's), the settings come
back as set, and each bad input (an unknown game, the other game's options, a preset or a final
the game has not) is refused with its reason and makes nothing. Runs on PostgreSQL too (the
suite's PostgreSQL pass: ``serving`` keeps the stores there)."""

from __future__ import annotations

import argparse
import asyncio
import io
from collections.abc import AsyncIterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import grpc
import pytest
from copas.admin.v1 import admin_pb2, admin_pb2_grpc
from copas.v1 import accounts_pb2, accounts_pb2_grpc, championships_pb2_grpc, copas_pb2
from copas.v1 import championships_pb2 as pb
from google.rpc import error_details_pb2, status_pb2
from rich.console import Console

from clients.championship import add_settings_arguments, print_championship, settings_from
from server.championships.format import (
    ChampionshipError,
    ChampionshipRules,
    GameResult,
    Scoring,
    Tally,
    board_scores,
    championship_points,
    seat_round,
    table_sizes,
)
from tests.helpers.calls import auth
from tests.helpers.championships import BotPlayer, recomputed, records_of, sign_in
from tests.helpers.servers import serving

GAME = "bisca"
ADMIN_TOKEN = "operator-token-for-the-bisca-championship-tests"
ADMIN = (("authorization", f"Bearer {ADMIN_TOKEN}"),)
# One hand a game, no pauses; a generous clock, so that a busy machine times nobody out.
FAST = copas_pb2.RulesOverrides(max_hands=1, play_timeout_seconds=15, trick_pause_seconds=0,
                                hand_pause_seconds=0)
DEADLINE = 240  # seconds for a whole championship on a machine busy with other tests


# ---------------------------------------------------------------- the format, pure


@pytest.mark.parametrize(("players", "sizes"), [
    (2, [2]), (3, [3]), (4, [2, 2]), (5, [3, 2]), (6, [2, 2, 2]), (7, [3, 2, 2]),
    (9, [3, 2, 2, 2]), (10, [2] * 5)])
def test_a_bisca_round_is_tables_of_two_and_one_of_three_when_odd(players: int,
                                                                   sizes: list[int]) -> None:
    assert table_sizes(players, GAME) == sizes
    with pytest.raises(ChampionshipError, match="at least 2 players"):
        table_sizes(1, GAME)
    with pytest.raises(ChampionshipError, match="game must be one of hearts, bisca"):
        table_sizes(players, "poker")


def test_the_most_game_points_win_a_bisca_table() -> None:
    result = GameResult(1, 1, ("A", "B", "C"), (4, 0, 4), game_name=GAME)
    assert result.places == (1, 3, 1) and result.most_wins
    assert championship_points(result) == {"A": 90, "B": 0, "C": 90}
    hearts = GameResult(1, 1, ("A", "B", "C"), (4, 0, 4))
    assert hearts.places == (2, 1, 2) and not hearts.most_wins
    # A leaver is behind everyone who stayed, whatever its total; a no-show last.
    left = GameResult(1, 1, ("A", "B", "C"), (9, 1, 0), leavers=("A",), game_name=GAME)
    assert left.places == (3, 1, 2)
    with pytest.raises(ChampionshipError, match="a table seats 2 to 3 different players"):
        GameResult(1, 1, ("A", "B", "C", "D"), (1, 2, 3, 4), game_name=GAME)


def test_relative_points_and_matchpoints_reward_the_most_points_in_bisca() -> None:
    rules = ChampionshipRules(1, None, True, Scoring.MATCHPOINTS, game_name=GAME)
    tally = Tally(["A", "B", "C", "D"], "seed", rules)
    tally.add(GameResult(1, 1, ("A", "B"), (4, 1), game_name=GAME))
    tally.add(GameResult(1, 2, ("C", "D"), (2, 0), game_name=GAME))
    rows = {s.player: s for s in tally.standings()}
    # Fewer relative points is better in every game: the winner's is below the table's mean.
    assert (rows["A"].relative_points, rows["B"].relative_points) == (Fraction(-3, 2), 1.5)
    assert (rows["C"].relative_points, rows["D"].relative_points) == (-1, 1)
    # Each seat held the same cards at both tables: A's 4 beat C's 2, B's 1 beat D's 0.
    scores = {b.player: b.percentage for b in board_scores(tally.results)}
    assert scores == {"A": 100, "C": 0, "B": 100, "D": 0}
    assert [s.player for s in tally.standings()] == ["A", "B", "C", "D"]


def test_a_bisca_final_is_of_two_or_three() -> None:
    assert ChampionshipRules(2, None, final_table=2, game_name=GAME).final_table == 2
    with pytest.raises(ChampionshipError, match=r"final_table must be 0 \(no final\) or 2 or 3"):
        ChampionshipRules(2, None, final_table=4, game_name=GAME)
    with pytest.raises(ChampionshipError, match=r"final_table must be 0 \(no final\) or 3 to 5"):
        ChampionshipRules(2, None, final_table=2)


def test_seating_a_bisca_round_pairs_players_who_have_not_met() -> None:
    players = [f"p{n}" for n in range(6)]
    first = seat_round(players, [], set(), "seed", 1, game=GAME)
    assert [len(t) for t in first] == [2, 2, 2]
    met = {frozenset(t) for t in first}
    second = seat_round(players, [], met, "seed", 2, game=GAME)
    assert not {frozenset(t) for t in second} & met


# ---------------------------------------------------------------- over a real server


class Served:
    def __init__(self, port: int, channel: grpc.aio.Channel) -> None:
        self.address = f"127.0.0.1:{port}"
        self.champs = championships_pb2_grpc.ChampionshipServiceStub(channel)
        self.admin = admin_pb2_grpc.AdminServiceStub(channel)
        self.accounts = accounts_pb2_grpc.AccountServiceStub(channel)


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    token_file = tmp_path / "admin-token"
    token_file.write_text(ADMIN_TOKEN + "\n")
    async with serving(admin_token_file=str(token_file), championship_interval=0.05,
                       championships_per_account=1) as (running, _), \
            grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        yield Served(running.port, channel)


def bisca(**changes: Any) -> pb.ChampionshipSettings:
    base: dict[str, Any] = {"display_name": "Taça da Bisca", "rounds": 2, "game": GAME,
                            "rules": FAST}
    return pb.ChampionshipSettings(**{**base, **changes})


def reason_of(error: grpc.aio.AioRpcError) -> str:
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            for detail in status_pb2.Status.FromString(value).details:
                info = error_details_pb2.ErrorInfo()
                if detail.Unpack(info):
                    return info.reason
    return ""


async def create(served: Served, settings: pb.ChampionshipSettings) -> pb.Championship:
    return (await served.admin.CreateChampionship(admin_pb2.CreateChampionshipRequest(
        settings=settings, reason="test"), metadata=ADMIN, timeout=30)).championship


async def everything(served: Served) -> list[pb.Championship]:
    return list((await served.champs.ListChampionships(pb.ListChampionshipsRequest(
        include_finished=True, page_size=100), timeout=30)).championships)


BAD = [
    ("an unknown game", bisca(game="poker"), "INVALID_RULES",
     "game must be one of hearts, bisca"),
    ("a Hearts option on Bisca", bisca(rules=copas_pb2.RulesOverrides(
        play_timeout_seconds=15, moon=copas_pb2.MOON_RULE_SHOOTER_CHOICE)), "INVALID_RULES",
     "moon: a Hearts option"),
    ("Bisca's options on Hearts", bisca(game="", rules=copas_pb2.RulesOverrides(
        bisca=copas_pb2.BiscaRulesOverrides(hand_size=7))), "INVALID_RULES",
     "rules.bisca holds Bisca's options"),
    ("Bisca's options on a game named hearts", bisca(
        game="hearts", rules=copas_pb2.RulesOverrides(
            bisca=copas_pb2.BiscaRulesOverrides(target=2))), "INVALID_RULES",
     "rules.bisca holds Bisca's options"),
    ("a Hearts preset", bisca(preset="online"), "INVALID_RULES", "bisca3"),
    ("partnerships", bisca(rules=copas_pb2.RulesOverrides(
        bisca=copas_pb2.BiscaRulesOverrides(partnerships=True))), "INVALID_RULES",
     "partnerships"),
    ("a final of four", bisca(final_table=4), "INVALID_CHAMPIONSHIP",
     "final_table is 0, or 2 or 3"),
]


@pytest.mark.parametrize(("what", "settings", "reason", "says"), BAD, ids=[b[0] for b in BAD])
async def test_each_bad_input_is_refused_with_its_reason_and_makes_nothing(
        served: Served, what: str, settings: pb.ChampionshipSettings, reason: str,
        says: str) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await create(served, settings)
    error = caught.value
    assert (error.code(), reason_of(error)) == (grpc.StatusCode.INVALID_ARGUMENT, reason), \
        error.details()
    assert says.lower() in (error.details() or "").lower(), error.details()
    # An account's own creation is refused the same way.
    (session,) = await sign_in(served.address, ["Organizer"])
    with pytest.raises(grpc.aio.AioRpcError) as again:
        await served.champs.CreateChampionship(pb.CreateChampionshipRequest(
            settings=settings), metadata=auth(session.access_token), timeout=30)
    assert reason_of(again.value) == reason
    assert await everything(served) == []


async def test_the_settings_come_back_as_set(served: Served) -> None:
    settings = bisca(preset="bisca7", rounds=3, max_players=9, min_players=4,
                     duplicate_deals=True, scoring=pb.CHAMPIONSHIP_SCORING_MATCHPOINTS,
                     buchholz=True, final_table=2, round_pause_seconds=1.5,
                     rules=copas_pb2.RulesOverrides(
                         play_timeout_seconds=15, max_hands=2,
                         bisca=copas_pb2.BiscaRulesOverrides(target=2, margin_bonus=False)))
    made = await create(served, settings)
    got = (await served.champs.GetChampionship(pb.GetChampionshipRequest(
        championship_id=made.championship_id), timeout=30)).championship
    (listed,) = await everything(served)
    expected = pb.ChampionshipSettings()
    expected.CopyFrom(settings)
    expected.ClearField("rules")  # what the server applies is in Championship.rules
    expected.drop_absent = True  # unset: true, as the contract says
    for shown in (made, got, listed):
        assert shown.settings == expected
        rules = shown.rules
        assert (rules.game, rules.players, rules.max_hands, rules.play_timeout_seconds) == \
            (GAME, 2, 2, 15)
        assert (rules.bisca.hand_size, rules.bisca.target, rules.bisca.margin_bonus,
                rules.bisca.partnerships) == (7, 2, False, False)
        assert rules.bisca.follow_suit == copas_pb2.BISCA_FOLLOW_SUIT_STOCK_EMPTY


async def play(served: Served, players: int, **changes: Any
               ) -> tuple[pb.Championship, list[Any]]:
    sessions = await sign_in(served.address, [f"Jogador{n}" for n in range(players)])
    made = await create(served, bisca(max_players=players, start_when_full=True, **changes))
    for session in sessions:
        await served.champs.Register(pb.RegisterRequest(
            championship_id=made.championship_id), metadata=auth(session.access_token),
            timeout=30)
    bots = [BotPlayer(served.address, s, made.championship_id) for s in sessions]
    await asyncio.wait_for(asyncio.gather(*(b.run() for b in bots)), DEADLINE)
    final = (await served.champs.GetChampionship(pb.GetChampionshipRequest(
        championship_id=made.championship_id), timeout=30)).championship
    return final, sessions


async def ratings_when_counted(served: Served, session: Any, games: int
                               ) -> list[accounts_pb2.Rating]:
    """The account's ratings once ``games`` rated games are in (the server takes a finished
    game into the ratings from its record, after the game's end)."""
    async def wait() -> list[accounts_pb2.Rating]:
        while True:
            profile = await served.accounts.GetProfile(accounts_pb2.GetProfileRequest(),
                                                       metadata=auth(session.access_token),
                                                       timeout=30)
            if sum(r.games for r in profile.ratings) >= games:
                return list(profile.ratings)
            await asyncio.sleep(0.1)
    return await asyncio.wait_for(wait(), 60)


@pytest.mark.parametrize(("players", "sizes"), [(4, [2, 2]), (5, [2, 3])])
async def test_a_bisca_championship_is_played_to_the_end_and_the_records_give_the_standings(
        served: Served, players: int, sizes: list[int]) -> None:
    final, sessions = await play(served, players)
    assert final.state == pb.CHAMPIONSHIP_STATE_FINISHED and final.seed
    assert final.settings.game == GAME and final.rules.game == GAME
    assert [sorted(len(t.seats) for t in r.tables) for r in final.rounds] == [sizes] * 2
    assert all(t.is_finished for r in final.rounds for t in r.tables)
    records = await records_of(served.address, final)
    assert {r["game"] for r in records.values()} == {GAME}
    # The places at each table: the most game points first, each place's points by them.
    for round_ in final.rounds:
        for table in round_.tables:
            record = records[table.table_id]
            totals = record["result"]["totals"]
            assert [s.total for s in table.seats] == totals
            best = max(totals)
            assert [s.place == 1 for s in table.seats] == [t == best for t in totals]
            assert sum(s.points for s in table.seats) == 60 * len(totals)
            assert not record["result"]["leavers"]
            assert all(s.get("acted") is not False for s in record["seats"])
    names_of = {p.player_id: p.display_name for p in final.players}
    expected = recomputed(final, records)
    assert [(names_of[s.player], s.points, float(s.relative_points), s.games)
            for s in expected] == [(line.display_name, line.points, line.relative_points,
                                    line.games) for line in final.standings]
    assert [int(s.decided_by) + 1 for s in expected] == [
        line.decided_by for line in final.standings]
    # Each game is rated as a table's game is, in Bisca's kind of its table's size only.
    seats_of = {s.account.display_name: [len(t.seats) for r in final.rounds for t in r.tables
                                         for seat in t.seats
                                         if seat.display_name == s.account.display_name]
                for s in sessions}
    for session in sessions:
        sizes_played = seats_of[session.account.display_name]
        ratings = await ratings_when_counted(served, session, len(sizes_played))
        assert {(r.game, r.players, r.partnerships): r.games for r in ratings} == {
            (GAME, size, False): sizes_played.count(size) for size in set(sizes_played)}



def test_the_cli_creates_a_championship_of_the_game_it_is_given() -> None:
    parser = argparse.ArgumentParser()
    add_settings_arguments(parser)
    made = settings_from(parser.parse_args(["--name", "Taça", "--game", GAME,
                                            "--play-timeout", "15"]))
    assert (made.game, made.preset, made.rules.play_timeout_seconds) == (GAME, "", 15)
    # Without --game: the server's default game and its first preset, as before.
    default = settings_from(parser.parse_args(["--name", "Cup"]))
    assert (default.game, default.preset) == ("", "")


def test_a_tally_counts_only_games_of_its_championship_s_game() -> None:
    tally = Tally(["A", "B", "C"], "seed", ChampionshipRules(1, None, game_name=GAME))
    with pytest.raises(ChampionshipError, match="a game of the default game in a championship"):
        tally.add(GameResult(1, 1, ("A", "B", "C"), (1, 2, 3)))
    tally.add(GameResult(1, 1, ("A", "B", "C"), (1, 2, 3), game_name=GAME))
    assert [s.player for s in tally.standings()] == ["C", "B", "A"]


async def test_a_bisca_final_of_two_decides_the_top_places(served: Served) -> None:
    final, _ = await play(served, 4, rounds=1, final_table=2)
    assert final.state == pb.CHAMPIONSHIP_STATE_FINISHED
    assert [(r.is_final, sorted(len(t.seats) for t in r.tables)) for r in final.rounds] == \
        [(False, [2, 2]), (True, [2])]
    (table,) = final.rounds[1].tables
    finalists = {s.display_name: s.place for s in table.seats}
    assert {line.display_name for line in final.standings[:2]} == set(finalists)
    assert all(line.decided_by == pb.TIE_BREAK_FINAL for line in final.standings[:2])
    # The final's winner (most game points, or the better standing when shared) is first.
    assert finalists[final.standings[0].display_name] == 1
    records = await records_of(served.address, final)
    names_of = {p.player_id: p.display_name for p in final.players}
    assert [names_of[s.player] for s in recomputed(final, records)] == [
        line.display_name for line in final.standings]


def test_the_cli_shows_a_championship_s_game_and_a_hearts_one_as_before() -> None:
    def shown(settings: pb.ChampionshipSettings) -> str:
        out = io.StringIO()
        print_championship(Console(file=out, width=200), pb.Championship(
            championship_id="c_x", settings=settings,
            state=pb.CHAMPIONSHIP_STATE_REGISTERING, player_count=3))
        return out.getvalue()

    assert "Taça (c_x): registering, 2 rounds of bisca (bisca3), 3 players" in shown(
        pb.ChampionshipSettings(display_name="Taça", rounds=2, game=GAME, preset="bisca3"))
    assert "Cup (c_x): registering, 2 rounds, 3 players" in shown(
        pb.ChampionshipSettings(display_name="Cup", rounds=2, preset="online"))


async def test_a_bisca_championship_scored_by_matchpoints_on_duplicate_deals(
        served: Served) -> None:
    final, _ = await play(served, 4, duplicate_deals=True,
                          scoring=pb.CHAMPIONSHIP_SCORING_MATCHPOINTS)
    assert final.state == pb.CHAMPIONSHIP_STATE_FINISHED
    records = await records_of(served.address, final)
    for round_ in final.rounds:  # both tables of a round were dealt the same cards
        assert len({records[t.table_id]["seed"] for t in round_.tables}) == 1
        for seat in range(2):  # more game points beat fewer, at the same seat
            first, second = (t.seats[seat] for t in round_.tables)
            if first.total != second.total:
                better = first if first.total > second.total else second
                assert better.percentage == 100
    rules = ChampionshipRules(2, None, True, Scoring.MATCHPOINTS, game_name=GAME)
    names_of = {p.player_id: p.display_name for p in final.players}
    assert [(names_of[s.player], float(s.percentage)) for s in recomputed(final, records, rules)
            ] == [(line.display_name, line.percentage) for line in final.standings]


async def test_an_operator_s_correction_of_a_bisca_table_places_the_most_points_first(
        served: Served) -> None:
    final, _ = await play(served, 4, rounds=1)
    table = final.rounds[0].tables[0]
    corrected = (await served.admin.CorrectChampionshipResult(
        admin_pb2.CorrectChampionshipResultRequest(
            championship_id=final.championship_id, round_number=1, table_number=1,
            totals=[1, 3], reason="test"), metadata=ADMIN, timeout=30)).championship
    seats = corrected.rounds[0].tables[0].seats
    assert corrected.rounds[0].tables[0].is_corrected
    assert [(s.display_name, s.total, s.place, s.points) for s in seats] == [
        (table.seats[0].display_name, 1, 2, 0), (table.seats[1].display_name, 3, 1, 120)]
    # The same as the standings: the corrected table's winner has its 120.
    points = {line.display_name: line.points for line in corrected.standings}
    assert (points[seats[0].display_name], points[seats[1].display_name]) == (0, 120)

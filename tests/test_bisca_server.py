"""Bisca on the server (issue 41; docs/RULES.md, "Bisca"; docs/API.md): games of 2 and of 4 in
partnerships played whole over unary calls and over Play streams, against a replica engine
game of the same rules and seed; every message a seat or a spectator receives checked for
hidden cards; a reconnect by sequence; the bad inputs and that they change nothing; records
and ``copas replay``."""

from __future__ import annotations

import asyncio
import json
import random
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import pytest
import structlog
from copas.v1 import accounts_pb2, accounts_pb2_grpc, cards_pb2, copas_pb2
from google.protobuf import json_format
from structlog.testing import capture_logs

from engine.bisca import record as bisca_record
from tests.helpers.bisca_play import (
    Oracle,
    card_pb,
    new_bisca_table,
    play_streams,
    play_unary,
    replica_of,
)
from tests.helpers.calls import PlayStream, Watch, auth, is_over, join_all
from tests.helpers.readme import expand, find, grpcurl_call, walk_through
from tests.helpers.servers import serving

pytestmark = pytest.mark.asyncio
ROOT = Path(__file__).resolve().parent.parent


async def _seated(stub, table, count):  # type: ignore[no-untyped-def]
    joined = await join_all(stub, table.table_id, count)
    return {j.seat: j.player_token for j in joined}


async def test_a_game_of_two_played_whole_over_unary_calls() -> None:
    with capture_logs(processors=[structlog.contextvars.merge_contextvars]) as logs:
        tokens = await _two_over_unary()
    # No token, hand, drawn card or stock order reaches a log: the game's debug lines hold
    # its public events only (who drew, never what).
    assert logs and any(e.get("kind") == "CardsDrawn" for e in logs)
    for entry in logs:
        assert not any(token in repr(entry) for token in tokens.values()), "a token in a log"
        assert not {"hand", "hands", "stock", "drawn", "last_drawn", "legal"} & set(entry)
        if entry.get("kind") == "CardsDrawn":
            assert not any("card" in key and key != "trump_card_to" for key in entry)


async def _two_over_unary() -> dict[int, str]:
    async with serving(allow_seed=True) as (_, stub):
        table = await new_bisca_table(stub, preset="bisca3", seed="7")
        assert table.rules.game == "bisca" and table.rules.players == 2
        assert table.rules.bisca.hand_size == 3 and table.rules.bisca.target == 4
        assert not table.rules.point_limit, "a Hearts option shown at a Bisca table"
        oracle = Oracle(replica_of(table, "7"))
        spectator = Watch(stub, table.table_id, check=lambda m: oracle.check(None, m))
        tokens = await _seated(stub, table, 2)
        watches = {s: Watch(stub, table.table_id, t, check=lambda m, s=s: oracle.check(s, m))
                   for s, t in tokens.items()}
        calls = await play_unary(stub, table.table_id, tokens, watches, oracle,
                                 random.Random(7))
        for watch in (*watches.values(), spectator):
            over = await watch.wait_for(lambda m: m.view.phase == copas_pb2.PHASE_GAME_OVER,
                                        timeout=30)
            await watch.close()
        game = oracle.replica
        assert calls == len(game.actions) and game.is_over
        assert [r.total for r in over.view.standings] == [r.total for r in game.standings]
        assert [p.total for p in over.view.players] == game.returns()
        assert max(game.totals) >= 4 and over.view.bisca.side_totals == game.totals
        # Every kind of Bisca event reached the watchers (a spectator that falls behind may
        # be sent a snapshot for the moves of a moment instead: counted with the seats').
        messages = [m for w in (*watches.values(), spectator) for m in w.messages]
        kinds = {m.WhichOneof("kind") for m in messages} | {
            e.WhichOneof("kind") for m in messages for e in m.snapshot.missed_events}
        assert {"hand_started", "card_played", "trick_won", "cards_drawn", "hand_scored"} <= kinds
        assert oracle.checked > 4 * calls
        return tokens


async def test_a_game_of_four_in_partnerships_over_play_streams_a_spectator_and_a_reconnect(
        ) -> None:
    async with serving(allow_seed=True) as (_, stub):
        table = await new_bisca_table(stub, preset="pairs", seed="44", target=2)
        assert table.rules.players == 4 and table.rules.bisca.partnerships
        oracle = Oracle(replica_of(table, "44"))
        spectator = Watch(stub, table.table_id, check=lambda m: oracle.check(None, m))
        tokens = await _seated(stub, table, 4)
        streams = {s: PlayStream(stub, table.table_id, t) for s, t in tokens.items()}
        rng = random.Random(44)
        await play_streams(streams, oracle, rng, stop=lambda g: g.hand_number == 1)
        # Seat 2 goes away and comes back by sequence: the events it missed, checked too.
        seen = streams[2].events
        last = max(e.sequence for e in seen)
        await streams[2].close()
        for event in seen:
            oracle.check(2, event)
        streams[2] = PlayStream(stub, table.table_id, tokens[2], after_sequence=last)
        await play_streams(streams, oracle, rng)
        game = oracle.replica
        assert game.is_over and game.rules.partnerships
        for seat, stream in streams.items():
            over = await stream.wait_event(lambda e: e.view.phase == copas_pb2.PHASE_GAME_OVER,
                                           timeout=30)
            for event in stream.events:
                oracle.check(seat, event)
            assert over.view.bisca.teams == [0, 1, 0, 1]
            await stream.close()
        events = streams[2].events  # a snapshot first, with what it missed, then live events
        assert events[0].WhichOneof("kind") == "snapshot" and not events[0].snapshot.has_gap
        resumed = [e.sequence for e in events[0].snapshot.missed_events] + [
            e.sequence for e in events[1:]
            if e.WhichOneof("kind") not in ("player_connection", "reaction_shown")]
        assert resumed == list(range(last + 1, last + 1 + len(resumed)))  # each once, in order
        # Partners share their team's place and total (docs/RULES.md: team places).
        places = {r.seat: (r.place, r.total) for r in over.view.standings}
        assert places[0] == places[2] and places[1] == places[3] and places[0] != places[1]
        assert {p for p, _ in places.values()} == {1, 2}
        await spectator.wait_for(lambda m: m.view.phase == copas_pb2.PHASE_GAME_OVER, timeout=30)
        await spectator.close()
        assert oracle.checked > 100


async def _refused(call, code: grpc.StatusCode, *words: str):  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    assert caught.value.code() == code, caught.value.details()
    for word in words:
        assert word in caught.value.details(), caught.value.details()
    return caught.value


async def test_bad_inputs_are_refused_naming_the_rule_and_change_nothing() -> None:
    async with serving(allow_seed=True) as (_, stub):
        async def lobby() -> list[str]:
            listed = await stub.ListTables(copas_pb2.ListTablesRequest())
            return sorted(t.table_id for t in listed.tables)

        before = await lobby()
        bad_tables = [
            (copas_pb2.CreateTableRequest(game="poker"), ("hearts", "bisca")),
            (copas_pb2.CreateTableRequest(game="bisca", preset="online"), ("bisca3", "pairs")),
            (copas_pb2.CreateTableRequest(game="bisca", rules=copas_pb2.RulesOverrides(
                players=5)), ("2, 3, 4, 6",)),
            (copas_pb2.CreateTableRequest(game="bisca", rules=copas_pb2.RulesOverrides(
                bisca=copas_pb2.BiscaRulesOverrides(hand_size=5))), ("3, 7, 9",)),
            (copas_pb2.CreateTableRequest(game="bisca", rules=copas_pb2.RulesOverrides(
                point_limit=50)), ("point_limit", "Hearts option")),
            (copas_pb2.CreateTableRequest(game="bisca", rules=copas_pb2.RulesOverrides(
                moon=copas_pb2.MOON_RULE_DISABLED)), ("moon", "Hearts option")),
            (copas_pb2.CreateTableRequest(rules=copas_pb2.RulesOverrides(
                bisca=copas_pb2.BiscaRulesOverrides(target=2))), ("rules.bisca", "Hearts")),
            (copas_pb2.CreateTableRequest(game="bisca", rules=copas_pb2.RulesOverrides(
                bisca=copas_pb2.BiscaRulesOverrides(follow_suit=7))), ("follow_suit",)),
            (copas_pb2.CreateTableRequest(game="bisca", rules=copas_pb2.RulesOverrides(
                players=2, bisca=copas_pb2.BiscaRulesOverrides(partnerships=True))),
             ("partnerships",)),
        ]
        for request, words in bad_tables:
            await _refused(stub.CreateTable(request), grpc.StatusCode.INVALID_ARGUMENT, *words)
        assert await lobby() == before, "a refused CreateTable left a table"

        table = await new_bisca_table(stub, seed="3")
        tokens = await _seated(stub, table, 2)
        view = (await stub.GetView(copas_pb2.GetViewRequest(table_id=table.table_id),
                                   metadata=auth(tokens[0]))).view
        seat = view.to_act[0]
        other = 1 - seat
        meta = auth(tokens[seat])
        await _refused(stub.PassCards(copas_pb2.PassCardsRequest(
            table_id=table.table_id, cards=list(view.legal_cards[:3]) if seat == 0 else []),
            metadata=meta), grpc.StatusCode.INVALID_ARGUMENT, "Bisca has no passing")
        await _refused(stub.ChooseMoon(copas_pb2.ChooseMoonRequest(
            table_id=table.table_id, choice=copas_pb2.MOON_CHOICE_ADD_TO_OTHERS),
            metadata=meta), grpc.StatusCode.INVALID_ARGUMENT, "Bisca has no moon")
        await _refused(stub.PlayCard(copas_pb2.PlayCardRequest(
            table_id=table.table_id, card=card_pb("10H")), metadata=meta),
            grpc.StatusCode.INVALID_ARGUMENT)  # no 10 in Bisca's pack
        eight = cards_pb2.Card(suit=cards_pb2.SUIT_CLUBS, rank=cards_pb2.RANK_EIGHT)
        await _refused(stub.PlayCard(copas_pb2.PlayCardRequest(
            table_id=table.table_id, card=eight), metadata=meta),
            grpc.StatusCode.INVALID_ARGUMENT, "40-card")
        mine = (await stub.GetView(copas_pb2.GetViewRequest(table_id=table.table_id),
                                   metadata=auth(tokens[other]))).view
        await _refused(stub.PlayCard(copas_pb2.PlayCardRequest(
            table_id=table.table_id, card=mine.hand[0]), metadata=meta),
            grpc.StatusCode.FAILED_PRECONDITION, "not in your hand")
        await _refused(stub.PlayCard(copas_pb2.PlayCardRequest(
            table_id=table.table_id, card=mine.hand[0]), metadata=auth(tokens[other])),
            grpc.StatusCode.FAILED_PRECONDITION, "turn")
        after = (await stub.GetView(copas_pb2.GetViewRequest(table_id=table.table_id),
                                    metadata=auth(tokens[0]))).view
        assert after.trick_number == 0 and not after.trick.cards and after.to_act == [seat]
        assert [c.text for c in after.hand] == [c.text for c in view.hand]


async def test_a_record_says_bisca_replays_and_copas_replay_checks_it(tmp_path: Path) -> None:
    async with serving(allow_seed=True, data_dir=str(tmp_path)) as (running, stub):
        table = await new_bisca_table(stub, preset="quick", seed="5", bots=2)
        watch = Watch(stub, table.table_id)
        await watch.wait_for(is_over, timeout=30)
        await watch.close()
        answer = await stub.GetGameRecord(copas_pb2.GetGameRecordRequest(
            record_id=table.table_id))
        record = answer.record
        assert record.rules.game == "bisca" and record.rules.bisca.hand_size == 3
        data = json.loads(record.record_json)
        assert data["game"] == "bisca" and data["format"] == 1
        game = bisca_record.replay(data)  # raises when the result differs
        assert [(r.seat, r.place, r.total) for r in record.standings] == [
            (r.seat, r.place, r.total) for r in game.standings]
        assert [list(h.taken) for h in record.hands] == [list(h.points)
                                                         for h in game.hands_played]
        assert sum(record.hands[0].taken) == 120
        listed = await stub.ListGameRecords(copas_pb2.ListGameRecordsRequest())
        assert [r.rules.game for r in listed.records if r.record_id == table.table_id] == [
            "bisca"]
        cmd = [sys.executable, "-m", "tools.cli", "replay", table.table_id, "--server",
               f"127.0.0.1:{running.port}"]
        done = await asyncio.to_thread(subprocess.run, cmd, cwd=ROOT, capture_output=True,
                                       text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "(trumps " in done.stdout and "matches the record" in done.stdout
        data["result"]["totals"][0] += 1
        path = tmp_path / "tampered.json"
        path.write_text(json.dumps(data))
        bad = await asyncio.to_thread(subprocess.run, [*cmd[:4], str(path)], cwd=ROOT,
                                      capture_output=True, text=True, timeout=60)
        assert bad.returncode == 1 and "MISMATCH" in bad.stdout


@pytest.mark.parametrize("policy", ["greedy", "mc"])
async def test_bisca_bots_think_in_their_own_worker_pool(policy: str) -> None:
    with capture_logs() as logs:
        async with serving(allow_seed=True, bot_workers=1, bot_think_seconds=0.05) as (
                running, stub):
            table = await new_bisca_table(stub, preset="four", seed="9", bots=4,
                                          bot_policy=policy)
            watch = Watch(stub, table.table_id)
            over = await watch.wait_for(is_over, timeout=60)
            await watch.close()
            pooled = running.metrics.registry.get_sample_value(
                "copas_bot_decision_seconds_count", {"where": "pool"})
    assert over.view.end_reason == copas_pb2.GAME_END_REASON_POINT_LIMIT
    assert max(p.total for p in over.view.players) >= 4
    cards = sum(1 for m in watch.messages if m.WhichOneof("kind") == "card_played")
    assert pooled is not None and pooled >= cards > 0  # every card a worker's decision
    assert not [e for e in logs if e.get("event") == "bot_decision_failed"]


async def _accounts_play(stub, accounts, table, names, seed, rng):  # type: ignore[no-untyped-def]
    sessions = [(await accounts.SignInDevice(accounts_pb2.SignInDeviceRequest(
        device_secret=f"bisca-{name}-secret-0123456789", display_name=name))).session
        for name in names]
    tokens = {}
    for n, session in enumerate(sessions):
        joined = await stub.JoinTable(copas_pb2.JoinTableRequest(
            table_id=table.table_id, request_id=f"join-{n}-{seed}-0123456789abcdef"),
            metadata=auth(session.access_token))
        tokens[joined.seat] = joined.player_token
    oracle = Oracle(replica_of(table, seed))
    watches = {s: Watch(stub, table.table_id, t) for s, t in tokens.items()}
    await play_unary(stub, table.table_id, tokens, watches, oracle, rng)
    for watch in watches.values():
        await watch.close()
    return sessions


async def _profiles(accounts, sessions, games: int):  # type: ignore[no-untyped-def]
    """The profiles once the accounts took in ``games`` games each (within seconds)."""
    for _ in range(400):
        profiles = [await accounts.GetProfile(accounts_pb2.GetProfileRequest(),
                                              metadata=auth(s.access_token)) for s in sessions]
        if all(p.games == games for p in profiles):
            return profiles
        await asyncio.sleep(0.05)  # the intake has no event to await from outside
    raise AssertionError("the accounts did not take the games in")


async def test_rated_bisca_games_move_only_bisca_ratings_of_their_kind() -> None:
    async with serving(allow_seed=True) as (running, stub), \
            grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        if True:  # the body reads as the two contexts' block
            accounts = accounts_pb2_grpc.AccountServiceStub(channel)
            rng = random.Random(12)
            duel = await new_bisca_table(stub, preset="quick", seed="12")
            pair = await _accounts_play(stub, accounts, duel, ["Ana", "Bia"], "12", rng)
            profiles = await _profiles(accounts, pair, 1)
            for profile in profiles:  # one Bisca rating of 2, no Hearts one
                assert [(r.game, r.players, r.partnerships, r.games) for r in profile.ratings
                        ] == [("bisca", 2, False, 1)]
            teams = await new_bisca_table(stub, preset="pairs", seed="13", target=1)
            four = await _accounts_play(stub, accounts, teams, ["Ana", "Bia", "Cai", "Davi"],
                                        "13", rng)
            profiles = await _profiles(accounts, four[:2], 2)
            for profile in profiles:  # the game of teams is a kind of its own
                assert sorted((r.game, r.players, r.partnerships, r.games)
                              for r in profile.ratings) == [("bisca", 2, False, 1),
                                                            ("bisca", 4, True, 1)]
            mine = await accounts.ListMyGames(accounts_pb2.ListMyGamesRequest(),
                                              metadata=auth(four[0].access_token))
            assert sorted((g.game, g.players, g.partnerships) for g in mine.games) == [
                ("bisca", 2, False), ("bisca", 4, True)]
            # Each kind has its own board (established accounts only: none yet).
            board = await accounts.GetLeaderboard(accounts_pb2.GetLeaderboardRequest(
                game="bisca", players=4, partnerships=True))
            assert (board.game, board.players, board.partnerships) == ("bisca", 4, True)
            assert not board.entries
            hearts = await accounts.GetLeaderboard(accounts_pb2.GetLeaderboardRequest())
            assert (hearts.game, hearts.players) == ("hearts", 4) and not hearts.entries
            for bad in (accounts_pb2.GetLeaderboardRequest(game="bisca", players=5),
                        accounts_pb2.GetLeaderboardRequest(game="bisca", players=6),
                        accounts_pb2.GetLeaderboardRequest(players=4, partnerships=True),
                        accounts_pb2.GetLeaderboardRequest(game="chess")):
                await _refused(accounts.GetLeaderboard(bad), grpc.StatusCode.INVALID_ARGUMENT)


async def test_a_quick_match_of_bisca_seats_people_at_one_table_of_its_kind() -> None:
    async with serving() as (_, stub):
        async def quick(n: int, **kind: object) -> copas_pb2.JoinTableResponse:
            return await stub.JoinTable(copas_pb2.JoinTableRequest(
                preset="bisca3", display_name=f"Q{n}", request_id=f"quick-{n}-0123456789abcdef",
                **kind))  # type: ignore[arg-type]

        first = await quick(0, game="bisca")
        assert first.table.rules.game == "bisca" and first.table.rules.players == 2
        second = await quick(1, game="bisca")
        assert second.table.table_id == first.table.table_id and second.seat != first.seat
        teams = await quick(2, game="bisca", players=4, partnerships=True)
        assert teams.table.table_id != first.table.table_id
        assert teams.table.rules.bisca.partnerships and teams.table.rules.players == 4
        alone = await quick(3, game="bisca", players=4, partnerships=False)
        assert alone.table.table_id != teams.table.table_id
        await _refused(quick(4, game="bisca", players=2, partnerships=True),
                       grpc.StatusCode.INVALID_ARGUMENT, "partnerships")
        await _refused(quick(5), grpc.StatusCode.INVALID_ARGUMENT)  # bisca3 is no Hearts preset


async def test_the_lobby_shows_bisca_tables_and_a_timeout_plays_the_rules_card() -> None:
    async with serving(allow_seed=True) as (_, stub):
        lobby = stub.WatchLobby(copas_pb2.WatchLobbyRequest())
        opened = await lobby.read()
        assert opened.WhichOneof("event") == "snapshot"
        table = await new_bisca_table(stub, preset="bisca9", seed="15", timeout=0.2)
        added = await asyncio.wait_for(lobby.read(), 10)  # the new table, to a lobby watcher
        assert added.table_added.table_id == table.table_id
        assert added.table_added.rules.game == "bisca"
        lobby.cancel()
        listed = await stub.ListTables(copas_pb2.ListTablesRequest())
        mine = [t for t in listed.tables if t.table_id == table.table_id]
        assert len(mine) == 1 and mine[0].rules.game == "bisca" and mine[0].preset == "bisca9"
        assert mine[0].rules.bisca.follow_suit == copas_pb2.BISCA_FOLLOW_SUIT_STOCK_EMPTY
        got = await stub.GetTable(copas_pb2.GetTableRequest(table_id=table.table_id))
        assert got.table.rules.bisca.hand_size == 9
        replica = replica_of(table, "15")
        tokens = await _seated(stub, table, 2)
        watch = Watch(stub, table.table_id, tokens[0])
        seat = replica.to_act()[0]
        expected = replica.auto_action(seat).card  # the fewest points, no trump, lowest
        timed = await watch.wait_for(lambda m: m.WhichOneof("kind") == "turn_timed_out",
                                     timeout=30)
        assert timed.turn_timed_out.seat == seat
        played = await watch.wait_for(lambda m: m.WhichOneof("kind") == "card_played",
                                      timeout=30)
        assert played.card_played.is_automatic and played.card_played.seat == seat
        assert played.card_played.card.text == str(expected)
        await watch.close()


async def test_the_readme_bisca_walk_through_plays_a_game_to_the_end() -> None:
    """The README's Bisca grpcurl lines, replayed against a server started as it says."""
    lines = walk_through("<!-- bisca walk-through: tests/test_bisca_server.py replays these "
                         "lines -->")
    async with serving(allow_seed=True) as (_, stub):
        env: dict[str, str] = {}
        template = ""
        last: Any = None
        commands = []
        for line in lines:
            if line.startswith("play() {"):
                template = line.split("{", 1)[1].rsplit(";", 1)[0].strip()
                continue
            for part in line.split("; "):
                if part.startswith("play "):
                    _, token, card = part.split()
                    commands.append((None, template.replace("$1", token).replace("$2", card)))
                elif (assign := re.match(r"(\w+)=\$\((.*)\)$", part)) is not None:
                    commands.append((assign.group(1), assign.group(2)))
                else:
                    commands.append((None, part))
        for name, command in commands:
            words = shlex.split(expand(command.split(" | ", 1)[0], env))
            _, method, payload, metadata = grpcurl_call(words)
            request = getattr(copas_pb2, f"{method}Request")()
            json_format.ParseDict(payload, request)
            last = await getattr(stub, method)(request, metadata=metadata or None)
            if name is not None:
                sed = command.split(" | ", 1)[1]
                field = re.search(r'"(\w+)": ', sed).group(1)  # type: ignore[union-attr]
                env[name] = find(json_format.MessageToDict(last), field)
        assert isinstance(last, copas_pb2.GetViewResponse)
        view = last.view
        assert view.phase == copas_pb2.PHASE_GAME_OVER and view.rules.game == "bisca"
        assert [(r.seat, r.place, r.total) for r in view.standings] == [(0, 1, 1), (1, 2, 0)]
        assert list(view.bisca.side_points) == [61, 59] and view.bisca.trump_card.text == "3C"


@pytest.mark.parametrize(("preset", "transport"), [("bisca7", "play"), ("pairs", "unary"),
                                                   ("three", "play"), ("six", "unary")])
async def test_every_kind_of_table_plays_whole_over_either_transport(preset: str,
                                                                     transport: str) -> None:
    """Games of 2 (Bisca de 7: follow suit once the stock is empty), 3, 4 in partnerships and
    6 in partnerships, over the Play stream and over unary calls, every message checked."""
    async with serving(allow_seed=True) as (_, stub):
        table = await new_bisca_table(stub, preset=preset, seed=f"{preset}-1", target=1)
        oracle = Oracle(replica_of(table, f"{preset}-1"))
        tokens = await _seated(stub, table, table.rules.players)
        rng = random.Random(preset)
        if transport == "play":
            streams = {s: PlayStream(stub, table.table_id, t, is_batched=True)
                       for s, t in tokens.items()}
            calls = await play_streams(streams, oracle, rng)
            for seat, stream in streams.items():
                await stream.wait_event(lambda e: e.view.phase == copas_pb2.PHASE_GAME_OVER,
                                        timeout=30)
                for event in stream.events:
                    oracle.check(seat, event)
                await stream.close()
        else:
            watches = {s: Watch(stub, table.table_id, t, check=lambda m, s=s: oracle.check(s, m))
                       for s, t in tokens.items()}
            calls = await play_unary(stub, table.table_id, tokens, watches, oracle, rng)
            for watch in watches.values():
                await watch.wait_for(lambda m: m.view.phase == copas_pb2.PHASE_GAME_OVER,
                                     timeout=30)
                await watch.close()
        assert oracle.replica.is_over and calls == len(oracle.replica.actions)
        assert oracle.checked >= calls * len(tokens)


async def test_six_bots_in_partnerships_each_have_a_name_of_their_own() -> None:
    """Bisca seats six: a table of six bots (the most any game seats) starts, each bot under
    a name of its own, and plays to its end (a sixth name was missing: IndexError)."""
    async with serving(allow_seed=True, bot_workers=0) as (_, stub):
        table = await new_bisca_table(stub, preset="six", seed="6", bots=6, target=1)
        watch = Watch(stub, table.table_id)
        over = await watch.wait_for(is_over, timeout=60)
        await watch.close()
    names = [p.display_name for p in over.view.players]
    assert len(names) == 6 == len(set(names)) and all(p.is_bot for p in over.view.players)
    assert over.view.phase == copas_pb2.PHASE_GAME_OVER

"""Durable tables: kill -9 and restart, idempotency across restarts, a reconnect storm,
game records and their retention, and a corrupt log."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from copas.v1 import copas_pb2, copas_pb2_grpc

from engine import Game, Phase, PlayCard, action_to_json, replay, result_of
from server.main import shutdown, start
from tests.helpers.calls import (
    PlayStream,
    Watch,
    auth,
    card_pb,
    drive,
    finished_bot_table,
    join_all,
    new_table,
)
from tests.helpers.games import rules_of
from tests.helpers.servers import ServerProcess, config_for_tests, free_port

ROOT = Path(__file__).resolve().parent.parent


def durable_server(data_dir: Path, port: int, *flags: str) -> ServerProcess:
    """The server as a process on ``data_dir`` (its log in a file: a full pipe would stall
    it), tables at full speed, spectators sent every event as it comes (as in-process test
    servers do: these tests follow a table's events as a spectator; coalescing is
    tests/test_spectators.py's); ``flags`` after those."""
    return ServerProcess(
        "--spectator-tick", "0",
        "--allow-seed", "--data-dir", str(data_dir), "--trick-pause", "0", "--hand-pause", "0",
        "--play-timeout", "0", "--pass-timeout", "0", "--moon-timeout", "0", "--log-format",
        "json", "--unlimited-quotas", "--bot-table-pace", "0.001", "--bot-policy", "auto",
        "--bot-workers", "0", *store_options(data_dir), *flags, port=port, log_dir=data_dir)


def store_options(data_dir: Path) -> tuple[str, ...]:
    """The suite's PostgreSQL pass: the same database (and node) for the same directory."""
    options = config_for_tests(data_dir=str(data_dir))
    return ("--database", options.database, "--node-id", options.node_id) \
        if options.database else ()


def actions_json(game: Game) -> list[dict[str, Any]]:
    return [action_to_json(a) for a in game.actions]


async def test_kill_9_mid_trick_mid_pass_and_in_a_pause_loses_nothing(tmp_path: Path) -> None:
    port = free_port()
    server = durable_server(tmp_path, port)
    try:
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        stub = copas_pb2_grpc.CopasServiceStub(channel)
        # Table A: four people, stopped in the middle of a trick.
        a = await new_table(stub, preset="quick", seed="42")
        a_tokens = {j.seat: j.player_token for j in await join_all(stub, a.table_id, 4)}
        a_watch = {s: Watch(stub, a.table_id, t) for s, t in a_tokens.items()}
        a_game = Game(rules_of(a), "42")
        answers = await drive(stub, a.table_id, a_tokens, a_watch, a_game,
                              stop=lambda g: g.phase is Phase.PLAYING and g.trick_number == 1
                              and len(g.trick_cards) == 2,
                              request_ids={9: "retry-me"})
        assert a_game.phase is Phase.PLAYING and len(a_game.trick_cards) == 2
        assert len(a_game.actions) == 10  # the last one carried request_id "retry-me"
        acknowledged = answers[-1].sequence
        retried = a_game.actions[-1]
        # Table B: two people and two bots, stopped half-way through passing.
        b = await new_table(stub, preset="quick", seed="7", bots=2)
        b_tokens = {j.seat: j.player_token for j in await join_all(stub, b.table_id, 2)}
        b_watch = {s: Watch(stub, b.table_id, t) for s, t in b_tokens.items()}
        b_game = Game(rules_of(b), "7")
        await drive(stub, b.table_id, b_tokens, b_watch, b_game,
                    stop=lambda g: g.passes[0] is not None)
        assert b_game.phase is Phase.PASSING and b_game.to_act() == (1,)
        # Table C: one person and three bots, killed in the hand-summary pause.
        c = await new_table(stub, seed="3", bots=3, max_hands=2, hand_pause_seconds=3.0)
        c_tokens = {j.seat: j.player_token for j in await join_all(stub, c.table_id, 1)}
        c_watch = {s: Watch(stub, c.table_id, t) for s, t in c_tokens.items()}
        c_game = Game(rules_of(c), "3")
        await drive(stub, c.table_id, c_tokens, c_watch, c_game,
                    stop=lambda g: len(g.hands_played) == 1)
        paused = await c_watch[0].wait_for(lambda m: m.view.HasField("paused_until"))
        assert paused.view.phase == copas_pb2.PHASE_PASSING
        seen = {t: max(m.sequence for w in ws.values() for m in w.messages)
                for t, ws in ((a.table_id, a_watch), (b.table_id, b_watch),
                              (c.table_id, c_watch))}
        server.kill9()
        for ws in (a_watch, b_watch, c_watch):
            for w in ws.values():
                await w.close()
        await channel.close()

        server = durable_server(tmp_path, port)  # the same data directory
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        stub = copas_pb2_grpc.CopasServiceStub(channel)
        # The acknowledged request, retried after the crash, is not applied twice.
        again = await stub.PlayCard(copas_pb2.PlayCardRequest(
            table_id=a.table_id, card=card_pb(retried.card), request_id="retry-me"),  # type: ignore[union-attr]
            metadata=auth(a_tokens[retried.seat]), timeout=15)
        assert again.sequence <= acknowledged
        for table, tokens, game in ((a, a_tokens, a_game), (b, b_tokens, b_game),
                                    (c, c_tokens, c_game)):
            watches = {s: Watch(stub, table.table_id, t, after_sequence=seen[table.table_id])
                       for s, t in tokens.items()}
            head = await watches[min(tokens)].wait_for(lambda m: True)
            assert head.WhichOneof("kind") == "snapshot" and not head.snapshot.has_gap
            assert head.sequence >= seen[table.table_id]
            await drive(stub, table.table_id, tokens, watches, game)
            over = await watches[min(tokens)].wait_for(
                lambda m: m.WhichOneof("kind") == "game_over" or m.view.phase ==
                copas_pb2.PHASE_GAME_OVER)
            assert over.view.phase == copas_pb2.PHASE_GAME_OVER
            record = await stub.GetGameRecord(copas_pb2.GetGameRecordRequest(
                record_id=table.table_id), timeout=15)
            data = json.loads(record.record.record_json)
            # Identical to an uninterrupted run of the same actions: every acknowledged
            # action is there once, and hands, scores and standings match.
            assert data["actions"] == actions_json(game)
            assert data["result"] == result_of(game)
            assert result_of(replay(data)) == result_of(game)
            for w in watches.values():
                await w.close()
        await channel.close()
    finally:
        server.stop()


def numbered(messages: list[copas_pb2.TableEvent]) -> dict[int, copas_pb2.TableEvent]:
    """A live stream's numbered events by sequence: consecutive from its snapshot on (an
    event that repeats the latest number is not numbered: only presence may)."""
    out: dict[int, copas_pb2.TableEvent] = {}
    last = messages[0].sequence
    assert messages[0].WhichOneof("kind") == "snapshot"
    for m in messages[1:]:
        if m.sequence == last:
            assert m.WhichOneof("kind") == "player_connection", m
            continue
        assert m.sequence == last + 1, (m.sequence, last)
        out[last := m.sequence] = m
    return out


def public(event: copas_pb2.TableEvent) -> copas_pb2.TableEvent:
    """An event as a snapshot lists it: without its view (its time, number and kind as they
    were shown live)."""
    copy = copas_pb2.TableEvent()
    copy.CopyFrom(event)
    copy.ClearField("view")
    return copy


def check_history(head: copas_pb2.TableEvent, after: int,
                  live: dict[int, copas_pb2.TableEvent]) -> list[int]:
    """A snapshot asked for the events after ``after``: consecutive events ending at its own
    sequence, all of them (no gap) or a tail (has_gap), each the event a live watcher saw
    under that number. Returns the numbers listed."""
    assert head.WhichOneof("kind") == "snapshot"
    missed = list(head.snapshot.missed_events)
    numbers = [e.sequence for e in missed]
    first = after + 1 if not head.snapshot.has_gap else (numbers[0] if numbers else
                                                          head.sequence + 1)
    assert first > after
    assert numbers == list(range(first, head.sequence + 1)), (after, head.snapshot.has_gap,
                                                              numbers)
    for event in missed:
        if event.sequence in live:
            assert public(event) == public(live[event.sequence]), event.sequence
    return numbers


async def test_the_history_after_a_restart_has_no_holes(tmp_path: Path) -> None:
    """Presence is not numbered, so a restart rebuilds every numbered event as it was shown;
    a seat given up (whose join row goes) is a hole a snapshot reaching past says it has."""
    port = free_port()
    # Every presence change shown at once (not coalesced), so each one waited for below comes.
    server = durable_server(tmp_path, port, "--presence-interval", "0")
    try:
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        stub = copas_pb2_grpc.CopasServiceStub(channel)
        table = await new_table(stub, preset="quick", seed="42", bots=1)
        tid = table.table_id
        live = Watch(stub, tid)  # a spectator from the first event on
        await live.opened()
        tokens = {0: (await join_all(stub, tid, 1))[0].player_token}
        quitter = (await join_all(stub, tid, 1))[0].player_token
        given_up = (await stub.LeaveTable(copas_pb2.LeaveTableRequest(table_id=tid),
                                          metadata=auth(quitter))).sequence
        watches = {0: Watch(stub, tid, tokens[0])}
        await watches[0].opened()
        for seat in (1, 2):  # the table is full: the game starts
            tokens[seat] = (await join_all(stub, tid, 1))[0].player_token
            watches[seat] = Watch(stub, tid, tokens[seat])
        game = Game(rules_of(table), "42")
        await drive(stub, tid, tokens, watches, game, stop=lambda g: g.phase is Phase.PLAYING)
        await watches[0].close()  # seat 0 goes away and comes back
        await live.wait_for(lambda m: m.player_connection.seat == 0
                            and m.WhichOneof("kind") == "player_connection"
                            and not m.player_connection.is_connected)
        watches[0] = Watch(stub, tid, tokens[0])
        answers = await drive(stub, tid, tokens, watches, game,
                              stop=lambda g: g.trick_number == 3)
        for watch in watches.values():  # everyone goes before the kill
            await watch.close()
        for seat in tokens:
            await live.wait_for(lambda m, seat=seat: m.WhichOneof("kind") == "player_connection"
                                and m.player_connection.seat == seat
                                and not m.player_connection.is_connected
                                and m.sequence >= answers[-1].sequence)
        seen_live = numbered(live.messages)
        server.kill9()
        await live.close()
        await channel.close()

        server = durable_server(tmp_path, port)  # the same data directory
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        stub = copas_pb2_grpc.CopasServiceStub(channel)
        latest = max(seen_live)
        for after in sorted({1, given_up - 1, given_up, given_up + 1, latest // 2, latest - 1,
                             latest}):
            watch = Watch(stub, tid, after_sequence=after)
            head = await watch.opened()
            assert head.sequence == latest  # nothing shown was lost, no number taken twice
            listed = check_history(head, after, seen_live)
            # The only hole is the seat given up before the game (its join and its leave).
            assert head.snapshot.has_gap == (after < given_up), (after, given_up)
            assert listed[:1] == [max(after, given_up) + 1] if after < latest else not listed
            await watch.close()
        for after in (1, given_up):  # a player's Play stream opens on the same history
            play = PlayStream(stub, tid, tokens[0], after_sequence=after)
            head = await play.wait_event(lambda e: True)
            check_history(head, after, seen_live)
            assert head.snapshot.has_gap == (after < given_up)
            await play.close()
        await channel.close()
        # Presence was shown live (each person's first stream, seat 0's going and coming
        # back, everyone going), and never numbered: it is not history.
        presence = [m for m in live.messages if m.WhichOneof("kind") == "player_connection"]
        assert len(presence) >= 6
        assert all(e.WhichOneof("kind") != "player_connection" for e in seen_live.values())
    finally:
        server.stop()


async def test_a_finished_game_stays_its_ttl_after_a_restart(tmp_path: Path) -> None:
    """A game that ended before a kill -9 is there after the restart, for what is left of
    --finished-table-ttl counted from its end: its final view, its history and its players'
    tokens for reading; not playable, and counted in neither --max-tables nor --max-players.
    """
    ttl = 8.0
    port = free_port()
    server = durable_server(tmp_path, port, "--finished-table-ttl", str(ttl))
    try:
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        stub = copas_pb2_grpc.CopasServiceStub(channel)
        older = await finished_bot_table(stub, preset="quick", seed="6")
        table = await new_table(stub, preset="quick", seed="7", bots=2)
        tid = table.table_id
        live = Watch(stub, tid)
        await live.opened()
        tokens = {j.seat: j.player_token for j in await join_all(stub, tid, 2)}
        watches = {s: Watch(stub, tid, t) for s, t in tokens.items()}
        game = Game(rules_of(table), "7")
        await drive(stub, tid, tokens, watches, game)
        over = await live.wait_for(lambda m: m.WhichOneof("kind") == "game_over")
        for watch in watches.values():  # the players go after the game, before the kill
            await watch.close()
        for seat in tokens:
            await live.wait_for(lambda m, seat=seat: m.WhichOneof("kind") == "player_connection"
                                and m.player_connection.seat == seat
                                and not m.player_connection.is_connected
                                and m.sequence >= over.sequence)
        seen_live = numbered(live.messages)
        record = (await stub.GetGameRecord(copas_pb2.GetGameRecordRequest(record_id=tid))).record
        finished = record.finish_time.ToDatetime().timestamp()
        server.kill9()
        await live.close()
        await channel.close()
        # Down for a while: the table's time runs from its end, not from the restart.
        await asyncio.sleep(2.0)
        server = durable_server(tmp_path, port, "--finished-table-ttl", str(ttl),
                                "--max-tables", "1", "--max-players", "2")
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        stub = copas_pb2_grpc.CopasServiceStub(channel)
        summary = (await stub.GetTable(copas_pb2.GetTableRequest(table_id=tid))).table
        assert summary.phase == copas_pb2.PHASE_GAME_OVER
        mine = await stub.GetView(copas_pb2.GetViewRequest(table_id=tid), metadata=auth(tokens[0]))
        assert mine.view.phase == copas_pb2.PHASE_GAME_OVER and mine.view.seat == 0
        assert list(mine.view.standings) == list(over.game_over.standings)
        late = Watch(stub, tid, tokens[1], after_sequence=1)  # held until the table goes
        middle = Watch(stub, tid, tokens[1], after_sequence=over.sequence - 10)
        for after, watch in ((1, late), (over.sequence - 10, middle)):
            head = await watch.opened()
            assert head.view.phase == copas_pb2.PHASE_GAME_OVER and head.view.seat == 1
            check_history(head, after, seen_live)
            assert not head.snapshot.has_gap and head.sequence == over.sequence
        await middle.close()
        assert mine.sequence == over.sequence  # the game over is the last numbered event
        play = PlayStream(stub, tid, tokens[0], after_sequence=over.sequence - 3)
        head = await play.wait_event(lambda e: True)
        assert head.view.phase == copas_pb2.PHASE_GAME_OVER
        assert check_history(head, over.sequence - 3, seen_live)[-1] == over.sequence
        refused = await play.act(play_card=copas_pb2.PlayCardRequest(card=card_pb("2C")))
        assert refused.error.code == grpc.StatusCode.FAILED_PRECONDITION.value[0]
        await play.close()
        # It holds no table slot and no player's: a new table for two people fits. And at
        # most --max-tables finished tables wait, as before the restart: the older one went.
        fresh = await new_table(stub, preset="quick", seed="8", bots=2)
        await join_all(stub, fresh.table_id, 2)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.GetTable(copas_pb2.GetTableRequest(table_id=older.table_id))
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        # It goes at its end plus the ttl: its streams end (OK), then it is not found.
        await asyncio.wait_for(asyncio.shield(late.task), ttl + 10)
        gone = time.time()
        assert late.error is None
        # Not before its ttl (a late timer on a loaded machine is no failure: the wait above
        # bounds it); how late it went is a figure.
        assert finished + ttl - 0.5 < gone, gone - finished
        print(f"a finished table went {gone - finished - ttl:+.2f} s after its ttl")
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.GetTable(copas_pb2.GetTableRequest(table_id=tid))
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.GetView(copas_pb2.GetViewRequest(table_id=tid),
                               metadata=auth(tokens[0]))
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        await channel.close()
    finally:
        server.stop()


async def test_reconnect_storm_after_a_restart(tmp_path: Path) -> None:
    config = config_for_tests(data_dir=str(tmp_path))
    running = await start(config)
    tokens: list[tuple[str, str]] = []
    async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        stub = copas_pb2_grpc.CopasServiceStub(channel)

        async def one_table() -> None:
            # No pass deadline: a slow machine must not see timeouts play for the players.
            table = (await stub.CreateTable(copas_pb2.CreateTableRequest(
                rules=copas_pb2.RulesOverrides(pass_timeout_seconds=0)))).table
            for j in await join_all(stub, table.table_id, 4):
                tokens.append((table.table_id, j.player_token))

        await channel.channel_ready()  # its settings known: no stream sent past their limit
        for _ in range(20):  # (the setup, half of --max-concurrent-streams at a time)
            await asyncio.gather(*(one_table() for _ in range(50)))
    port = running.port
    await shutdown(running, 0)
    running = await start(config_for_tests(listen=f"127.0.0.1:{port}",
                                      data_dir=str(tmp_path)))
    try:
        assert len(list(running.registry.live())) == 1000
        channels = [grpc.aio.insecure_channel(f"127.0.0.1:{port}",  # a connection each
                                              options=[("grpc.use_local_subchannel_pool", 1)])
                    for _ in range(100)]
        stubs = [copas_pb2_grpc.CopasServiceStub(c) for c in channels]
        calls = [stubs[i % 100].WatchTable(copas_pb2.WatchTableRequest(table_id=table_id),
                                           metadata=auth(token))
                 for i, (table_id, token) in enumerate(tokens)]
        firsts = await asyncio.wait_for(asyncio.gather(*(c.read() for c in calls),
                                                       return_exceptions=True), 120)
        failures = [f for f in firsts if not isinstance(f, copas_pb2.WatchTableResponse)]
        assert not failures, f"{len(failures)} of 4000 refused: {failures[:3]}"
        assert all(f.event.WhichOneof("kind") == "snapshot" for f in firsts)  # type: ignore[union-attr]
        assert all(f.event.view.phase == copas_pb2.PHASE_PASSING for f in firsts)  # type: ignore[union-attr]
        for c in calls:
            c.cancel()
        for ch in channels:
            await ch.close()
    finally:
        await shutdown(running, 0)


@pytest.mark.parametrize("players", [3, 4, 5])
async def test_records_of_finished_games_replay(tmp_path: Path, players: int) -> None:
    running = await start(config_for_tests(allow_seed=True,
                                 data_dir=str(tmp_path)))
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = copas_pb2_grpc.CopasServiceStub(channel)
            table = await new_table(stub, preset="classic", seed="11", bots=players - 1,
                                    players=players, point_limit=40)
            token = (await join_all(stub, table.table_id, 1))[0].player_token
            game = Game(rules_of(table), "11")
            watches = {0: Watch(stub, table.table_id, token)}
            await drive(stub, table.table_id, {0: token}, watches, game)
            await stub.GetTable(copas_pb2.GetTableRequest(table_id=table.table_id))
            answer = await stub.GetGameRecord(copas_pb2.GetGameRecordRequest(
                record_id=table.table_id))
            record = answer.record
            assert [(r.seat, r.place, r.total) for r in record.standings] == [
                (r.seat, r.place, r.total) for r in game.standings]
            assert len(record.hands) == len(game.hands_played)
            assert [list(h.points) for h in record.hands] == [list(h.points)
                                                              for h in game.hands_played]
            assert record.seed == "11" and len(record.seats) == players
            data = json.loads(record.record_json)
            assert replay(data).standings == game.standings
            await watches[0].close()
    finally:
        await shutdown(running, 0)


async def test_copas_replay_checks_a_record(tmp_path: Path) -> None:
    running = await start(config_for_tests(data_dir=str(tmp_path)))
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = copas_pb2_grpc.CopasServiceStub(channel)
            table = await finished_bot_table(stub, seed=None)
            cmd = [sys.executable, "-m", "tools.cli", "replay", table.table_id, "--server",
                   f"127.0.0.1:{running.port}"]
            done = await asyncio.to_thread(subprocess.run, cmd, cwd=ROOT, capture_output=True,
                                           text=True, timeout=60)
            assert done.returncode == 0, done.stdout + done.stderr
            assert "hand 1 (pass left)" in done.stdout and "matches the record" in done.stdout
            record = await stub.GetGameRecord(copas_pb2.GetGameRecordRequest(
                record_id=table.table_id))
            data = json.loads(record.record.record_json)
            data["result"]["totals"][0] += 1
            path = tmp_path / "tampered.json"
            path.write_text(json.dumps(data))
            bad = await asyncio.to_thread(subprocess.run, [*cmd[:4], str(path)], cwd=ROOT,
                                          capture_output=True, text=True, timeout=60)
            assert bad.returncode == 1 and "MISMATCH" in bad.stdout
    finally:
        await shutdown(running, 0)


async def test_records_list_newest_first_and_retention_removes_only_old_ones(
        tmp_path: Path) -> None:
    config = config_for_tests(data_dir=str(tmp_path),
                    keep_records=2, retention_interval=3600)
    running = await start(config)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = copas_pb2_grpc.CopasServiceStub(channel)
            finished = [(await finished_bot_table(stub, seed=None)).table_id for _ in range(4)]
            waiting = (await new_table(stub, seed=None)).table_id
            page = await stub.ListGameRecords(copas_pb2.ListGameRecordsRequest(page_size=3))
            assert [r.record_id for r in page.records] == finished[::-1][:3]
            rest = await stub.ListGameRecords(copas_pb2.ListGameRecordsRequest(
                page_size=3, page_token=page.next_page_token))
            assert [r.record_id for r in rest.records] == finished[:1]
            assert not rest.next_page_token and not page.records[0].record_json
            removed = await asyncio.to_thread(running.records.prune)
            assert removed == 2
            kept = await stub.ListGameRecords(copas_pb2.ListGameRecordsRequest())
            assert [r.record_id for r in kept.records] == finished[::-1][:2]
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.GetGameRecord(copas_pb2.GetGameRecordRequest(record_id=finished[0]))
            assert err.value.code() == grpc.StatusCode.NOT_FOUND
            assert (await stub.GetTable(copas_pb2.GetTableRequest(table_id=waiting))).table
    finally:
        await shutdown(running, 0)


@pytest.mark.sqlite_only
async def test_a_log_that_does_not_replay_is_quarantined_and_retried(tmp_path: Path) -> None:
    running = await start(config_for_tests(data_dir=str(tmp_path)))
    async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        stub = copas_pb2_grpc.CopasServiceStub(channel)
        ids = []
        for _ in range(3):
            table = await new_table(stub, seed=None)
            await join_all(stub, table.table_id, 2)
            ids.append(table.table_id)
    await shutdown(running, 0)
    db = sqlite3.connect(tmp_path / "copas.db")
    good = db.execute("SELECT entry FROM log WHERE table_id=? AND n=2", (ids[1],)).fetchone()[0]
    db.execute("UPDATE log SET entry='{not json' WHERE table_id=? AND n=2", (ids[1],))
    db.commit()
    db.close()
    from structlog.testing import capture_logs

    with capture_logs() as logs:
        running = await start(config_for_tests(data_dir=str(tmp_path)))
    try:
        assert {t.id for t in running.registry.live()} == {ids[0], ids[2]}
        assert running.metrics.registry.get_sample_value("copas_tables_quarantined") == 1
        failure = next(e for e in logs if e["event"] == "table_quarantined")
        assert failure["table_id"] == ids[1] and failure["log_level"] == "error"
        assert not [e for e in logs if e["event"] in ("player_joined", "game_started")], \
            "replay must not log old events again"
        for table_id in (ids[0], ids[2]):
            seats = running.registry.get(table_id).seats
            assert [s.is_taken for s in seats] == [True, True, False, False]
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = copas_pb2_grpc.CopasServiceStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.GetTable(copas_pb2.GetTableRequest(table_id=ids[1]))
            assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        await shutdown(running, 0)
    # The log was kept as it was: once repaired, the next start serves the table again.
    db = sqlite3.connect(tmp_path / "copas.db")
    assert db.execute("SELECT count(*) FROM log WHERE table_id=?", (ids[1],)).fetchone() == (2,)
    db.execute("UPDATE log SET entry=? WHERE table_id=? AND n=2", (good, ids[1]))
    db.commit()
    db.close()
    running = await start(config_for_tests(data_dir=str(tmp_path)))
    try:
        assert {t.id for t in running.registry.live()} == set(ids)
        assert [s.is_taken for s in running.registry.get(ids[1]).seats] == [True, True,
                                                                              False, False]
    finally:
        await shutdown(running, 0)


async def test_an_away_seat_is_played_at_once_after_a_kill_9_and_a_restart(
        tmp_path: Path) -> None:
    """Issue 27, finding 3, across a restart: a seat whose person's stream ended is played at
    once at its turn and shown away; after kill -9 and a restart on the same data it is still
    away (nobody is connected after a restart: the log says so, not memory), and its next turn
    is played at once again, not after the turn's 5-minute clock."""
    port = free_port()
    server = durable_server(tmp_path, port)
    try:
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        stub = copas_pb2_grpc.CopasServiceStub(channel)
        table = await new_table(stub, seed="42", play_timeout_seconds=300.0,
                                pass_timeout_seconds=300.0, moon_timeout_seconds=300.0)
        tokens = {j.seat: j.player_token for j in await join_all(stub, table.table_id, 4)}
        game = Game(rules_of(table), "42")
        gone = Watch(stub, table.table_id, tokens[1])  # seat 1 streams, then goes
        await gone.wait_for(lambda m: True)
        await gone.close()
        others = {s: t for s, t in tokens.items() if s != 1}
        watches = {s: Watch(stub, table.table_id, t) for s, t in others.items()}
        await watches[0].wait_for(lambda m: not m.view.players[1].is_connected)
        def plays_of_seat_1() -> int:
            return sum(1 for a in game.actions if a.seat == 1 and isinstance(a, PlayCard))

        # The others play; seat 1's turns (its pass, its cards) are played by the server at
        # once (drive does not wait for them: the next seat waits for the view that shows
        # them, 20 s at most, where the turn's clock is 300 s).
        await drive(stub, table.table_id, others, watches, game,
                    stop=lambda g: plays_of_seat_1() == 1 and g.actions[-1].seat != 1)
        shown = await watches[0].wait_for(lambda m: m.view.players[1].is_away)
        assert not shown.view.players[1].is_connected
        server.kill9()
        for watch in watches.values():
            await watch.close()
        await channel.close()

        server = durable_server(tmp_path, port)  # the same data directory
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        stub = copas_pb2_grpc.CopasServiceStub(channel)
        watches = {s: Watch(stub, table.table_id, t) for s, t in others.items()}
        head = await watches[0].wait_for(lambda m: True, timeout=15)
        assert head.view.players[1].is_away  # away still, from the log
        before = plays_of_seat_1()
        await drive(stub, table.table_id, others, watches, game,
                    stop=lambda g: plays_of_seat_1() > before and g.actions[-1].seat != 1)
        last = await watches[0].wait_for(lambda m: m.sequence > head.sequence
                                         and m.WhichOneof("kind") == "turn_timed_out"
                                         and m.turn_timed_out.seat == 1)
        assert last.turn_timed_out.phase == copas_pb2.PHASE_PLAYING
        view = (await stub.GetView(copas_pb2.GetViewRequest(table_id=table.table_id),
                                   metadata=auth(tokens[0]), timeout=15)).view
        assert view.players[1].is_away and len(view.hand) == len(game.hand(0))
        for watch in watches.values():
            await watch.close()
        await channel.close()
    finally:
        server.stop()

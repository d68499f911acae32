"""Issue 19, "clients reach the owner" and "one relay per table": on a real PostgreSQL, every
node tells a client where a table's owner is (``x-copas-owner``, and TABLE_MOVED naming the
new owner after a takeover); the reference clients follow it, also after a kill -9 of the
owner; an old client through the wrong node still plays, by relay, and is told the owner;
spectators' streams relayed by one node share one upstream stream per table."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest
from copas.v1 import copas_pb2, copas_pb2_grpc

from clients.bots import POLICIES, take_turn
from clients.common import (
    OWNER_KEY,
    Player,
    error_reason,
    join,
    moved_to,
    must_act,
    seat_stream,
)
from clients.loadtest import server_pids
from engine import Game, Phase
from server.cluster.shared_watch import LocalWatcher, SharedWatch
from tests.helpers.calls import Watch, auth, drive, is_over, join_all, new_table
from tests.helpers.games import rules_of
from tests.helpers.servers import ServerProcess, free_port, fresh_database, metric

LEASE = 2.0  # seconds: short, so that takeovers happen within a test
TS_PLAY = Path(__file__).resolve().parent.parent / "clients" / "ts" / "dist" / "play.js"


class Node:
    """A node of the cluster on ``dsn`` as a process (metrics on a port of its own); its
    public address is its --listen port on loopback."""

    def __init__(self, directory: Path, dsn: str, node_id: str, *flags: str) -> None:
        metrics = free_port()
        self.server = ServerProcess(
            "--metrics-port", str(metrics), "--metrics-host", "127.0.0.1",
            "--database", dsn, "--node-id", node_id, "--lease", str(LEASE), "--allow-seed",
            "--trick-pause", "0", "--hand-pause", "0", "--play-timeout", "0",
            "--pass-timeout", "0", "--moon-timeout", "0", "--log-format", "json",
            "--unlimited-quotas", "--bot-table-pace", "0.001", "--bot-policy", "auto",
            "--bot-workers", "0", "--web-port", "0", "--spectator-tick", "0", *flags,
            log_dir=directory)  # (spectators get each event: these tests compare them)
        self.server.metrics_port = metrics
        self.address = self.server.address
        self.channel = grpc.aio.insecure_channel(self.address)
        self.stub = copas_pb2_grpc.CopasServiceStub(self.channel)

    def metric(self, name: str, **labels: str) -> float:
        return metric(self.server, name, **labels)

    async def stop(self) -> str:
        await self.channel.close()
        if self.server.proc.poll() is None:
            self.server.resume()
            await asyncio.to_thread(self.server.stop)
        return self.server.log()


def _owner(metadata: Any) -> str:
    return dict(metadata or ()).get(OWNER_KEY, "")


def _db_owner(dsn: str, table_id: str) -> str:
    """The public address of the table's owner, as the database has it."""
    with psycopg.connect(dsn) as db:
        row = db.execute("SELECT n.public_address FROM tables t JOIN nodes n "
                         "ON n.node_id = t.owner WHERE t.table_id = %s", (table_id,)).fetchone()
    return str(row[0]) if row else ""


async def _until(check: Callable[[], Awaitable[bool]], timeout: float, what: str) -> None:
    """Await ``check`` (an observation of a server, e.g. its metrics) becoming true."""
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


async def test_every_answer_naming_a_table_tells_its_owner_and_an_old_client_plays_by_relay(
        postgres: Any, tmp_path: Path) -> None:
    dsn = fresh_database(postgres.dsn)
    a, b = Node(tmp_path, dsn, "a"), Node(tmp_path, dsn, "b")
    try:
        create = a.stub.CreateTable(copas_pb2.CreateTableRequest(
            preset="quick", seed="5", display_name="t", rules=copas_pb2.RulesOverrides(
                trick_pause_seconds=0, hand_pause_seconds=0)))
        table = (await create).table
        assert _owner(await create.initial_metadata()) == a.address
        assert _db_owner(dsn, table.table_id) == a.address  # stored with the node
        got = b.stub.GetTable(copas_pb2.GetTableRequest(table_id=table.table_id))
        await got
        assert _owner(await got.initial_metadata()) == a.address  # b does not own it
        # An old client, all through b: it joins, watches and plays by relay, told the owner.
        tokens = {}
        for i in range(4):
            joined = b.stub.JoinTable(copas_pb2.JoinTableRequest(
                table_id=table.table_id, display_name=f"P{i}"))
            answer = await joined
            assert _owner(await joined.initial_metadata()) == a.address
            tokens[answer.seat] = answer.player_token
        watches = {s: Watch(b.stub, table.table_id, t) for s, t in tokens.items()}
        for w in watches.values():
            await w.wait_for(lambda m: m.WhichOneof("kind") == "snapshot")
            assert _owner(await w.call.initial_metadata()) == a.address
        play = b.stub.Play(metadata=auth(tokens[0]))
        await play.write(copas_pb2.PlayRequest(open=copas_pb2.WatchTableRequest(
            table_id=table.table_id)))
        assert _owner(await play.initial_metadata()) == a.address
        assert (await play.read()).event.WhichOneof("kind") == "snapshot"
        play.cancel()
        relayed = b.metric("copas_cluster_relayed_total")
        game = Game(rules_of(table), "5")
        await drive(b.stub, table.table_id, tokens, watches, game,
                    stop=lambda g: g.phase is Phase.PLAYING and g.trick_number == 2)
        assert b.metric("copas_cluster_relayed_total") > relayed  # every move relayed
        # The actions' answers name no table: nothing more is told on them.
        seat = game.to_act()[0]
        view = b.stub.GetView(copas_pb2.GetViewRequest(table_id=table.table_id),
                              metadata=auth(tokens[seat]))
        await view
        assert _owner(await view.initial_metadata()) == ""
        for w in watches.values():
            await w.close()
    finally:
        await a.stop()
        await b.stop()


async def _play_one_seat(player: Player, on_move: Callable[[int], Awaitable[None]]
                         ) -> copas_pb2.TableView:
    """The reference client's seat, played to the end by its greedy bot; ``on_move`` after
    each of its accepted moves (their count)."""
    bot = POLICIES["greedy"](1)
    moves = 0
    last = copas_pb2.TableView()
    acted: set[tuple[int, ...]] = set()
    try:
        async with seat_stream(player) as events:
            async for event in events:
                last = event.view if event.HasField("view") else last
                if is_over(event):
                    return last
                view = event.view
                key = (view.hand_number, view.phase, view.trick_number, len(view.trick.cards))
                if must_act(view) and key not in acted:
                    acted.add(key)
                    await take_turn(player, view, bot)
                    moves += 1
                    await on_move(moves)
    finally:
        bot.close()
    return last


async def test_the_reference_client_follows_the_owner_and_after_a_kill_9_the_new_one(
        postgres: Any, tmp_path: Path) -> None:
    dsn = fresh_database(postgres.dsn)
    a, b, c = (Node(tmp_path, dsn, name) for name in "abc")
    try:
        table = await new_table(a.stub, preset="quick", seed="8", bots=3)
        entry = grpc.aio.insecure_channel(c.address)  # the client knows only c
        player = await join(copas_pb2_grpc.CopasServiceStub(entry), table.table_id, "me",
                            c.address)
        assert player.route is not None and player.route.owner == a.address
        relayed_by_c = c.metric("copas_cluster_relayed_total")

        async def on_move(moves: int) -> None:
            if moves == 3:  # its calls went to a, not through c
                assert c.metric("copas_cluster_relayed_total") == relayed_by_c
                a.server.kill9()

        last = await asyncio.wait_for(_play_one_seat(player, on_move), LEASE * 10 + 60)
        assert last.phase == copas_pb2.PHASE_GAME_OVER
        owner = _db_owner(dsn, table.table_id)
        assert owner in (b.address, c.address)
        # It follows the new owner (straight to it; c, the entry, when c took it).
        assert player.route.owner == ("" if owner == c.address else owner)
        assert player.route.followed >= (2 if owner == b.address else 1)
        await player.route.close()
        await entry.close()
    finally:
        for node in (a, b, c):
            await node.stop()


async def test_after_a_sigstop_the_old_owner_answers_table_moved_naming_the_new_one(
        postgres: Any, tmp_path: Path) -> None:
    dsn = fresh_database(postgres.dsn)
    a, b = Node(tmp_path, dsn, "a"), Node(tmp_path, dsn, "b")
    try:
        table = await new_table(a.stub, preset="quick", seed="3", bots=2)  # a seat left
        [joined] = await join_all(a.stub, table.table_id, 1)
        on_a = Watch(a.stub, table.table_id, joined.player_token)
        await on_a.wait_for(lambda m: m.WhichOneof("kind") == "snapshot")
        a.server.pause()
        async def taken() -> bool:
            return _db_owner(dsn, table.table_id) == b.address
        await _until(taken, LEASE * 5 + 10, "b never took the table over")
        a.server.resume()
        await asyncio.wait_for(on_a.task, LEASE * 3 + 10)
        assert on_a.error is not None and on_a.error.code() == grpc.StatusCode.UNAVAILABLE
        assert moved_to(on_a.error) == b.address, on_a.error  # TABLE_MOVED names b
        # A client that follows it plays on at b.
        player = await join(a.stub, table.table_id, "late", a.address)  # a relays now
        assert player.route is not None and player.route.owner == b.address
        view = await player.current.GetView(copas_pb2.GetViewRequest(
            table_id=table.table_id), metadata=player.metadata)
        assert view.view.table_id == table.table_id
        await player.route.close()
    finally:
        await a.stop()
        await b.stop()


@pytest.mark.parametrize("batched", [False, True], ids=["per-event", "batched"])
async def test_relayed_spectator_streams_of_one_table_share_one_upstream(
        postgres: Any, tmp_path: Path, batched: bool) -> None:
    dsn = fresh_database(postgres.dsn)
    a, c = Node(tmp_path, dsn, "a"), Node(tmp_path, dsn, "c")
    try:
        table = await new_table(a.stub, preset="quick", seed="21")
        tokens = {j.seat: j.player_token for j in await join_all(a.stub, table.table_id, 4)}
        players = {s: Watch(a.stub, table.table_id, t) for s, t in tokens.items()}
        game = Game(rules_of(table), "21")
        await drive(a.stub, table.table_id, tokens, players, game,
                    stop=lambda g: g.phase is Phase.PLAYING and g.trick_number == 1)
        on_owner = a.metric("copas_watch_streams")  # the players' own streams
        spectators = [Watch(c.stub, table.table_id, is_batched=batched) for _ in range(5)]
        for w in spectators:
            await w.wait_for(lambda m: m.WhichOneof("kind") == "snapshot")
        # A late spectator that saw up to sequence 2: the events it missed, as a's own list.
        late = Watch(c.stub, table.table_id, after_sequence=2, is_batched=batched)
        direct = Watch(a.stub, table.table_id, after_sequence=2, is_batched=batched)
        head = await late.wait_for(lambda m: True)
        own = await direct.wait_for(lambda m: True)
        assert head.snapshot == own.snapshot and head.sequence == own.sequence
        assert head.view == own.view
        await direct.close()
        assert c.metric("copas_cluster_shared_watch_upstreams") == 1
        assert c.metric("copas_cluster_shared_watchers") == 6

        async def one_relay() -> bool:  # for six watchers (once a has seen `direct` go)
            return a.metric("copas_watch_streams") == on_owner + 1
        await _until(one_relay, 10, "the owner does not see one stream for c's spectators")
        # A player's stream through c is its own relay (its own view, its hand).
        seat = next(iter(tokens))
        mine = Watch(c.stub, table.table_id, tokens[seat])
        first = await mine.wait_for(lambda m: True)
        assert len(first.view.hand) > 0
        assert not any(len(m.view.hand) for w in spectators for m in w.messages)
        assert c.metric("copas_cluster_shared_watch_upstreams") == 1
        # Every spectator sees the same game as a spectator at a.
        reference = Watch(a.stub, table.table_id, is_batched=batched)
        answers = await drive(a.stub, table.table_id, tokens, players, game,
                              stop=lambda g: g.phase is Phase.PLAYING and g.trick_number == 3)
        final = answers[-1].sequence
        for w in (*spectators, late, reference):
            await w.wait_for(lambda m: m.sequence >= final and m.is_last_in_action)

        def history(w: Watch) -> list[copas_pb2.TableEvent]:
            return [m for m in w.messages if m.WhichOneof("kind") not in
                    ("snapshot", "player_connection") and m.sequence <= final]
        expected = history(reference)
        assert expected
        for w in (*spectators, late):
            assert history(w)[-len(expected):] == expected
            assert bool(w.batches) == batched  # batched through c too: the owner's batches
        # The upstream goes with the last local watcher.
        for w in (*spectators, late, mine, reference):
            await w.close()

        async def given_back() -> bool:
            return c.metric("copas_cluster_shared_watch_upstreams") == 0 \
                and c.metric("copas_cluster_relayed_calls") == 0
        await _until(given_back, 10, "the shared upstream was not given back")
        assert c.metric("copas_cluster_shared_watch_upstreams_opened_total") == 1
        for w in players.values():
            await w.close()
    finally:
        await a.stop()
        await c.stop()


async def test_a_shared_upstream_feeds_at_most_max_watchers_per_table_of_a_node(
        postgres: Any, tmp_path: Path) -> None:
    dsn = fresh_database(postgres.dsn)
    a = Node(tmp_path, dsn, "a")
    c = Node(tmp_path, dsn, "c", "--max-watchers-per-table", "2")
    try:
        table = await new_table(a.stub, preset="quick", seed="2")
        two = [Watch(c.stub, table.table_id) for _ in range(2)]
        for w in two:
            await w.wait_for(lambda m: m.WhichOneof("kind") == "snapshot")
        third = Watch(c.stub, table.table_id)
        await asyncio.wait_for(third.task, 10)
        assert third.error is not None
        assert third.error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert error_reason(third.error) == "TOO_MANY_WATCHERS"
        assert c.metric("copas_cluster_shared_watchers") == 2
        for w in two:
            await w.close()
    finally:
        await a.stop()
        await c.stop()


async def test_a_burst_of_relayed_calls_is_answered_by_the_owner_not_refused(
        postgres: Any, tmp_path: Path) -> None:
    """Issue 27, finding 8: 1,000 tables opening at once through a cluster's shared port
    relay thousands of joins in a burst to busy owners. A busy owner's grpc-core refuses
    streams (RST_STREAM REFUSED_STREAM) on a connection near its
    ``--max-concurrent-streams``, counting calls it answered but has not given back; the
    relay filled each connection to that count, so some of the burst came back UNAVAILABLE,
    which the relay turned into TABLE_MOVED "the table's node went away" with no node gone.
    Every call of the burst is answered by the owner."""
    dsn = fresh_database(postgres.dsn)
    # A lease of 20 s: the relay gives the owner half of it to answer (1,200 joins on a busy
    # machine take longer than the 1 s of the other tests' lease); the lookup budget is not
    # the point either.
    # Each node's limit is 20 streams a connection, so that the burst meets it often.
    small = ("--lease", "20", "--max-concurrent-streams", "20")
    a = Node(tmp_path, dsn, "a", *small)
    b = Node(tmp_path, dsn, "b", *small, "--cluster-lookups-per-second", "100000")
    try:
        tables = [await new_table(a.stub, preset="quick", seed=str(i)) for i in range(300)]
        for i in range(40):  # a is busy, as an owner of 500 tables is: bots play at once
            await new_table(a.stub, preset="quick", seed=str(1000 + i), bots=4,
                            max_hands=100)
        relayed = b.metric("copas_cluster_relayed_total")
        # The clients: 120 connections to b (10 calls on each, within b's limit).
        clients = [grpc.aio.insecure_channel(b.address, options=[
            ("grpc.use_local_subchannel_pool", 1)]) for _ in range(120)]
        stubs = [copas_pb2_grpc.CopasServiceStub(c) for c in clients]

        async def join(number: int) -> str:
            try:
                await stubs[number % len(stubs)].JoinTable(copas_pb2.JoinTableRequest(
                    table_id=tables[number % len(tables)].table_id,
                    display_name=f"P{number}"), timeout=30)
            except grpc.aio.AioRpcError as error:
                return f"{error.code().name} {error_reason(error)} {error.details()}"
            return "OK"

        try:  # 1,200 joins through b at once, each relayed to a: every seat of every table
            answers = await asyncio.gather(*(join(n) for n in range(1200)))
        finally:
            for channel in clients:
                await channel.close()
        refused = [a for a in answers if a != "OK"]
        assert not refused, (len(refused), refused[:3])
        assert b.metric("copas_cluster_relayed_total") >= relayed + 1200
    finally:
        await a.stop()
        await b.stop()


async def test_with_workers_each_worker_has_a_public_port_of_its_own(
        postgres: Any, tmp_path: Path) -> None:
    dsn = fresh_database(postgres.dsn)
    port = free_port()
    supervisor = ServerProcess("--database", dsn, "--workers", "2", "--unlimited-quotas",
                               "--web-port", "0", "--lease", str(LEASE), port=port,
                               log_dir=tmp_path)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as shared:
            stub = copas_pb2_grpc.CopasServiceStub(shared)
            owners = set()
            for _ in range(6):
                create = stub.CreateTable(copas_pb2.CreateTableRequest(preset="quick"))
                table = (await create).table
                owner = _owner(await create.initial_metadata())
                assert owner == _db_owner(dsn, table.table_id)
                host, _, own_port = owner.rpartition(":")
                assert host == "127.0.0.1" and int(own_port) != port
                owners.add(owner)
                async with grpc.aio.insecure_channel(owner) as direct:  # the worker itself
                    got = copas_pb2_grpc.CopasServiceStub(direct).GetTable(
                        copas_pb2.GetTableRequest(table_id=table.table_id))
                    await got
                    assert _owner(await got.initial_metadata()) == owner  # its own table
            with psycopg.connect(dsn) as db:
                publics = {r[0] for r in db.execute("SELECT public_address FROM nodes")}
            assert owners <= publics and len(publics) == 2
    finally:
        supervisor.proc.send_signal(signal.SIGTERM)
        supervisor.proc.wait(30)


async def test_the_typescript_client_follows_the_owner_and_after_a_kill_9_the_new_one(
        postgres: Any, tmp_path: Path) -> None:
    """`--workers 2` on one port: the TypeScript client starts at the shared port, plays at
    its table's worker's own port, and when that worker is killed (the supervisor starts it
    again, on a new port, or the other takes the table over) it finds the table's new
    address through the shared port and plays the game to its end."""
    node = shutil.which("node")
    assert node is not None, "Node.js is needed (see docs/CLIENTS.md: Other languages)"
    assert TS_PLAY.is_file(), f"{TS_PLAY} is missing: run `make ts`"
    dsn = fresh_database(postgres.dsn)
    port = free_port()
    supervisor = ServerProcess("--database", dsn, "--workers", "2", "--unlimited-quotas",
                               "--web-port", "0", "--lease", str(LEASE), "--allow-seed",
                               port=port, log_dir=tmp_path)
    try:
        client = await asyncio.create_subprocess_exec(
            node, str(TS_PLAY), "--server", f"127.0.0.1:{port}", "--seed", "4", "--json",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)

        async def seated() -> bool:  # the client's seat is taken: its game begins
            with psycopg.connect(dsn) as db:
                return db.execute("SELECT count(*) FROM tokens").fetchone()[0] > 0
        await _until(seated, 60, "the TypeScript client never took its seat")
        with psycopg.connect(dsn) as db:
            table_id = str(db.execute("SELECT table_id FROM tokens").fetchone()[0])
        first = _db_owner(dsn, table_id)
        [pid] = server_pids(first)  # the worker behind that public port
        os.kill(pid, signal.SIGKILL)
        out, err = await asyncio.wait_for(client.communicate(), LEASE * 10 + 90)
        assert client.returncode == 0, err.decode()
        summary = json.loads(out.decode().strip().splitlines()[-1])
        assert summary["table_id"] == table_id and summary["end_reason"]
        followed = summary["followed"]
        assert followed[0] == first != f"127.0.0.1:{port}"
        assert len(followed) >= 2 and followed[-1] != first  # the table's next address
        assert summary["owner"] == followed[-1] == _db_owner(dsn, table_id)
    finally:
        supervisor.proc.send_signal(signal.SIGTERM)
        supervisor.proc.wait(30)


# ------------------------------------------------- a shared upstream's bookkeeping, in-process

def _event(sequence: int, kind: str, trick: int = 0) -> bytes:
    event = copas_pb2.TableEvent(sequence=sequence, view=copas_pb2.TableView(
        table_id="t", trick_number=trick), is_last_in_action=True)
    if kind == "snapshot":
        event.snapshot.SetInParent()
        event.ClearField("is_last_in_action")
    elif kind == "card_played":
        event.card_played.seat = sequence % 4
    else:
        event.player_connection.seat = 1
    return copas_pb2.WatchTableResponse(event=event).SerializeToString()


def _snapshot_of(shared: SharedWatch, after_sequence: int) -> copas_pb2.TableEvent | None:
    made = shared.snapshot(after_sequence)
    return None if made is None else copas_pb2.WatchTableResponse.FromString(made).event


def test_a_shared_upstreams_snapshots_list_what_a_watcher_missed_as_the_owner_would() -> None:
    shared = SharedWatch(history=3, queue=8)
    shared.take(_event(4, "snapshot", trick=1))
    for sequence in (5, 6, 7, 8):
        shared.take(_event(sequence, "card_played", trick=sequence))
    shared.take(_event(8, "player_connection", trick=8))  # presence: not history
    fresh = _snapshot_of(shared, 0)
    assert fresh is not None and fresh.sequence == 8 and fresh.view.trick_number == 8
    assert not fresh.snapshot.missed_events and not fresh.snapshot.has_gap
    resumed = _snapshot_of(shared, 6)
    assert resumed is not None
    assert [e.sequence for e in resumed.snapshot.missed_events] == [7, 8]
    assert not any(e.HasField("view") for e in resumed.snapshot.missed_events)
    assert _snapshot_of(shared, 5) is not None  # 6, 7, 8 are kept (history 3)
    assert _snapshot_of(shared, 4) is None  # 5 is gone here: the owner answers that one
    up_to_date = _snapshot_of(shared, 8)
    assert up_to_date is not None and not up_to_date.snapshot.missed_events


def test_a_watcher_that_falls_behind_a_shared_upstream_gets_a_fresh_snapshot() -> None:
    shared = SharedWatch(history=16, queue=2)
    shared.take(_event(1, "snapshot"))
    slow = LocalWatcher()
    shared.watchers.add(slow)
    for sequence in (2, 3):
        shared.take(_event(sequence, "card_played"))
    assert len(slow.queue) == 2 and not slow.needs_snapshot
    shared.take(_event(4, "card_played"))  # one more than it may hold
    assert slow.needs_snapshot and not slow.queue
    shared.take(_event(5, "card_played"))  # its fresh snapshot, made when sent, shows it
    assert not slow.queue

"""Issue 38's acceptance test: a 23-player championship with duplicate deals scored by
matchpoints on a two-node cluster (PostgreSQL), the node that drives it drained in round 2 (and
taken back into service), the node that drives it then killed -9 in round 3 (and started
again), four rounds of tables 4, 4, 4, 4, 4, 3. The players are reference bots, half of them
connected to each node, each following WatchChampionship on its own node and playing the table
it is told of; one of them is slower (0.25 s a move), so every round has tables still playing
after others finished.

- The final standings equal those recomputed from the game records alone (the engine's
  functions, matchpoints scoring), on both nodes; every game was played by its people: no
  no-show, no leaver, nobody dropped.
- Nothing of a running table is readable by anyone else, asked of both nodes all along: a
  finished table's record is withheld (RECORD_WITHHELD) from an anonymous caller and from
  another player until its round is over (a record shown is checked against the round's end);
  a running table's record does not exist; a spectator's WatchTable is refused; another
  table's player token and a player's account token are refused at WatchTable and GetView;
  ListGameRecords lists no record of a round in play.
- "Every connected player told each table within a second": not a wall-clock assertion (the
  suite runs beside busy processes), the causal property instead: every player learned each
  round's table from its own node's stream before its seat's first timeout, i.e. its first
  move at every table was its own (not the clock's) and nobody was counted absent. The
  delays (a round's seat time to the message's arrival) are printed per node.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

import grpc
import pytest
from copas.admin.v1 import admin_pb2, admin_pb2_grpc
from copas.v1 import championships_pb2 as pb
from copas.v1 import championships_pb2_grpc, copas_pb2, copas_pb2_grpc

from clients.common import error_reason
from engine.rules import Rules
from server.championships.format import ChampionshipRules, Scoring, table_sizes
from tests.helpers.calls import auth
from tests.helpers.championships import (
    FAST_RULES,
    OPERATOR,
    OPERATOR_CALL,
    BotPlayer,
    championship_of,
    cluster_node,
    lease_holder,
    recomputed,
    records_of,
    sign_in,
    table_owners,
)
from tests.helpers.servers import TEST_DATABASE, ServerProcess, fresh_database

PLAYERS, ROUNDS = 23, 4
PACE = 0.25  # seconds before each move of the slower player
FIRST_TIMEOUT = min(FAST_RULES.pass_timeout_seconds, FAST_RULES.play_timeout_seconds)
RULES = ChampionshipRules(ROUNDS, Rules(), True, Scoring.MATCHPOINTS)


@pytest.fixture
def server_dsn(request: pytest.FixtureRequest) -> str:
    """The PostgreSQL server of the suite's PostgreSQL pass (tools.pgrun), else a throw-away
    one of this session."""
    return os.environ.get(TEST_DATABASE) or request.getfixturevalue("postgres").dsn


def seconds(stamp: Any) -> float:
    return float(stamp.ToNanoseconds()) / 1e9


class Probes:
    """Tries to read what nobody may read while the rounds are played, through both nodes,
    until stopped: ``leaks`` is what was shown that should not have been (empty when all is
    well), ``seen`` counts the outcomes (so a test knows the probes did run)."""

    def __init__(self, nodes: dict[str, ServerProcess], cid: str, bots: list[BotPlayer]
                 ) -> None:
        self.nodes = nodes
        self.cid = cid
        self.bots = bots
        self.leaks: list[str] = []
        self.seen: Counter[str] = Counter()
        self.stopped = asyncio.Event()
        self._turn = 0

    async def run(self) -> None:
        channels = {name: grpc.aio.insecure_channel(n.address) for name, n in self.nodes.items()}
        try:
            while not self.stopped.is_set():
                self._turn += 1
                for name, channel in channels.items():
                    try:
                        await self._probe(name, channel)
                    except grpc.aio.AioRpcError as error:  # a node down (killed): try later
                        self.seen[f"{name} down: {error.code().name}"] += 1
                await asyncio.sleep(0.05)
        finally:
            for channel in channels.values():
                await channel.close()

    async def _round_over(self, round_no: int) -> bool:
        """Whether round ``round_no`` is over, as the store says now (from either node)."""
        for node in self.nodes.values():
            try:
                c = await championship_of(node.address, self.cid)
            except grpc.aio.AioRpcError:
                continue
            return c.state == pb.CHAMPIONSHIP_STATE_FINISHED or (
                len(c.rounds) >= round_no and c.rounds[round_no - 1].is_finished)
        raise AssertionError("no node answers")

    def _outsider(self, round_no: int, table_id: str) -> BotPlayer | None:
        """A player seated at another table of the round (its tokens are at hand)."""
        return next((b for b in self.bots if round_no in b.seats
                     and b.seats[round_no].table_id != table_id), None)

    async def _outcome(self, call: Any) -> str:
        try:
            await call
        except grpc.aio.AioRpcError as error:
            return error_reason(error) or error.code().name
        return "OK"

    async def _stream(self, where: str, call: Any) -> str:
        """The first message of a table's stream: a refusal is expected; a message is a leak
        (any card of a duplicate table tells the tables playing its deal)."""
        try:
            message = await asyncio.wait_for(call.read(), 5)
        except grpc.aio.AioRpcError as error:
            return error_reason(error) or error.code().name
        except TimeoutError:
            return "NO ANSWER"
        finally:
            call.cancel()
        if message is grpc.aio.EOF:
            return "EOF"
        view = message.event.view
        hidden = [c.text for c in (*view.hand, *view.pass_choice, *view.received)]
        self.leaks.append(f"{where}: a message ({message.event.WhichOneof('kind')}, the seat's"
                          f" cards {hidden}, {len(view.trick.cards)} on the table)")
        return "OK"

    async def _probe(self, name: str, channel: grpc.aio.Channel) -> None:
        champs = championships_pb2_grpc.ChampionshipServiceStub(channel)
        game = copas_pb2_grpc.CopasServiceStub(channel)
        c = (await champs.GetChampionship(pb.GetChampionshipRequest(championship_id=self.cid),
                                          timeout=5)).championship
        if not c.rounds or c.rounds[-1].is_finished or c.state != pb.CHAMPIONSHIP_STATE_RUNNING:
            return
        round_ = c.rounds[-1]
        r = round_.round_number
        for table in round_.tables:
            outsider = self._outsider(r, table.table_id)
            callers: list[tuple[str, Any]] = [("anonymous", None)]
            if outsider is not None:
                callers.append(("another player", auth(outsider.session.access_token)))
            # A finished table's record while the round plays on: withheld from everyone. A
            # running table's: none yet.
            if table.is_finished or self._turn % 4 == 0:
                for who, metadata in callers:
                    outcome = await self._outcome(game.GetGameRecord(
                        copas_pb2.GetGameRecordRequest(record_id=table.table_id),
                        metadata=metadata, timeout=5))
                    if outcome == "OK" and not await self._round_over(r):
                        self.leaks.append(f"{name}: round {r} table {table.table_number}'s "
                                          f"record shown to {who} while the round plays")
                    self.seen[f"record of a {'finished' if table.is_finished else 'running'}"
                              f" table: {outcome}"] += 1
            if table.is_finished or (self._turn + table.table_number) % 3:
                continue  # the streams: each running table every third pass
            where = f"{name}: round {r} table {table.table_number}"
            watch = copas_pb2.WatchTableRequest(table_id=table.table_id)
            self.seen["spectator's WatchTable: " + await self._stream(
                f"{where}, a spectator", game.WatchTable(watch, timeout=5))] += 1
            if outsider is None:
                continue
            theirs = outsider.seats[r].player_token
            self.seen["another table's token at WatchTable: " + await self._stream(
                f"{where}, another table's player token",
                game.WatchTable(watch, metadata=auth(theirs), timeout=5))] += 1
            self.seen["an account's token at WatchTable: " + await self._stream(
                f"{where}, a player's account token",
                game.WatchTable(watch, metadata=auth(outsider.session.access_token),
                                timeout=5))] += 1
            for who, token in (("another table's token", theirs),
                               ("an account's token", outsider.session.access_token)):
                outcome = await self._outcome(game.GetView(
                    copas_pb2.GetViewRequest(table_id=table.table_id), metadata=auth(token),
                    timeout=5))
                if outcome == "OK":
                    self.leaks.append(f"{where}: GetView answered {who}")
                self.seen[f"{who} at GetView: {outcome}"] += 1
        playing = {t.table_id for t in round_.tables}
        listed = await game.ListGameRecords(copas_pb2.ListGameRecordsRequest(page_size=100),
                                            timeout=5)
        shown = [record.record_id for record in listed.records if record.record_id in playing]
        if shown and not await self._round_over(r):
            self.leaks.append(f"{name}: ListGameRecords lists round {r}'s {shown}")
        self.seen["ListGameRecords"] += 1
        # A player whose game is over lists its own games: not this one before the round ends.
        done = {t.table_id for t in round_.tables if t.is_finished}
        player = next((b for b in self.bots if r in b.seats and b.seats[r].table_id in done),
                      None)
        if player is not None:
            account = player.session.account.account_id
            mine = await game.ListGameRecords(copas_pb2.ListGameRecordsRequest(
                page_size=20, account_id=account), metadata=auth(player.session.access_token),
                timeout=5)
            shown = [record.record_id for record in mine.records if record.record_id in done]
            if shown and not await self._round_over(r):
                self.leaks.append(f"{name}: a player's own list shows round {r}'s {shown}")
            self.seen["a player's own ListGameRecords"] += 1


async def until_everyone_plays(nodes: dict[str, ServerProcess], cid: str,
                               bots: list[BotPlayer], round_no: int) -> pb.Championship:
    """Waits until round ``round_no`` is seated, every player was told its table there and
    has made its first move; the round must still be playing then."""
    deadline = time.monotonic() + 90
    while True:
        assert time.monotonic() < deadline, f"round {round_no} never got going"
        ready = [b for b in bots if round_no in b.told
                 and b.first_move_was_automatic(b.told[round_no][1]) is not None]
        if len(ready) == len(bots):
            break
        await asyncio.sleep(0.02)
    c = await championship_of(nodes["a"].address, cid)
    assert c.current_round == round_no and not c.rounds[round_no - 1].is_finished, \
        f"round {round_no} ended before the test could act in it"
    return c


def spread(delays: list[float]) -> str:
    ordered = sorted(delays)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return (f"p50 {statistics.median(ordered) * 1e3:.0f} ms, p99 {p99 * 1e3:.0f} ms, "
            f"max {ordered[-1] * 1e3:.0f} ms ({len(ordered)} tellings)")


async def test_twenty_three_players_a_drained_driver_and_a_killed_one(
        server_dsn: str, tmp_path: Path) -> None:
    dsn = fresh_database(server_dsn)
    (tmp_path / "operator").write_text(OPERATOR + "\n")
    nodes = {"a": cluster_node(dsn, "a", tmp_path), "b": cluster_node(dsn, "b", tmp_path)}
    tasks: list[asyncio.Task[None]] = []
    probes: Probes | None = None
    probing: asyncio.Task[None] | None = None
    began = time.monotonic()
    try:
        home = ["ab"[n % 2] for n in range(PLAYERS)]  # 12 players on a, 11 on b
        sessions = []
        for n in range(PLAYERS):
            (session,) = await sign_in(nodes[home[n]].address, [f"Acc{n:02}"])
            sessions.append(session)
        async with grpc.aio.insecure_channel(nodes["a"].address) as on_a:
            admin = admin_pb2_grpc.AdminServiceStub(on_a)
            cid = (await admin.CreateChampionship(admin_pb2.CreateChampionshipRequest(
                settings=pb.ChampionshipSettings(
                    display_name="Acceptance cup", rounds=ROUNDS, rules=FAST_RULES,
                    duplicate_deals=True, scoring=pb.CHAMPIONSHIP_SCORING_MATCHPOINTS,
                    max_players=PLAYERS), reason="test"),
                metadata=OPERATOR_CALL, timeout=10)).championship.championship_id
        for n, session in enumerate(sessions):
            async with grpc.aio.insecure_channel(nodes[home[n]].address) as channel:
                await championships_pb2_grpc.ChampionshipServiceStub(channel).Register(
                    pb.RegisterRequest(championship_id=cid),
                    metadata=auth(session.access_token), timeout=10)
        bots = [BotPlayer(nodes[home[n]].address, s, cid, pace=PACE if n == 0 else 0.0)
                for n, s in enumerate(sessions)]
        tasks = [asyncio.ensure_future(bot.run()) for bot in bots]
        deadline = time.monotonic() + 30
        while not all(bot.last is not None for bot in bots):  # every player is watching
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        async with grpc.aio.insecure_channel(nodes["a"].address) as on_a:
            await admin_pb2_grpc.AdminServiceStub(on_a).StartChampionship(
                admin_pb2.StartChampionshipRequest(championship_id=cid, reason="test"),
                metadata=OPERATOR_CALL, timeout=10)
        probes = Probes(nodes, cid, bots)
        probing = asyncio.ensure_future(probes.run())

        # Round 2: the node that drives the championship (its tables' owner) is drained: it
        # hands its tables and the championship over; once the other node holds the
        # championship's lease, it takes tables again.
        c = await until_everyone_plays(nodes, cid, bots, 2)
        (drained,) = await table_owners(nodes["a"].address,
                                        [t.table_id for t in c.rounds[1].tables])
        other = "b" if drained == "a" else "a"
        async with grpc.aio.insecure_channel(nodes[drained].address) as channel:
            admin = admin_pb2_grpc.AdminServiceStub(channel)
            answer = await admin.Drain(admin_pb2.DrainRequest(), metadata=OPERATOR_CALL,
                                       timeout=10)
            assert answer.is_draining and answer.tables_handed_over > 0
            deadline = time.monotonic() + 30
            while await asyncio.to_thread(lease_holder, dsn, cid) != other:
                assert time.monotonic() < deadline, "the drained node kept the championship"
                await asyncio.sleep(0.05)
            assert not (await admin.Undrain(admin_pb2.UndrainRequest(),
                                            metadata=OPERATOR_CALL, timeout=10)).is_draining

        # Round 3: the node that drives it now is killed -9 mid-round, and started again.
        c = await until_everyone_plays(nodes, cid, bots, 3)
        (killed,) = await table_owners(nodes[drained].address,
                                       [t.table_id for t in c.rounds[2].tables])
        port = nodes[killed].port
        nodes[killed].kill9()
        nodes[killed] = cluster_node(dsn, killed, tmp_path, port=port)  # (the probes' too)

        await asyncio.wait_for(asyncio.gather(*tasks), 150)
        probes.stopped.set()
        await probing
        took = time.monotonic() - began

        finals = [await championship_of(node.address, cid) for node in nodes.values()]
        final = finals[0]
        assert final.state == pb.CHAMPIONSHIP_STATE_FINISHED
        assert finals[1].standings == final.standings and finals[1].rounds == final.rounds
        assert [sorted(len(t.seats) for t in r.tables) for r in final.rounds] == \
            [sorted(table_sizes(PLAYERS))] * ROUNDS

        # The standings from the records alone (the same records through either node).
        records = await records_of(nodes["a"].address, final)
        assert records == await records_of(nodes["b"].address, final)
        expected = recomputed(final, records, RULES)
        assert [(s.player, s.place, int(s.decided_by) + 1) for s in expected] == [
            (line.player_id, line.place, line.decided_by) for line in final.standings]
        assert [(float(s.percentage), float(s.matchpoints)) for s in expected] == [
            (line.percentage, line.matchpoints) for line in final.standings]
        # Every game was its people's: nobody absent, nobody left, nobody dropped.
        assert all(s.get("acted") is not False for r in records.values() for s in r["seats"])
        assert not any(r["result"]["leavers"] for r in records.values())
        assert all(line.games == ROUNDS and not line.is_dropped for line in final.standings)
        assert not any(s.is_no_show or s.has_left
                       for r in final.rounds for t in r.tables for s in t.seats)
        async with grpc.aio.insecure_channel(nodes["a"].address) as on_a:
            tables = (await admin_pb2_grpc.AdminServiceStub(on_a).ListTables(
                admin_pb2.ListTablesRequest(page_size=1000), metadata=OPERATOR_CALL,
                timeout=10)).tables
        assert sorted(t.table_id for t in tables) == sorted(  # none made twice
            t.table_id for r in final.rounds for t in r.tables)

        # Nothing of a running table was shown to anyone else, and the probes did run.
        assert probes.leaks == []
        seen = probes.seen
        assert sum(n for k, n in seen.items() if k.endswith("RECORD_WITHHELD")) > 0, seen
        assert sum(n for k, n in seen.items()
                   if k.startswith("spectator's WatchTable: SPECTATING_CLOSED")) > 0, seen
        assert sum(n for k, n in seen.items() if k.startswith("another table's token")) > 0

        # Each player learned each round's table from its own node's stream, before its
        # seat's first timeout: its first move at every table was its own.
        delays: dict[str, list[float]] = {"a": [], "b": []}
        seat_times = {r.round_number: seconds(r.seat_time) for r in final.rounds}
        names = {p.player_id: p.display_name for p in final.players}
        seated = {(r.round_number, names[s.player_id]): t.table_id
                  for r in final.rounds for t in r.tables for s in t.seats}
        for bot in bots:  # each seat's moves, from its table's events
            for round_no in range(1, ROUNDS + 1):
                await bot.history(round_no)
        away = []  # (player, round) whose node was down when the round was seated
        for n, bot in enumerate(bots):
            name = bot.session.account.display_name
            for round_no in range(1, ROUNDS + 1):
                arrived, table_id = bot.told[round_no]
                assert table_id == seated[round_no, name]
                if not bot.was_watching(seat_times[round_no]):
                    away.append((name, round_no))  # not connected then: told on its return
                    continue
                assert bot.first_move_was_automatic(table_id) is False, (name, round_no)
                delays[home[n]].append(arrived - seat_times[round_no])
        # Nobody's seat was played by the clock but around the kill (its players away from
        # their node, their tables moving): not in round 2's drain, nor in rounds 1 and 4.
        automatic = {(bot.session.account.display_name, r): bot.automatic_moves(t)
                     for bot in bots for r, (_, t) in bot.told.items()}
        assert {k: n for k, n in automatic.items() if n and k[1] != 3} == {}
        # Only a restart of the killed node can keep its players away when a round is seated.
        assert all(bots[int(name[3:])].address == nodes[killed].address and round_no > 3
                   for name, round_no in away), away
        print(f"\n{PLAYERS} players, {ROUNDS} rounds, {drained} drained in round 2, {killed} "
              f"killed -9 in round 3: {took:.1f} s; first timeout {FIRST_TIMEOUT:g} s; "
              f"{len(away)} tellings to players whose node was down at the seating; "
              f"{sum(automatic.values())} moves played by the clock in round 3")
        for name, measured in delays.items():
            print(f"told its table (seat time -> the message at the player), node {name}: "
                  f"{spread(measured)}")
        print(f"probes: {dict(sorted(seen.items()))}")
    finally:
        if probes is not None:
            probes.stopped.set()
        for task in [*tasks, *([probing] if probing is not None else [])]:
            task.cancel()
        await asyncio.gather(*tasks, *([probing] if probing is not None else []),
                             return_exceptions=True)
        for process in nodes.values():
            process.proc.kill()

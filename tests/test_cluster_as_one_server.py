"""A cluster is one server to a client (issue 19): quick match seats players who reached
different nodes at one table, a request id retried on another node gets the first answer,
what only nodes may say (the cluster key, the hop mark, whom a call is forwarded for) counts
only on the internal port, and a PostgreSQL restart under load loses nothing acknowledged
while every node serves again within seconds. On a real PostgreSQL (the ``postgres``
fixture, or one of the test's own where it restarts it)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest
from copas.v1 import copas_pb2, copas_pb2_grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from tests.helpers.calls import auth, join_all, new_table
from tests.helpers.servers import ServerProcess, free_port, fresh_database, serving
from tools.pglocal import LocalPostgres

ROOT = Path(__file__).resolve().parent.parent


def _quick(name: str, request_id: str = "", preset: str = "quick",
           players: int | None = None) -> copas_pb2.JoinTableRequest:
    request = copas_pb2.JoinTableRequest(preset=preset, display_name=name,
                                         request_id=request_id)
    if players is not None:
        request.players = players
    return request


def _owner_of(dsn: str, table_id: str) -> str:
    with psycopg.connect(dsn) as db:
        row = db.execute("SELECT owner FROM tables WHERE table_id = %s", (table_id,)).fetchone()
    return str(row[0]) if row else ""


# ------------------------------------------------------------------ quick match

async def test_quick_match_seats_players_who_reached_two_nodes_at_one_table(
        postgres: Any) -> None:
    dsn = fresh_database(postgres.dsn)
    async with serving(database=dsn, node_id="a") as (_, on_a), \
            serving(database=dsn, node_id="b") as (node_b, on_b):
        first = await on_a.JoinTable(_quick("Ann"), timeout=10)
        second = await on_b.JoinTable(_quick("Bob"), timeout=10)  # relayed to a
        assert second.table.table_id == first.table.table_id
        assert {first.seat, second.seat} == {0, 1}
        assert _owner_of(dsn, first.table.table_id) == "a"
        # Both tokens work through either node; the rest of the table fills the same way.
        for stub, join in ((on_b, first), (on_a, second)):
            view = await stub.GetView(copas_pb2.GetViewRequest(),
                                      metadata=auth(join.player_token), timeout=10)
            assert view.view.table_id == first.table.table_id
        third = await on_b.JoinTable(_quick("Cy"), timeout=10)
        fourth = await on_a.JoinTable(_quick("Di"), timeout=10)
        assert {third.table.table_id, fourth.table.table_id} == {first.table.table_id}
        assert sorted(j.seat for j in (first, second, third, fourth)) == [0, 1, 2, 3]
        # The table is full: the next asker, on b, gets a new table, on b.
        fifth = await on_b.JoinTable(_quick("Ed"), timeout=10)
        assert fifth.table.table_id != first.table.table_id
        assert _owner_of(dsn, fifth.table.table_id) == "b"
        # Other kinds are other tables; a kind's table is matched by its player count too.
        three = await on_a.JoinTable(_quick("Fay", players=3), timeout=10)
        other = await on_a.JoinTable(_quick("Gus", preset="online"), timeout=10)
        assert len({fifth.table.table_id, three.table.table_id, other.table.table_id}) == 3
        again = await on_a.JoinTable(_quick("Hal", players=3), timeout=10)  # b's? no: a's
        assert again.table.table_id == three.table.table_id
        on_b_three = await on_b.JoinTable(_quick("Ivy", players=3), timeout=10)
        assert on_b_three.table.table_id == three.table.table_id
        held = node_b.metrics.registry.get_sample_value
        assert held("copas_cluster_relayed_calls") == 0  # every relay given back


async def test_quick_match_races_converge_on_the_older_table(postgres: Any) -> None:
    """Two players asking on two nodes at the same moment may get one table each (neither
    node sees the other's before it commits); whoever asks next joins the older."""
    dsn = fresh_database(postgres.dsn)
    async with serving(database=dsn, node_id="a") as (_, on_a), \
            serving(database=dsn, node_id="b") as (_, on_b):
        for round_ in range(3):
            preset = ("quick", "online", "classic")[round_]
            racing = await asyncio.gather(on_a.JoinTable(_quick("A", preset=preset), timeout=10),
                                          on_b.JoinTable(_quick("B", preset=preset), timeout=10))
            opened = {j.table.table_id: j.table.create_time.ToNanoseconds() for j in racing}
            later = [await stub.JoinTable(_quick(f"L{i}", preset=preset), timeout=10)
                     for i, stub in enumerate((on_b, on_a))]
            oldest = min(opened, key=lambda t: (opened[t], t))
            assert later[0].table.table_id == oldest, (opened, later[0].table.table_id)
            seated = [j.table.table_id for j in (*racing, *later)]
            assert seated.count(oldest) >= 3  # at most one player waits at another table


# ------------------------------------------------------------------ request ids

async def test_a_request_id_retried_on_another_node_gets_the_same_answer(
        postgres: Any) -> None:
    dsn = fresh_database(postgres.dsn)
    async with serving(database=dsn, node_id="a", allow_seed=True) as (_, on_a), \
            serving(database=dsn, node_id="b", allow_seed=True) as (_, on_b):
        # CreateTable: the retry through b answers a's table (no second table anywhere).
        create = copas_pb2.CreateTableRequest(preset="quick", display_name="mine",
                                              request_id="create-1")
        made = (await on_a.CreateTable(create, timeout=10)).table
        again = (await on_b.CreateTable(create, timeout=10)).table
        assert again.table_id == made.table_id and again.display_name == "mine"
        with psycopg.connect(dsn) as db:
            assert db.execute("SELECT count(*) FROM tables").fetchone()[0] == 1
        changed = copas_pb2.CreateTableRequest(preset="classic", request_id="create-1")
        with pytest.raises(grpc.aio.AioRpcError) as reused:
            await on_b.CreateTable(changed, timeout=10)
        assert reused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "already used" in (reused.value.details() or "")
        # A quick match's request id: the same seat and the same token through the other
        # node, also after other players took the seats around it.
        request_id = str(uuid.uuid4())
        first = await on_a.JoinTable(_quick("Ann", request_id), timeout=10)
        await on_a.JoinTable(_quick("Bob"), timeout=10)
        retried = await on_b.JoinTable(_quick("Ann", request_id), timeout=10)
        assert (retried.seat, retried.player_token, retried.table.table_id) == \
            (first.seat, first.player_token, first.table.table_id)
        # b's own quick match, retried through a (b owns that table: a relays it there).
        own = str(uuid.uuid4())
        on_b_first = await on_b.JoinTable(_quick("Cy", own, preset="online"), timeout=10)
        assert _owner_of(dsn, on_b_first.table.table_id) == "b"
        back = await on_a.JoinTable(_quick("Cy", own, preset="online"), timeout=10)
        assert (back.seat, back.player_token) == (on_b_first.seat, on_b_first.player_token)
        with pytest.raises(grpc.aio.AioRpcError) as other:  # the same id, another request
            await on_a.JoinTable(_quick("Someone else", own, preset="online"), timeout=10)
        assert other.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        # A join at a named table, retried through the other node.
        table = await new_table(on_b, preset="quick", seed="3")
        named = copas_pb2.JoinTableRequest(table_id=table.table_id, display_name="Di",
                                           request_id=str(uuid.uuid4()))
        a_join = await on_b.JoinTable(named, timeout=10)
        b_join = await on_a.JoinTable(named, timeout=10)
        assert (a_join.seat, a_join.player_token) == (b_join.seat, b_join.player_token)


# ------------------------------------------------------------------ the internal port

def _cluster_key(dsn: str) -> str:
    with psycopg.connect(dsn) as db:
        return str(db.execute("SELECT value FROM copas WHERE key = 'cluster_key'").fetchone()[0])


async def _get_table(address: str, table_id: str, metadata: tuple[tuple[str, str], ...]
                     ) -> str:
    """GetTable through ``address`` with ``metadata``: OK, or the refusal's code and reason."""
    from tests.helpers.calls import quota_details

    async with grpc.aio.insecure_channel(address) as channel:
        try:
            await copas_pb2_grpc.CopasServiceStub(channel).GetTable(
                copas_pb2.GetTableRequest(table_id=table_id), metadata=metadata, timeout=10)
            return "OK"
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                return f"RESOURCE_EXHAUSTED {quota_details(error)[0]}"
            return f"{error.code().name} {error.details()}"


async def test_the_cluster_key_and_hop_mark_from_a_client_on_the_public_port_change_nothing(
        postgres: Any) -> None:
    """A client that knows the cluster key (the worst case) sends it with ``x-copas-hops``
    and made-up ``x-forwarded-for`` addresses to b's public port: the quota of its own
    address still applies, the call is relayed to the owner as any call is, and what b knows
    of the owner stays as it was (no database read). On b's internal port the same metadata
    is a relay's: not relayed again (TABLE_MOVED), counted for the address it names."""
    dsn = fresh_database(postgres.dsn)
    async with serving(database=dsn, node_id="a", allow_seed=True) as (_, on_a), \
            serving(database=dsn, node_id="b", peer_calls_per_second=0.5,
                    peer_calls_burst=10) as (node_b, _):
        table = await new_table(on_a, preset="quick", seed="5")
        key = _cluster_key(dsn)
        public = f"127.0.0.1:{node_b.port}"
        internal = f"127.0.0.1:{node_b.internal_port}"
        assert node_b.internal_port and node_b.internal_port != node_b.port
        assert node_b.store.node.address == internal  # where the others relay to
        assert await _get_table(public, table.table_id, ()) == "OK"  # b reads a's address
        sample = node_b.metrics.registry.get_sample_value
        assert sample("copas_cluster_owners_cached") == 1
        reads = sample("copas_cluster_lookups_total", {"outcome": "read"})
        answers = [await _get_table(public, table.table_id, (
            ("x-copas-cluster-key", key), ("x-copas-hops", "1"),
            ("x-forwarded-for", f"198.51.100.{i}"))) for i in range(30)]
        assert answers.count("OK") <= 10, answers  # the burst of 127.0.0.1's own quota
        assert set(answers) == {"OK", "RESOURCE_EXHAUSTED RATE_LIMITED"}, set(answers)
        assert sample("copas_cluster_owners_cached") == 1  # nothing forgotten, nothing read
        assert sample("copas_cluster_lookups_total", {"outcome": "read"}) == reads
        # The internal port takes the same metadata as a relay's: the hop mark holds (b does
        # not own the table: TABLE_MOVED, never relayed again), and each call counts for the
        # address it names, so none is refused by 127.0.0.1's spent quota.
        relayed = [await _get_table(internal, table.table_id, (
            ("x-copas-cluster-key", key), ("x-copas-hops", "1"),
            ("x-forwarded-for", f"198.51.100.{i}"))) for i in range(5)]
        assert all(r.startswith("UNAVAILABLE") and "moving" in r for r in relayed), relayed
        # A wrong key on the internal port is nobody's: the caller's own (spent) quota.
        wrong = await _get_table(internal, table.table_id, (
            ("x-copas-cluster-key", "a guess"), ("x-copas-hops", "1"),
            ("x-forwarded-for", "198.51.100.99")))
        assert wrong == "RESOURCE_EXHAUSTED RATE_LIMITED"


async def test_a_rotated_cluster_key_is_taken_up_and_the_previous_one_kept_for_a_grace(
        postgres: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import server.cluster.keys

    monkeypatch.setattr(server.cluster.keys, "REFRESH_SECONDS", 0.1)
    dsn = fresh_database(postgres.dsn)
    async with serving(database=dsn, node_id="a", allow_seed=True) as (node_a, on_a), \
            serving(database=dsn, node_id="b") as (node_b, on_b):
        table = await new_table(on_a, preset="quick", seed="5")
        old = _cluster_key(dsn)
        internal = f"127.0.0.1:{node_b.internal_port}"
        as_relay = (("x-copas-hops", "1"), ("x-copas-cluster-key", old))
        assert (await _get_table(internal, table.table_id, as_relay)).startswith("UNAVAILABLE")
        done = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "server.cluster.keys", "rotate", "--database", dsn,
            stderr=asyncio.subprocess.PIPE)
        _, said = await asyncio.wait_for(done.communicate(), 60)
        assert done.returncode == 0 and b"rotated" in said
        new = _cluster_key(dsn)
        assert new != old
        for node in (node_a, node_b):  # both present the new key within a refresh or two
            await _until(lambda node=node: node.cluster.keys.current == new)
        # Relays work throughout (b presents the new key to a), and the old key is still a
        # relay's within the grace.
        assert (await on_b.GetTable(copas_pb2.GetTableRequest(table_id=table.table_id),
                                    timeout=10)).table.table_id == table.table_id
        assert (await _get_table(internal, table.table_id, as_relay)).startswith("UNAVAILABLE")
        # After the grace the old key is nobody's: the call is relayed like a client's.
        with psycopg.connect(dsn, autocommit=True) as db:
            db.execute("UPDATE copas SET value = '0' WHERE key = 'cluster_key_rotated'")
        await _until(lambda: not node_b.cluster.keys.accepts(old))
        assert await _get_table(internal, table.table_id, as_relay) == "OK"
        renewed = (("x-copas-hops", "1"), ("x-copas-cluster-key", new))
        assert (await _get_table(internal, table.table_id, renewed)).startswith("UNAVAILABLE")


async def _until(condition: Any, timeout: float = 10.0) -> None:
    """Wait for ``condition()`` (polled; it changes on another task's timer)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, "the condition never held"
        await asyncio.sleep(0.02)


# ------------------------------------------------------------------ a PostgreSQL restart

UNIT = ROOT / "ops" / "systemd" / "copas.service"
NODE_FLAGS = ("--lease", "2", "--trick-pause", "0", "--hand-pause", "0", "--play-timeout",
              "0", "--pass-timeout", "0", "--moon-timeout", "0", "--unlimited-quotas",
              "--bot-table-pace", "0.002", "--bot-policy", "auto", "--bot-workers", "0",
              "--log-format", "json", "--allow-seed")


def _reason(error: grpc.aio.AioRpcError) -> str:
    """The ErrorInfo reason of a server's refusal ("" for none: a bare status)."""
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    for detail in status.details if status is not None else ():
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            return info.reason
    return ""


def _is_unreachable(error: grpc.aio.AioRpcError) -> bool:
    """The client's own channel found no server there (no process listening: a node between
    its exit and its restart), or lost it (the node's transport closing under a call as its
    process stops: gRPC's own "Cancelling all calls", no answer of the server's), as opposed
    to a server's answer."""
    details = error.details() or ""
    if error.code() == grpc.StatusCode.CANCELLED and "Cancelling all calls" in details:
        return True
    return error.code() == grpc.StatusCode.UNAVAILABLE and (
        "failed to connect" in details or "Connection refused" in details
        or "connections to all backends failing" in details)


@dataclass
class _Acked:
    table_id: str
    seat: int
    sequence: int
    card: str  # a played card's text ("" for a pass)


class _Players:
    """Four people at each table, playing through ``stub`` with unary calls: each seat
    reads its view and plays its first legal card (or passes its first three). Every
    answer is kept: the acknowledged actions, and each refusal as (code, reason)."""

    def __init__(self, stub: Any, table_id: str, tokens: dict[int, str]) -> None:
        self.stub, self.table_id, self.tokens = stub, table_id, tokens
        self.acked: list[_Acked] = []
        self.refusals: collections.Counter[tuple[str, str]] = collections.Counter()
        self.unreachable = 0
        self.examples: dict[tuple[str, str], str] = {}  # a refusal's message, by kind
        self.progress = asyncio.Event()

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            for seat, token in self.tokens.items():
                try:
                    await self._act(seat, token)
                except grpc.aio.AioRpcError as error:
                    if _is_unreachable(error):
                        self.unreachable += 1
                    else:
                        kind = (error.code().name, _reason(error))
                        self.refusals[kind] += 1
                        self.examples.setdefault(kind, error.details() or "")
                    await asyncio.sleep(0.05)  # a client's pause before its retry

    async def _act(self, seat: int, token: str) -> None:
        view = (await self.stub.GetView(copas_pb2.GetViewRequest(table_id=self.table_id),
                                        metadata=auth(token), timeout=5)).view
        if seat not in view.to_act or not view.legal_cards:
            await asyncio.sleep(0.01)
            return
        if view.phase == copas_pb2.PHASE_PASSING:
            answer = await self.stub.PassCards(copas_pb2.PassCardsRequest(
                table_id=self.table_id, cards=list(view.legal_cards)[:3]),
                metadata=auth(token), timeout=5)
            card = ""
        else:
            first = view.legal_cards[0]
            answer = await self.stub.PlayCard(copas_pb2.PlayCardRequest(
                table_id=self.table_id, card=first), metadata=auth(token), timeout=5)
            card = first.text
        self.acked.append(_Acked(self.table_id, seat, answer.sequence, card))
        self.progress.set()


async def _events(stub: Any, table_id: str, token: str, after: int) -> dict[int, Any]:
    """The table's numbered events after sequence ``after``, as a node tells them now (the
    snapshot's missed events)."""
    call = stub.WatchTable(copas_pb2.WatchTableRequest(table_id=table_id,
                                                       after_sequence=max(1, after)),
                           metadata=auth(token), timeout=30)
    try:
        first = (await call.read()).event
    finally:
        call.cancel()
    assert not first.snapshot.has_gap, "the table no longer keeps those events"
    return {e.sequence: e for e in first.snapshot.missed_events}


async def _serving(stub: Any, table_ids: list[str], tokens: dict[str, str], since: float
                   ) -> float:
    """Until every table answers through ``stub`` (a GetView with one of its tokens); the
    seconds from ``since``."""
    while True:
        try:
            for table_id in table_ids:
                await stub.GetView(copas_pb2.GetViewRequest(table_id=table_id),
                                   metadata=auth(tokens[table_id]), timeout=3)
            return time.monotonic() - since
        except grpc.aio.AioRpcError:
            await asyncio.sleep(0.1)


def test_the_systemd_unit_restarts_a_node_that_fail_stops() -> None:
    """The unit starts a node again after any exit but a clean one (exit 3 included), and
    never gives up: while PostgreSQL is down each start fails fast (exit 2)."""
    text = UNIT.read_text().replace("\\\n", " ")  # continued lines as one
    unit = dict(line.split("=", 1) for line in text.splitlines()
                if "=" in line and not line.startswith("#"))
    assert unit["Restart"] in ("on-failure", "always")
    assert float(unit["RestartSec"]) <= 2 and unit["StartLimitIntervalSec"] == "0"
    assert "RestartPreventExitStatus" not in unit and "SuccessExitStatus" not in unit
    assert "--internal-listen" in unit["ExecStart"]


@pytest.mark.timeout(300)
async def test_a_5_s_postgresql_restart_under_load(tmp_path: Path) -> None:
    """Two layouts on one PostgreSQL of the test's own: ``--workers 2`` (its supervisor
    restarts them) and one node as the systemd unit runs it (the test restarts it when it
    exits, as Restart=on-failure does). Tables of people playing by unary calls and tables
    of bots keep commits in flight; PostgreSQL stops for 5 s and starts again. Nodes with a
    commit in flight fail-stop (exit 3); every answer a client gets from a server meanwhile
    names its reason (STORAGE_FAILED, TABLE_MOVED, ...); nothing acknowledged is lost; and
    every node serves every table again within seconds of PostgreSQL's return."""
    base = Path(tempfile.mkdtemp(prefix="copas-pg-restart-"))
    base.chmod(0o755)  # the postgres user (when run as root) reaches its directory
    pg = LocalPostgres(base / "pg", free_port())
    await asyncio.to_thread(pg.create)
    await asyncio.to_thread(pg.start)
    dsn = fresh_database(pg.dsn)
    workers = ServerProcess("--database", dsn, "--workers", "2", *NODE_FLAGS,
                            log_dir=tmp_path)
    solo_port = free_port()
    solo_flags = ("--database", dsn, "--node-id", "solo", *NODE_FLAGS)
    solo = ServerProcess(*solo_flags, port=solo_port, log_dir=tmp_path)
    stop = asyncio.Event()
    channels = [grpc.aio.insecure_channel(a) for a in (workers.address, solo.address)]
    try:
        stubs = [copas_pb2_grpc.CopasServiceStub(c) for c in channels]
        players: list[_Players] = []
        first_tokens: dict[str, str] = {}
        for i in range(6):  # people's tables, three through each layout's port
            stub = stubs[i % 2]
            table = await new_table(stub, preset="quick", seed=str(i))
            joins = await join_all(stub, table.table_id, 4)
            tokens = {j.seat: j.player_token for j in joins}
            first_tokens[table.table_id] = tokens[0]
            players.append(_Players(stub, table.table_id, tokens))
        for i in range(4):  # bots' tables: commits all the time
            await new_table(stubs[i % 2], preset="quick", seed=str(100 + i), bots=4,
                            max_hands=100)
        load = [asyncio.create_task(p.run(stop)) for p in players]
        await asyncio.wait_for(_more_acks(players, 60), 60)
        before = sum(len(p.acked) for p in players)
        await asyncio.to_thread(pg.stop)
        await asyncio.sleep(5.0)  # the outage itself
        await asyncio.to_thread(pg.start)
        back = time.monotonic()
        # systemd's part: the node exits (3 with a commit in flight) and is started again.
        code = await asyncio.to_thread(solo.proc.wait, 60)
        assert code == 3, solo.log()[-3000:]
        solo_exited, solo_starts = time.monotonic() - back, 0
        while True:
            await asyncio.sleep(1.0)  # RestartSec=1
            solo_starts += 1
            try:
                solo = await asyncio.to_thread(ServerProcess, *solo_flags, port=solo_port,
                                               log_dir=tmp_path)
                break
            except AssertionError:  # the database not yet there: exit 2, started again
                assert time.monotonic() - back < 60
        solo_up = time.monotonic() - back
        through = await asyncio.wait_for(asyncio.gather(*(
            _serving(stub, list(first_tokens), first_tokens, back) for stub in stubs)), 60)
        served_again = time.monotonic() - back
        mark = sum(len(p.acked) for p in players)
        await asyncio.wait_for(_more_acks(players, mark + 20), 60)  # play goes on
        stop.set()
        await asyncio.gather(*load)
        # Nothing acknowledged was lost: every acknowledged action is the event at its
        # sequence in the table's history, as every node tells it now.
        for p in players:
            acked = [a for a in p.acked if a.card]
            if not acked:
                continue
            history = await _events(stubs[0], p.table_id, p.tokens[0],
                                    min(a.sequence for a in p.acked) - 1)
            for a in acked:
                event = history.get(a.sequence)
                assert event is not None and event.WhichOneof("kind") == "card_played", a
                assert (event.card_played.seat, event.card_played.card.text) == \
                    (a.seat, a.card), a
        refusals: collections.Counter[tuple[str, str]] = collections.Counter()
        for p in players:
            refusals.update(p.refusals)
        unreachable = sum(p.unreachable for p in players)
        print(f"PostgreSQL restart: {before} actions acknowledged before, "
              f"{sum(len(p.acked) for p in players)} in all; served again "
              f"{served_again:.1f} s after PostgreSQL came back (through the workers' port "
              f"{through[0]:.1f} s, the single node's {through[1]:.1f} s; it exited "
              f"{solo_exited:.1f} s and was up {solo_up:.1f} s after, in {solo_starts} "
              f"starts); refusals {dict(refusals)}; "
              f"{unreachable} calls found no process listening")
        bare = {k: [p.examples.get(k) for p in players] for k in refusals if not k[1]}
        assert not bare, (bare, refusals)
        assert ("UNAVAILABLE", "STORAGE_FAILED") in refusals  # the outage was seen, and said
        # How soon every node served again is the figure printed above; the 60 s bound of
        # the wait itself fails a node that never comes back.
        supervisor = workers.log()
        assert "exited (3)" in supervisor, supervisor[-3000:]
    finally:
        stop.set()
        for channel in channels:
            await channel.close()
        for server in (workers, solo):
            with contextlib.suppress(Exception):
                server.stop(30)
        await asyncio.to_thread(pg.stop)
        shutil.rmtree(base, ignore_errors=True)


async def _more_acks(players: list[_Players], count: int) -> None:
    while sum(len(p.acked) for p in players) < count:
        for p in players:
            p.progress.clear()
        await asyncio.wait([asyncio.create_task(p.progress.wait()) for p in players],
                           return_when=asyncio.FIRST_COMPLETED)


async def test_with_mutual_tls_the_internal_port_takes_only_the_nodes_certificates(
        postgres: Any, tmp_path: Path) -> None:
    """``--internal-tls-*``: the nodes relay to each other over TLS with client
    certificates of the cluster's CA; the internal port turns away plaintext, a TLS client
    without a certificate, and one whose certificate another CA signed."""
    import trustme

    ca, stranger = trustme.CA(), trustme.CA()
    files = {}
    for name, authority in (("node", ca), ("other", stranger)):
        cert = authority.issue_cert("127.0.0.1", "localhost")
        cert.private_key_pem.write_to_path(str(tmp_path / f"{name}-key.pem"))
        cert.cert_chain_pems[0].write_to_path(str(tmp_path / f"{name}-cert.pem"))
        files[name] = cert
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    mutual = {"internal_tls_cert": str(tmp_path / "node-cert.pem"),
              "internal_tls_key": str(tmp_path / "node-key.pem"),
              "internal_tls_ca": str(tmp_path / "ca.pem")}
    dsn = fresh_database(postgres.dsn)
    async with serving(database=dsn, node_id="a", allow_seed=True, **mutual) as (_, on_a), \
            serving(database=dsn, node_id="b", **mutual) as (node_b, on_b):
        table = await new_table(on_a, preset="quick", seed="8")
        joined = await on_b.JoinTable(copas_pb2.JoinTableRequest(  # relayed to a, over TLS
            table_id=table.table_id, display_name="Ann"), timeout=10)
        view = await on_b.GetView(copas_pb2.GetViewRequest(), metadata=auth(joined.player_token),
                                  timeout=10)
        assert view.view.table_id == table.table_id
        assert node_b.cluster is not None and node_b.cluster.relay.connections() == 1
        internal = f"127.0.0.1:{node_b.internal_port}"
        as_relay = (("x-copas-hops", "1"), ("x-copas-cluster-key", _cluster_key(dsn)))
        ca_pem = ca.cert_pem.bytes()

        async def call(credentials: grpc.ChannelCredentials | None) -> str:
            channel = grpc.aio.secure_channel(internal, credentials) \
                if credentials is not None else grpc.aio.insecure_channel(internal)
            try:
                await copas_pb2_grpc.CopasServiceStub(channel).GetTable(
                    copas_pb2.GetTableRequest(table_id=table.table_id), metadata=as_relay,
                    timeout=3)
                return "OK"
            except grpc.aio.AioRpcError as error:
                return f"{error.code().name} {_reason(error)}"
            finally:
                await channel.close()

        def chain(name: str) -> bytes:
            return files[name].cert_chain_pems[0].bytes()

        assert await call(grpc.ssl_channel_credentials(
            ca_pem, files["node"].private_key_pem.bytes(), chain("node"))) == \
            "UNAVAILABLE TABLE_MOVED"  # a node's: the hop mark holds
        assert (await call(None)).startswith("UNAVAILABLE ")  # plaintext: no answer
        assert (await call(grpc.ssl_channel_credentials(ca_pem))) == "UNAVAILABLE "
        assert (await call(grpc.ssl_channel_credentials(
            ca_pem, files["other"].private_key_pem.bytes(), chain("other")))) == "UNAVAILABLE "


def test_an_advertised_port_without_an_internal_one_is_refused_at_start(postgres: Any) -> None:
    """``--advertise HOST:PORT`` used to name the port the others relay to, the public one:
    in a cluster that must be the internal port, so a node started so says what to give."""
    from tests.helpers.servers import run_server

    done = run_server("--database", fresh_database(postgres.dsn), "--advertise",
                      "127.0.0.1:50051", timeout=60)
    assert done.returncode == 2 and "internal port" in done.stderr, done.stderr


async def test_a_quick_match_on_any_node_never_joins_a_bait_table(postgres: Any) -> None:
    """A table made with the preset's name but other rules (a point limit of 1,000, no
    clock) or with bots is not what a quick match opens: a quick match through either node
    sits at the quick-match table instead, however much older the bait is."""
    dsn = fresh_database(postgres.dsn)
    async with serving(database=dsn, node_id="a") as (_, on_a), \
            serving(database=dsn, node_id="b") as (_, on_b):
        bait = (await on_b.CreateTable(copas_pb2.CreateTableRequest(
            preset="quick", rules=copas_pb2.RulesOverrides(
                point_limit=1000, play_timeout_seconds=0)), timeout=10)).table
        await on_b.JoinTable(copas_pb2.JoinTableRequest(table_id=bait.table_id,
                                                        display_name="Bait"), timeout=10)
        botty = (await on_b.CreateTable(copas_pb2.CreateTableRequest(
            preset="quick", bot_seats=1), timeout=10)).table
        await on_b.JoinTable(copas_pb2.JoinTableRequest(table_id=botty.table_id,
                                                        display_name="Botty"), timeout=10)
        first = await on_a.JoinTable(_quick("Ann"), timeout=10)
        second = await on_b.JoinTable(_quick("Bob"), timeout=10)
        assert first.table.table_id not in (bait.table_id, botty.table_id)
        assert second.table.table_id == first.table.table_id
        assert first.table.rules.point_limit == 100 and not any(
            s.is_bot for s in second.table.seats)


def test_workers_on_all_interfaces_need_an_address_and_can_have_fixed_ports() -> None:
    """`--workers` listening on all interfaces without --advertise would tell clients and
    the other nodes 127.0.0.1: refused at start. With the port bases, worker i's public and
    internal ports are base + i (a firewall can name them; a restart keeps them)."""
    from server.config import parse_args
    from server.workers import Supervisor
    from tests.helpers.servers import run_server

    done = run_server("--database", "postgresql://nobody@127.0.0.1:1/none", "--workers", "2",
                      "--listen", "0.0.0.0:0")
    assert done.returncode == 2, done.stderr
    assert "--advertise" in done.stderr and "0.0.0.0" in done.stderr
    argv = ["--database", "postgresql://x@127.0.0.1:1/db", "--workers", "2",
            "--listen", "0.0.0.0:50051", "--advertise", "10.0.0.5",
            "--worker-public-port-base", "51000", "--worker-internal-port-base", "52000"]
    supervisor = Supervisor(parse_args(argv), argv)
    for i in (0, 1):
        command = supervisor.command(i)
        assert command[command.index("--public-listen") + 1] == f"0.0.0.0:{51000 + i}"
        assert command[command.index("--internal-listen") + 1] == f"10.0.0.5:{52000 + i}"
        assert "--worker-public-port-base" not in command


async def test_an_unknown_table_or_token_asked_again_at_once_is_not_read_again(
        postgres: Any) -> None:
    """A short negative cache: the same unknown table id (or token) asked 20 times within a
    second costs one database read, and is still answered NOT_FOUND (UNAUTHENTICATED)."""
    dsn = fresh_database(postgres.dsn)
    async with serving(database=dsn, node_id="a") as (running, stub):
        def reads() -> float:
            value = running.metrics.registry.get_sample_value(
                "copas_cluster_lookups_total", {"outcome": "read"})
            return float(value or 0.0)
        before = reads()
        for _ in range(20):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.GetTable(copas_pb2.GetTableRequest(table_id="t_nobody_here"))
            assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        for _ in range(20):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.GetView(copas_pb2.GetViewRequest(), metadata=auth("made-up-token"))
            assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert reads() - before == 2

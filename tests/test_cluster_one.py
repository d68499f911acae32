"""A cluster is one server to a client (issue 19): quick match seats players who reached
different nodes at one table, a request id retried on another node gets the first answer,
what only nodes may say (the cluster key, the hop mark, whom a call is forwarded for) counts
only on the internal port, and a PostgreSQL restart under load loses nothing acknowledged
while every node serves again within seconds. On a real PostgreSQL (the ``postgres``
fixture, or one of the test's own where it restarts it)."""

from __future__ import annotations

import asyncio
import sys
import uuid
from typing import Any

import grpc
import psycopg
import pytest
from copas.v1 import copas_pb2

from tests.helpers.calls import auth, new_table
from tests.helpers.servers import fresh_database, serving


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
    from copas.v1 import copas_pb2_grpc

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
            await _until(lambda node=node: node.forwarder.keys.current == new)
        # Relays work throughout (b presents the new key to a), and the old key is still a
        # relay's within the grace.
        assert (await on_b.GetTable(copas_pb2.GetTableRequest(table_id=table.table_id),
                                    timeout=10)).table.table_id == table.table_id
        assert (await _get_table(internal, table.table_id, as_relay)).startswith("UNAVAILABLE")
        # After the grace the old key is nobody's: the call is relayed like a client's.
        with psycopg.connect(dsn, autocommit=True) as db:
            db.execute("UPDATE copas SET value = '0' WHERE key = 'cluster_key_rotated'")
        await _until(lambda: not node_b.forwarder.keys.accepts(old))
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

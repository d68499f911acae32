"""Limits per address and floods (the third hostile pass, issue 18): each finding as a test
against a real server on loopback; each of these failed on the server before its fix. Costs
are counted (calls served, refusals, the server's CPU seconds and RSS) or, where a test also
times something, printed as figures: a loaded machine fails none of them."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import grpc
import pytest
from copas.v1 import copas_pb2, copas_pb2_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.helpers.calls import auth, join_all, new_table, quota_details
from tests.helpers.servers import ROOT, ServerProcess, free_port, metric, server_command, serving

PERF_ROUNDS = int(os.environ.get("COPAS_PERF_ROUNDS", "1"))  # figures' rounds
HONEST = "198.51.100.1"  # the honest client's address (through the trusted proxy, loopback)


def as_client(address: str, token: str | None = None) -> tuple[tuple[str, str], ...]:
    """Metadata of a call from ``address`` (the server trusts loopback as a proxy)."""
    return (("x-forwarded-for", address),) + (auth(token) if token else ())


async def test_player_tokens_do_not_multiply_their_addresss_allowance() -> None:
    """Finding 2: 12 tables and 48 seats from one address give 48 tokens; a GetView flood
    with all of them is served at most the address's allowance for all its calls (each token
    alone would allow 60 at once), each refusal comes at once and says which quota and when
    to retry, and another address is served meanwhile."""
    rate, burst = 20.0, 100.0
    async with serving(allow_seed=True, trusted_proxies="127.0.0.1",
                       address_calls_per_second=rate, address_calls_burst=burst,
                       token_calls_per_second=20, token_calls_burst=60,
                       tables_per_minute=60, tables_burst=30, joins_per_minute=240,
                       joins_burst=60) as (_, stub):
        began = time.monotonic()
        seats: list[tuple[str, str]] = []
        for _ in range(12):
            table = await new_table(stub)
            seats += [(table.table_id, j.player_token)
                      for j in await join_all(stub, table.table_id, 4)]
        assert len({token for _, token in seats}) == 48
        served = 12 + 48
        refusals: list[grpc.aio.AioRpcError] = []
        slowest_refusal = 0.0
        deadline = time.monotonic() + 2.0

        async def flood(table_id: str, token: str) -> None:
            nonlocal served, slowest_refusal
            request = copas_pb2.GetViewRequest(table_id=table_id)
            while time.monotonic() < deadline:
                asked = time.perf_counter()
                try:
                    await stub.GetView(request, metadata=auth(token))
                    served += 1
                except grpc.aio.AioRpcError as error:
                    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error
                    slowest_refusal = max(slowest_refusal, time.perf_counter() - asked)
                    if len(refusals) < 10:
                        refusals.append(error)
                    await asyncio.sleep(0.005)

        flooding = asyncio.gather(*(flood(t, token) for t, token in seats))
        await asyncio.sleep(0.5)
        other = await stub.ListTables(copas_pb2.ListTablesRequest(),
                                      metadata=as_client("198.51.100.77"))
        assert len(other.tables) == 12  # another address: its own allowance
        await flooding
        elapsed = time.monotonic() - began
    allowance = burst + rate * elapsed
    assert served <= allowance + 1, (served, allowance)
    assert served >= 0.5 * allowance, (served, allowance)  # the allowance is given, too
    reason, subject, retry = quota_details(refusals[0])
    assert (reason, subject) == ("RATE_LIMITED", "address 127.0.0.1")
    assert 0 < retry <= 1 / rate + 0.01
    assert "200" not in (refusals[0].details() or "") and "20 per second" in \
        (refusals[0].details() or "")
    # Refused at once (no penalty is configured here: nothing holds a refusal); how long the
    # slowest took on this machine is a figure, not a check.
    print(f"slowest refusal {slowest_refusal * 1000:.0f} ms")


async def test_calls_in_flight_per_address_are_bounded(tmp_path: Path) -> None:
    """Finding 4: an address's calls waiting for their answers are bounded (here: 3
    CreateTable waiting for a held disk); the fourth and fifth are refused at once with
    TOO_MANY_CALLS, another address is served, and the slots come back with the answers."""
    async with serving(data_dir=str(tmp_path), trusted_proxies="127.0.0.1",
                       max_calls_in_flight_per_address=3) as (running, stub), \
            grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        gate = threading.Event()
        commit = running.store._commit

        def held(batch: Any) -> None:
            gate.wait(20)
            commit(batch)

        running.store._commit = held  # type: ignore[method-assign]  # a slow disk
        calls = [asyncio.ensure_future(stub.CreateTable(copas_pb2.CreateTableRequest(
            display_name=f"t{i}"), timeout=30)) for i in range(5)]
        try:
            done, pending = set(), set(calls)
            async with asyncio.timeout(10):
                while len(done) < 2:
                    finished, pending = await asyncio.wait(pending,
                                                           return_when=asyncio.FIRST_COMPLETED)
                    done |= finished
            for call in done:
                error = call.exception()
                assert isinstance(error, grpc.aio.AioRpcError), error
                assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert quota_details(error)[:2] == ("TOO_MANY_CALLS", "peer 127.0.0.1")
            health = health_pb2_grpc.HealthStub(channel)  # answered from memory
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await health.Check(health_pb2.HealthCheckRequest(), timeout=5)
            assert quota_details(err.value)[0] == "TOO_MANY_CALLS"
            answer = await health.Check(health_pb2.HealthCheckRequest(),
                                        metadata=as_client(HONEST), timeout=5)
            assert answer.status == health_pb2.HealthCheckResponse.SERVING
        finally:
            gate.set()
        made = [await call for call in pending]
        assert sorted(m.table.display_name for m in made) == \
            sorted(c.result().table.display_name for c in calls if c in pending)
        listed = await stub.ListTables(copas_pb2.ListTablesRequest())  # slots given back
        assert len(listed.tables) == 3


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


async def _honest_latencies(stub: copas_pb2_grpc.CopasServiceStub,
                            players: list[tuple[str, str]], seconds: float) -> list[float]:
    """Each (table, token) player asking for its view every 60 ms (within its token's
    20/s): the latencies, in seconds."""
    latencies: list[float] = []
    end = time.monotonic() + seconds

    async def player(table_id: str, token: str) -> None:
        request = copas_pb2.GetViewRequest(table_id=table_id)
        while time.monotonic() < end:
            asked = time.perf_counter()
            await stub.GetView(request, metadata=as_client(HONEST, token), timeout=10)
            latencies.append(time.perf_counter() - asked)
            await asyncio.sleep(0.06)

    await asyncio.gather(*(player(t, token) for t, token in players))
    return latencies


@contextlib.contextmanager
def _startup_frozen() -> Iterator[None]:
    """The test's own full collections (pytest holds ~10^5 objects) kept out of the honest
    player's latencies, as the server keeps its own (gc.freeze after start-up)."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[int(len(ordered) * 0.99)]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.perf
async def test_a_flood_of_refused_calls_costs_an_honest_player_little(tmp_path: Path) -> None:
    """Finding 4: 2,048 concurrent calls without a token from one address over 4 connections
    (a process of its own), almost all refused, and the server's RSS grows less than 16 MB:
    a refusal is held back (--quota-penalty) only while its client has fewer than 64 held and
    everyone fewer than 4,096, beyond it is answered at once, so few are held in memory (all
    held, 90,000 refusals of three rounds would be hundreds of MB; the flood's calls wait
    for their stream behind the held ones, some past their deadline; gRPC's buffers for the
    calls under way grew it 3.7-10.4 MB
    over three rounds on uvloop, 5.2-8.6 MB on asyncio's loop). An honest player's GetView p99
    with and without the flood (pooled over alternating rounds: one in `make test`,
    COPAS_PERF_ROUNDS under `make bench`) is printed: a figure of this machine
    (bench/flood.py measures it), not a check."""
    with ServerProcess("--trusted-proxies", "127.0.0.1", "--data-dir", str(tmp_path),
                       "--web-port", "0", "--log-level", "warning") as server:
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub = copas_pb2_grpc.CopasServiceStub(channel)
            players = []  # two tables of four: eight players, ~130 calls/s in all
            for name in ("h1", "h2"):  # a clock of their own: not quick-match tables, which
                # seat one person per address, and wait for their streams
                table = (await stub.CreateTable(copas_pb2.CreateTableRequest(
                    display_name=name, rules=copas_pb2.RulesOverrides(play_timeout_seconds=0)),
                    metadata=as_client(HONEST))).table
                players += [(table.table_id, (await stub.JoinTable(copas_pb2.JoinTableRequest(
                    table_id=table.table_id, display_name=f"p{i}"),
                    metadata=as_client(HONEST))).player_token) for i in range(4)]
            await _honest_latencies(stub, players, 1.0)  # warm up
            with _startup_frozen():
                quiet: list[float] = []
                flooded: list[float] = []
                codes: dict[str, int] = {}
                allowance = 0.0  # what the flood's address may be served, over the rounds
                grown_from = 0.0
                for round_ in range(PERF_ROUNDS):
                    quiet += await _honest_latencies(stub, players, 3.0)
                    if round_ == 0:
                        grown_from = _rss_mb(server.proc.pid)
                    flood_began = time.monotonic()
                    flood = subprocess.Popen(  # niced: an attacker's CPU is not the server's
                        ["nice", "-n", "19", sys.executable, "-m", "tests.helpers.flood",
                         server.address, "--calls",
                         "2048", "--connections", "4", "--seconds", "3.8"], cwd=ROOT,
                        stdout=subprocess.PIPE, text=True)
                    assert flood.stdout is not None
                    assert await asyncio.to_thread(flood.stdout.readline) == "flooding\n"
                    await asyncio.sleep(0.5)  # its calls under way
                    flooded += await _honest_latencies(stub, players, 3.0)
                    out, _ = await asyncio.to_thread(flood.communicate, timeout=30)
                    # The quota: its burst, then its rate for as long as the flood lasted.
                    allowance += 200 + 50 * (time.monotonic() - flood_began)
                    for code, count in json.loads(out).items():
                        codes[code] = codes.get(code, 0) + count
                grown = _rss_mb(server.proc.pid) - grown_from
    ratio = _p99(flooded) / _p99(quiet)
    print(f"honest p99 {_p99(quiet) * 1000:.2f} ms quiet, {_p99(flooded) * 1000:.2f} ms "
          f"flooded: ratio {ratio:.2f}; RSS +{grown:.1f} MB; flood answers {codes}")
    # A flood: it ran into its address's quota (some refused, or held until its deadline),
    # and what it was served stays within that quota (--peer-calls-burst 200, then
    # --peer-calls-per-second 50, from the flooder's start to its end: on a busy machine the
    # niced flooder's 3.8 s and its answers under way take longer). How many more it was
    # refused depends on how fast the niced flooder runs beside the suite.
    refused = codes.get("RESOURCE_EXHAUSTED", 0) + codes.get("DEADLINE_EXCEEDED", 0)
    assert refused > 0 and 0 < codes.get("OK", 0) <= allowance, (codes, allowance)
    assert grown < 16.0, grown


async def test_a_stalled_log_reader_never_stops_the_server(tmp_path: Path) -> None:
    """Finding 3: stderr is a pipe nobody reads (a stalled log shipper). 2,000 logged calls
    fill it many times over; the server keeps answering (health too), and the lines it could
    not write are dropped and counted."""
    metrics_port = free_port()
    command = server_command("--unlimited-quotas", "--data-dir", str(tmp_path), "--web-port",
                             "0", "--log-format", "json", "--log-queue", "100",
                             "--metrics-port", str(metrics_port), "--metrics-host",
                             "127.0.0.1")
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stdout is not None
        line = await asyncio.to_thread(proc.stdout.readline)
        assert "listening" in line, line
        port = line.split(" on ", 1)[1].split(" ", 1)[0].rsplit(":", 1)[1]
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = copas_pb2_grpc.CopasServiceStub(channel)
            health = health_pb2_grpc.HealthStub(channel)
            for batch in range(40):  # each NOT_FOUND writes a log line
                results = await asyncio.gather(*(stub.GetTable(
                    copas_pb2.GetTableRequest(table_id=f"t{batch}-{i}"), timeout=5)
                    for i in range(50)), return_exceptions=True)
                assert all(isinstance(r, grpc.aio.AioRpcError)
                           and r.code() == grpc.StatusCode.NOT_FOUND for r in results), \
                    results[0]
            slowest = 0.0
            for _ in range(20):
                asked = time.perf_counter()
                answer = await health.Check(health_pb2.HealthCheckRequest(), timeout=5)
                slowest = max(slowest, time.perf_counter() - asked)
                assert answer.status == health_pb2.HealthCheckResponse.SERVING
        dropped = await asyncio.to_thread(metric, SimpleNamespace(metrics_port=metrics_port),
                                          "copas_log_lines_dropped_total")
        print(f"slowest health check {slowest * 1000:.0f} ms")  # a figure, not a check
        assert dropped >= 1000, dropped  # 2,000 lines; the pipe and the queue hold < 1,000
    finally:
        proc.kill()
        proc.wait(10)


GOAWAY = 0x7
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def _frames_until_closed(sock: socket.socket, seconds: float) -> tuple[list[int], float]:
    """The HTTP/2 frame types the server sends on a raw connection until it closes it, and
    when it did (raises on no close within ``seconds``)."""
    sock.settimeout(seconds)
    began = time.monotonic()
    data = b""
    while chunk := sock.recv(1 << 16):
        data += chunk
    kinds, at = [], 0
    while at + 9 <= len(data):
        kinds.append(data[at + 3])
        at += 9 + int.from_bytes(data[at:at + 3], "big")
    return kinds, time.monotonic() - began


async def test_idle_connections_are_closed_and_connections_are_capped() -> None:
    """Finding 6: a connection with no call open is closed after --max-connection-idle
    (GOAWAY, then the close), and connections beyond --max-connections are closed at once;
    a client that needs the server again reconnects and is served."""
    with ServerProcess("--web-port", "0", "--data-dir", "memory", "--max-connection-idle",
                       "1", "--max-connections", "3") as server:
        idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(3)]
        for sock in idle:
            sock.sendall(PREFACE)
        extra = socket.create_connection(("127.0.0.1", server.port))
        extra.sendall(PREFACE)
        try:
            kinds, after = await asyncio.to_thread(_frames_until_closed, extra, 5.0)
            # At once, without the GOAWAY an idle close sends: no room.
            assert GOAWAY not in kinds, (kinds, after)
            for sock in idle:
                kinds, after = await asyncio.to_thread(_frames_until_closed, sock, 10.0)
                assert kinds[-1] == GOAWAY, kinds
        finally:
            for sock in (*idle, extra):
                sock.close()
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub = copas_pb2_grpc.CopasServiceStub(channel)
            await stub.ListTables(copas_pb2.ListTablesRequest(), timeout=10)
            assert channel.get_state() == grpc.ChannelConnectivity.READY
            # The server closes it once idle (the channel then leaves READY).
            await asyncio.wait_for(channel.wait_for_state_change(
                grpc.ChannelConnectivity.READY), 10)
            await stub.ListTables(copas_pb2.ListTablesRequest(), timeout=10)  # reconnects


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


OPEN_QUOTAS = ("--peer-calls-per-second", "100000", "--peer-calls-burst", "100000",
               "--address-calls-per-second", "100000", "--address-calls-burst", "100000",
               "--tables-per-minute", "6000000", "--tables-burst", "100000",
               "--max-tables-per-address", "0")


@pytest.mark.perf
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
async def test_lobby_streams_have_a_small_cap_and_a_change_costs_them_little() -> None:
    """Finding 7: one address asks for 1,000 WatchLobby streams: it gets 8 (a browser needs
    one), the rest are refused at once; the server CPU a lobby change costs (a table
    created) after it asked for 1,000 stays within 3x of its cost after it asked for 8
    (it grew with every stream before: 13-15 ms a change with 1,000)."""
    with ServerProcess("--web-port", "0", "--data-dir", "memory", "--log-level", "warning",
                       *OPEN_QUOTAS) as server:
        channels = [grpc.aio.insecure_channel(server.address) for _ in range(20)]
        stubs = [copas_pb2_grpc.CopasServiceStub(c) for c in channels]
        readers: list[asyncio.Task[None]] = []
        seen: list[set[str]] = []  # the tables each open lobby stream was told of
        refused = [0]

        async def follow(call: Any, told: set[str]) -> None:
            while (message := await call.read()) is not grpc.aio.EOF:
                if message.HasField("table_added"):
                    told.add(message.table_added.table_id)
                elif message.HasField("snapshot"):  # it fell behind: the newest tables
                    told.update(t.table_id for t in message.snapshot.tables)

        async def create(count: int) -> float:
            """Server CPU seconds per table created (each one a lobby change), once every
            """
            before = _cpu_seconds(server.proc.pid)
            for _ in range(count):
                last = (await stubs[0].CreateTable(copas_pb2.CreateTableRequest(
                    display_name="t"))).table.table_id
            try:
                async with asyncio.timeout(30):
                    while not all(last in told for told in seen):
                        await asyncio.sleep(0.01)
            except TimeoutError:
                raise AssertionError([len(t) for t in seen], [r.done() for r in readers],
                                     [r.exception() for r in readers if r.done()]) from None
            return (_cpu_seconds(server.proc.pid) - before) / count

        async def open_lobby(stub: copas_pb2_grpc.CopasServiceStub) -> bool:
            call = stub.WatchLobby(copas_pb2.WatchLobbyRequest())
            try:
                first = await call.read()
            except grpc.aio.AioRpcError as error:
                if error.code() == grpc.StatusCode.UNAVAILABLE:  # HTTP/2's REFUSED_STREAM
                    assert "error code 7" in (error.details() or ""), error
                    return False
                assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error
                assert quota_details(error)[0] == "TOO_MANY_STREAMS"
                assert "lobby" in (error.details() or "")
                refused[0] += 1
                return False
            assert first.HasField("snapshot")
            seen.append(set())
            readers.append(asyncio.create_task(follow(call, seen[-1])))
            return True

        try:
            for stub in stubs:  # connected (the server's limits known to each connection)
                await stub.ListTables(copas_pb2.ListTablesRequest(page_size=1))
            assert all(await asyncio.gather(*(open_lobby(stub) for stub in stubs[:8])))
            await create(20)  # warm up
            few = await create(400)
            opened = await asyncio.gather(*(open_lobby(stubs[i % 20]) for i in range(992)))
            assert not any(opened)  # 8 in all from this address
            assert refused[0] >= 100  # the others: HTTP/2 REFUSED_STREAM, at once too
            many = await create(400)
        finally:
            for task in readers:
                task.cancel()
            for channel in channels:
                await channel.close()
    print(f"CPU per lobby change: {few * 1e3:.3f} ms after 8 lobby streams asked, "
          f"{many * 1e3:.3f} ms after 1,000: ratio {many / few:.2f}")
    # The fault grew it more than tenfold; 3x leaves room for a busy machine's noise.
    assert many <= 3 * few, (many, few)


@pytest.mark.perf
async def test_list_tables_with_a_filter_reads_an_index() -> None:
    """Finding 7: ListTables for a preset nobody plays costs the same among 4,000 tables
    as among 40 (it read every table before: 0.8 ms a call at 4,000). The lobby's own work
    is timed (the fastest of 200 calls, which a busy machine does not inflate); the calls
    over gRPC check the answers."""
    from server.tables.lobby import LobbyFilter

    async with serving() as (running, stub):
        async def made(count: int) -> None:
            for first in range(0, count, 100):  # a hundred at a time: one commit each
                await asyncio.gather(*(stub.CreateTable(copas_pb2.CreateTableRequest(
                    preset="online")) for _ in range(min(100, count - first))))

        async def fastest_seconds() -> float:
            answer = await stub.ListTables(copas_pb2.ListTablesRequest(preset="classic"))
            assert [t.preset for t in answer.tables] == ["classic"]
            wanted = LobbyFilter(False, "classic", 0, False)
            times = []
            for _ in range(200):
                asked = time.perf_counter()
                tables, _ = await running.registry.lobby.page(20, "", wanted)
                times.append(time.perf_counter() - asked)
                assert [t.preset for t in tables] == ["classic"]
            return min(times)

        await made(40)
        await stub.CreateTable(copas_pb2.CreateTableRequest(preset="classic"))
        few = await fastest_seconds()
        await made(3960)
        many = await fastest_seconds()
        listed = await stub.ListTables(copas_pb2.ListTablesRequest(preset="online",
                                                                   page_size=5))
        assert len(listed.tables) == 5 and listed.next_page_token
    print(f"the lobby's ListTables(preset) work: {few * 1e6:.0f} us at 41 tables, "
          f"{many * 1e6:.0f} us at 4,001: ratio {many / few:.2f}")
    assert many <= 3.0 * few, (many, few)


async def test_a_quick_match_never_joins_a_table_made_with_other_rules() -> None:
    """One node: the oldest waiting "quick" table is a bait (a point limit of 1,000 and no
    clock); a quick match opens a table of the preset's own rules instead, and the next
    quick match joins that one."""
    async with serving() as (_, stub):
        bait = (await stub.CreateTable(copas_pb2.CreateTableRequest(
            preset="quick", rules=copas_pb2.RulesOverrides(
                point_limit=1000, play_timeout_seconds=0)))).table
        await stub.JoinTable(copas_pb2.JoinTableRequest(table_id=bait.table_id,
                                                        display_name="Bait"))
        first = await stub.JoinTable(copas_pb2.JoinTableRequest(preset="quick",
                                                                display_name="Ann"))
        second = await stub.JoinTable(copas_pb2.JoinTableRequest(preset="quick",
                                                                 display_name="Bob"))
        assert first.table.table_id != bait.table_id
        assert second.table.table_id == first.table.table_id
        assert first.table.rules.point_limit != 1000

"""The web port's connections are bounded as a well-built HTTP server bounds them: a deadline
for a request's headers and one for its body, a cap per client address (trusted proxies
exempt), and at the global cap a new connection takes the place of the oldest one still
waiting for its headers. Half-sent requests from many addresses cannot take the page down."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import statistics
import time
from pathlib import Path
from typing import Any

import pytest
from copas.v1 import copas_connect, copas_pb2

from tests.helpers.servers import ServerProcess, free_port, metric, serving
from tests.helpers.web import (
    CLOSED,
    FINISH,
    HALF_SENT,
    connect_from,
    get_status,
    post_json,
    read_head,
    read_to_end,
    sample,
    until,
    watch_request,
    web_port,
)

# ---------------------------------------------------------------- the flood of the finding

FLOOD = 2000
ATTACKERS = [f"127.0.0.{i}" for i in range(2, 42)]  # 40 addresses, 50 connections each
CALLS = 200
# The honest browser makes ~1,000 calls in seconds; its call quotas are off (by environment,
# which a server without one of these settings ignores), the web port's own limits are not.
NO_CALL_QUOTAS = {"COPAS_PEER_CALLS_PER_SECOND": "0", "COPAS_ADDRESS_CALLS_PER_SECOND": "0"}


def honest_latencies(port: int, calls: int) -> list[float]:
    """Seconds per honest Connect call (ListTables in JSON, a new connection each, as a
    browser opening the page makes them), the page fetched every tenth call: both must be
    served."""
    took = []
    for i in range(calls):
        began = time.perf_counter()
        status, _ = post_json(port, "ListTables", {}, "127.0.0.1")
        took.append(time.perf_counter() - began)
        assert status == 200, f"call {i}: HTTP {status}"
        if i % 10 == 0:
            assert get_status(port) == 200, f"the page, at call {i}"
    return took


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98]


def flood(port: int) -> list[socket.socket]:
    """``FLOOD`` half-sent requests, from the attackers' addresses in turn."""
    held = []
    for i in range(FLOOD):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10,
                                        source_address=(ATTACKERS[i % len(ATTACKERS)], 0))
        sock.sendall(HALF_SENT)
        held.append(sock)
    return held


def await_metric(server: ServerProcess, name: str, is_reached: Any, timeout: float = 10) -> None:
    """Wait until the server's gauge ``name`` satisfies ``is_reached`` (or ``timeout``: the old
    code has no such gauge, and its page is then checked as it is)."""
    deadline = time.monotonic() + timeout
    while not is_reached(metric(server, name)) and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.mark.perf
def test_half_sent_requests_from_many_addresses_leave_the_page_up(tmp_path: Path) -> None:
    """The finding: 1,030 half-sent requests took the page down (503 for every browser). Now
    2,000 from 40 addresses are held while an honest browser gets the page and every one of
    its calls is served; the flood's oldest waiting connections made room (none closed by the
    header deadline meanwhile: the eviction kept the page up), and the server still stops on
    SIGTERM. The honest calls' p99 before and during the flood is printed: a figure of this
    machine, not a check (a shared machine's bursts are no failure of the code)."""
    web, metrics_port = free_port(), free_port()
    server = ServerProcess("--web-port", str(web), "--web-host", "127.0.0.1", "--metrics-port",
                           str(metrics_port), "--metrics-host", "127.0.0.1", "--data-dir",
                           "memory", "--log-level", "warning", log_dir=tmp_path,
                           env=NO_CALL_QUOTAS)
    server.metrics_port = metrics_port
    held: list[socket.socket] = []
    try:
        assert "metrics on" in server.next_line() and "web page on" in server.next_line()
        honest_latencies(web, 20)  # warm up
        baseline = honest_latencies(web, CALLS)
        evicted = metric(server, CLOSED, reason="evicted")
        held = flood(web)
        await_metric(server, "copas_web_connections_waiting", lambda n: n >= 1024)
        flooded = honest_latencies(web, CALLS)  # each one served (HTTP 200), the page too
        print(f"honest p99 {p99(baseline) * 1000:.2f} ms before, "
              f"{p99(flooded) * 1000:.2f} ms with {FLOOD} half-sent requests: ratio "
              f"{p99(flooded) / p99(baseline):.2f}")
        assert metric(server, "copas_web_connections") <= 1024
        # The flood's 1,023 still held: the first honest connection made room for itself,
        # and the later ones found the room it left.
        assert metric(server, "copas_web_connections_waiting") >= 1023
        assert metric(server, CLOSED, reason="evicted") - evicted == FLOOD - 1024 + 1
        assert metric(server, CLOSED, reason="header_timeout") == 0
        assert metric(server, CLOSED, reason="per_address") == 0  # 50 each, 64 allowed
        assert server.stop(timeout=15) == 0  # a graceful stop, the flood still held
    finally:
        for sock in held:
            sock.close()
        server.kill9()


# ---------------------------------------------------------------- deadlines


async def test_a_request_that_does_not_send_its_headers_in_time_is_closed() -> None:
    async with web_port(web_header_timeout=0.3) as (running, port):
        began = time.monotonic()
        begun, _begun = await connect_from(port, "127.0.0.2", HALF_SENT)
        silent, _silent = await connect_from(port, "127.0.0.3")  # (a writer closes when dropped)
        assert (await read_to_end(begun, 5)).startswith(b"HTTP/1.1 408 ")
        assert await read_to_end(silent, 5) == b""  # nothing asked, nothing answered
        assert time.monotonic() - began >= 0.3
        assert sample(running, CLOSED, reason="header_timeout") == 2
        assert await asyncio.to_thread(get_status, port) == 200  # the next browser is served


async def test_a_request_whose_body_stalls_is_closed() -> None:
    async with web_port(web_body_timeout=0.3) as (running, port):
        stalled, _stalled = await connect_from(
            port, "127.0.0.2", b"POST /copas.v1.CopasService/ListTables HTTP/1.1\r\nHost: x\r\n"
            b"content-type: application/json\r\ncontent-length: 50\r\n\r\n{\"pa")
        assert (await read_to_end(stalled, 5)).startswith(b"HTTP/1.1 408 ")
        assert sample(running, CLOSED, reason="body_timeout") == 1


async def test_the_deadlines_bound_each_request_not_a_connection_or_a_stream() -> None:
    """A kept-alive connection outlives the deadlines by sending its requests in time, and a
    WatchTable stream, whose request is read, streams on.

    Each is asserted on its own connection, not by the server's count of header timeouts: the
    Connect client's pool may hold another connection idle meanwhile (the one its CreateTable
    used, when the stream opened before it went back to the pool), and an idle kept-alive
    connection is rightly closed at the header deadline."""
    port = free_port()
    # Deadlines of 1.5 s, requests 0.1 s apart for 3 s: a margin of 1.4 s for a loaded machine.
    async with (serving(web_port=port, web_host="127.0.0.1", web_header_timeout=1.5,
                        web_body_timeout=1.5) as (running, _),
                copas_connect.CopasServiceClient(f"http://127.0.0.1:{port}") as client):
        table = (await client.create_table(copas_pb2.CreateTableRequest())).table
        stream = client.watch_table(copas_pb2.WatchTableRequest(table_id=table.table_id))
        async with contextlib.aclosing(stream):
            assert (await anext(stream)).event.WhichOneof("kind") == "snapshot"
            reader, writer = await connect_from(port, "127.0.0.2")
            began, served = time.monotonic(), 0
            while time.monotonic() - began < 3.0:  # 0.1 s apart for two deadlines, one connection
                writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                head = await read_head(reader, 5)
                assert head.startswith(b"HTTP/1.1 200 "), f"request {served}: {head[:40]!r}"
                length = int(head.split(b"content-length: ")[1].split(b"\r\n")[0])
                await reader.readexactly(length)
                served += 1
                await asyncio.sleep(0.1)
            writer.close()
            await client.join_table(copas_pb2.JoinTableRequest(table_id=table.table_id,
                                                               display_name="Ana"))
            event = await asyncio.wait_for(anext(stream), 10)  # the stream is still open
            assert event.event.WhichOneof("kind") == "player_joined", event
        assert sample(running, CLOSED, reason="body_timeout") == 0


# ---------------------------------------------------------------- caps


async def test_one_address_holds_at_most_its_cap_of_connections() -> None:
    async with web_port(web_max_connections_per_address=8) as (running, port):
        opened = [await connect_from(port, "127.0.0.5", HALF_SENT) for _ in range(20)]
        await until(lambda: sample(running, CLOSED, reason="per_address") == 12)
        assert sample(running, "copas_web_connections") == 8
        # Another address is served meanwhile, and the address's own 8 are still open.
        assert await asyncio.to_thread(get_status, port, "/", "127.0.0.6") == 200
        answers = []
        for reader, writer in opened:
            writer.write(FINISH)
            with contextlib.suppress(ConnectionError):
                await writer.drain()
            answers.append(await read_head(reader, 5) if not reader.at_eof() else b"")
        refused = [a for a in answers if a.startswith(b"HTTP/1.1 503 ")]
        served = [a for a in answers if a.startswith(b"HTTP/1.1 200 ")]
        assert (len(refused), len(served)) == (12, 8), answers


async def test_a_trusted_proxy_is_not_held_to_the_cap_of_an_address() -> None:
    """Many browsers come through one proxy: it must bound its own clients (docs/OPERATING.md)."""
    async with web_port(web_max_connections_per_address=8,
                        trusted_proxies="127.0.0.9") as (running, port):
        opened = [await connect_from(port, "127.0.0.9", HALF_SENT) for _ in range(20)]
        await until(lambda: sample(running, "copas_web_connections") == 20)
        for reader, writer in opened:
            writer.write(FINISH)
            assert (await read_head(reader, 5)).startswith(b"HTTP/1.1 200 ")
        assert sample(running, CLOSED, reason="per_address") == 0


async def test_a_full_port_makes_room_by_closing_its_oldest_waiting_connection() -> None:
    """At the cap, a new connection takes the place of the oldest one waiting for its
    headers; when every connection is busy with a request (streams) and its address holds as
    many streams as any (tests/test_web_hostile.py: else a stream of the heaviest address
    makes room), it gets 503."""
    async with web_port(web_max_connections=4) as (running, port):
        waiting = []
        for i in range(4):
            waiting.append(await connect_from(port, f"127.0.0.{10 + i}", HALF_SENT))
            await until(lambda n=i + 1: sample(running, "copas_web_connections") == n)
        assert await asyncio.to_thread(get_status, port) == 200
        assert await read_to_end(waiting[0][0], 5) == b""  # the oldest made room
        assert sample(running, CLOSED, reason="evicted") == 1
        for reader, writer in waiting[1:]:  # the others are still open, and answered
            writer.write(FINISH)
            assert (await read_head(reader, 5)).startswith(b"HTTP/1.1 200 ")
            writer.close()

        status, created = await asyncio.to_thread(post_json, port, "CreateTable", {},
                                                  "127.0.0.1")
        assert status == 200
        await until(lambda: sample(running, "copas_web_connections") == 0)
        streams = [await connect_from(port, f"127.0.0.{20 + i}",
                                      watch_request(created["table"]["tableId"]))
                   for i in range(4)]
        for reader, _ in streams:  # each streams its snapshot: busy, not waiting
            assert (await read_head(reader, 5)).startswith(b"HTTP/1.1 200 ")
        late, _late = await connect_from(port, "127.0.0.20", HALF_SENT)  # holds one stream
        assert (await read_to_end(late, 5)).startswith(b"HTTP/1.1 503 ")
        assert sample(running, CLOSED, reason="full") == 1
        assert sample(running, CLOSED, reason="evicted") == 1
        for _, writer in streams:
            writer.close()

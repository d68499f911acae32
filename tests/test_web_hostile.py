"""The web port against an attacker's pass (issue 27): TLS connections that never say hello are
counted and capped at accept and held to the header deadline, and connections that never read
(streams, pipelined answers) cannot lock browsers out: a write deadline, a cap on streams per
address, and at the global cap the heaviest address's stream makes room for a newcomer. Each
test failed on the server before these bounds."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import socket
import ssl
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.servers import ServerProcess, free_port, metric
from tests.helpers.web import (
    CLOSED,
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


def rss_bytes(pid: int) -> int:
    """The resident memory of a process (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def wait_for(server: ServerProcess, is_reached: Any, timeout: float = 15.0) -> None:
    """Poll the server's metrics until ``is_reached()`` (then return; on timeout, return too:
    the assertions after say what the server did instead)."""
    deadline = time.monotonic() + timeout
    while not is_reached() and time.monotonic() < deadline:
        time.sleep(0.05)


def certificates(directory: Path) -> tuple[dict[str, str], ssl.SSLContext]:
    """A CA's server certificate for 127.0.0.1 and a client certificate in ``directory``: the
    server's TLS options, and a client's context trusting the CA."""
    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("localhost", "127.0.0.1")
    cert.private_key_pem.write_to_path(str(directory / "key.pem"))
    cert.cert_chain_pems[0].write_to_path(str(directory / "cert.pem"))
    ca.cert_pem.write_to_path(str(directory / "ca.pem"))
    client = ca.issue_cert("player@example.org")
    client.private_key_pem.write_to_path(str(directory / "client-key.pem"))
    client.cert_chain_pems[0].write_to_path(str(directory / "client.pem"))
    return ({"tls_cert": str(directory / "cert.pem"), "tls_key": str(directory / "key.pem")},
            ssl.create_default_context(cadata=ca.cert_pem.bytes().decode()))


def https_status(port: int, client_tls: ssl.SSLContext) -> int:
    """The HTTP status of a browser's GET of the page over TLS."""
    connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=client_tls)
    try:
        connection.request("GET", "/")
        answer = connection.getresponse()
        answer.read()
        return answer.status
    finally:
        connection.close()


# ---------------------------------------------------------------- finding 1: TLS

SILENT = 300  # TCP connections from one address that never send a ClientHello
SSL_BUFFER = 256 * 1024  # what asyncio's SSLProtocol allocates for each one
PARTIAL_HELLO = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"  # a ClientHello, begun


def test_tls_connections_that_never_say_hello_are_capped_at_accept(tmp_path: Path) -> None:
    """The finding: with --tls-cert, connections that never send a ClientHello were held
    until asyncio's 60 s handshake timeout, counted nowhere (2,000 from one address: +597 MB).
    Now they are counted at accept: one address gets its 64, the rest are refused before any
    TLS state is made; the 64 are closed at the header deadline, their memory is given back,
    and a browser speaking TLS is served throughout."""
    _, client_tls = certificates(tmp_path)
    web, metrics_port = free_port(), free_port()

    def browser_status() -> int:
        return https_status(web, client_tls)

    server = ServerProcess("--web-port", str(web), "--web-host", "127.0.0.1", "--metrics-port",
                           str(metrics_port), "--metrics-host", "127.0.0.1", "--data-dir",
                           "memory", "--log-level", "warning", "--web-header-timeout", "2",
                           "--tls-cert", str(tmp_path / "cert.pem"), "--tls-key",
                           str(tmp_path / "key.pem"), log_dir=tmp_path)
    server.metrics_port = metrics_port

    held: list[socket.socket] = []
    try:
        assert "metrics on" in server.next_line() and "web page on" in server.next_line()
        assert browser_status() == 200
        before = rss_bytes(server.proc.pid)
        for _ in range(SILENT):
            held.append(socket.create_connection(("127.0.0.1", web), timeout=10,
                                                 source_address=("127.0.0.7", 0)))
        wait_for(server, lambda: metric(server, CLOSED, reason="per_address") >= SILENT - 64)
        assert metric(server, CLOSED, reason="per_address") == SILENT - 64
        assert metric(server, "copas_web_connections") == 64
        grown = rss_bytes(server.proc.pid) - before
        print(f"{SILENT} silent TLS connections from one address: RSS +{grown / 1e6:.1f} MB")
        assert grown < SILENT * SSL_BUFFER / 3, grown  # 64 handshakes' worth, not 300
        assert browser_status() == 200  # another address, while the 64 are held

        wait_for(server, lambda: metric(server, "copas_web_connections") == 0)
        assert metric(server, CLOSED, reason="handshake_timeout") == 64  # at 2 s, not 60
        for sock in held:
            sock.close()
        held = []
        assert browser_status() == 200

        # Handshakes begun and never finished (a ClientHello's first bytes): TLS state made for
        # each, held to the same deadline.
        for _ in range(64):
            held.append(socket.create_connection(("127.0.0.1", web), timeout=10,
                                                 source_address=("127.0.0.8", 0)))
            held[-1].sendall(PARTIAL_HELLO)
        wait_for(server, lambda: metric(server, CLOSED, reason="handshake_timeout") >= 128)
        assert metric(server, CLOSED, reason="handshake_timeout") == 128
        assert metric(server, "copas_web_connections") == 0
        for sock in held:
            sock.close()
        held = []
        assert browser_status() == 200
        after = rss_bytes(server.proc.pid) - before
        print(f"after 64 stalled handshakes: RSS +{after / 1e6:.1f} MB")
        assert after < 64 * SSL_BUFFER * 5 / 8, after  # not asyncio's 256 KiB each, kept
        assert server.stop(timeout=15) == 0
    finally:
        for sock in held:
            sock.close()
        server.kill9()


# ---------------------------------------------------------------- finding 2: slow readers

ATTACKERS = [f"127.0.1.{i}" for i in range(1, 18)]  # 17 addresses


async def new_tables(port: int, count: int) -> list[str]:
    tables = []
    for _ in range(count):
        status, created = await asyncio.to_thread(post_json, port, "CreateTable", {},
                                                  "127.0.0.1")
        assert status == 200, created
        tables.append(created["table"]["tableId"])
    return tables


async def test_streams_that_never_read_cannot_fill_the_web_port() -> None:
    """The finding: 17 addresses x 64 WatchTable streams that never read filled the port (none
    waits for headers, so none was evicted): every browser got 503. At a tenth of the scale
    (64 connections, 2 streams an address, 17 addresses trying 4 each), each address keeps
    its 2 streams, the rest are refused by the cap, and a browser gets the page and its
    calls."""
    async with web_port(web_max_connections=64, web_max_streams_per_address=2) as (running,
                                                                                  port):
        table = (await new_tables(port, 1))[0]
        streams = [await connect_from(port, address, watch_request(table))
                   for address in ATTACKERS for _ in range(4)]
        await until(lambda: sample(running, CLOSED, reason="streams_per_address") >= 17 * 2)
        assert sample(running, CLOSED, reason="streams_per_address") == 17 * 2
        # The gauge goes down as each refused connection's close is done (a moment later on a
        # busy machine): it settles at the streams kept.
        await until(lambda: sample(running, "copas_web_connections") <= 17 * 2)
        assert sample(running, "copas_web_connections") == 17 * 2
        assert await asyncio.to_thread(get_status, port) == 200
        status, _ = await asyncio.to_thread(post_json, port, "ListTables", {}, "127.0.0.1")
        assert status == 200
        assert sample(running, CLOSED, reason="full") == 0
        for _, writer in streams:
            writer.close()


async def test_a_port_full_of_streams_makes_room_from_the_address_holding_most() -> None:
    """At the global cap with every connection streaming, a newcomer takes the place of the
    oldest stream of the address that holds the most; an address holding as many as any
    other gets 503 (eviction never lets one address push out a lighter one)."""
    async with web_port(web_max_connections=8, web_max_streams_per_address=4) as (running,
                                                                                 port):
        table = (await new_tables(port, 1))[0]
        await until(lambda: sample(running, "copas_web_connections") == 0)
        held = {}
        for address, count in (("127.0.2.1", 4), ("127.0.2.2", 3), ("127.0.2.3", 1)):
            held[address] = [await connect_from(port, address, watch_request(table))
                             for _ in range(count)]
            for reader, _ in held[address]:  # each streams its snapshot: busy, not waiting
                assert (await read_head(reader, 5)).startswith(b"HTTP/1.1 200 ")
        assert sample(running, "copas_web_connections") == 8
        assert await asyncio.to_thread(get_status, port, "/", "127.0.2.9") == 200
        assert sample(running, CLOSED, reason="stream_evicted") == 1
        first, _first = held["127.0.2.1"][0]  # the heaviest address's oldest stream
        assert b"HTTP/1.1 503" not in await read_to_end(first, 5)
        await until(lambda: sample(running, "copas_web_connections") == 7)
        newcomer = await connect_from(port, "127.0.2.4", watch_request(table))
        assert (await read_head(newcomer[0], 5)).startswith(b"HTTP/1.1 200 ")
        # Full again: 127.0.2.2 holds 3, as many as the heaviest (127.0.2.1): refused.
        late, _late = await connect_from(port, "127.0.2.2", watch_request(table))
        assert (await read_to_end(late, 5)).startswith(b"HTTP/1.1 503 ")
        assert sample(running, CLOSED, reason="full") == 1
        assert sample(running, CLOSED, reason="stream_evicted") == 1
        for pairs in held.values():
            for _, writer in pairs:
                writer.close()
        newcomer[1].close()


@pytest.mark.parametrize("is_tls", [False, True], ids=["http", "tls"])
async def test_a_client_that_never_reads_its_answers_is_closed_at_the_write_deadline(
        is_tls: bool, tmp_path: Path) -> None:
    """Pipelined requests for the page's script (155 KB each) from a client that never reads:
    the answers pile up in the kernel, then in the server; once its output has not drained
    for the write deadline the connection is closed (aborted: the held output is dropped)."""
    tls, client_tls = certificates(tmp_path) if is_tls else ({}, None)
    async with web_port(web_write_timeout=0.5, **tls) as (running, port):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.bind(("127.0.0.40", 0))
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        _reader, writer = await asyncio.open_connection(
            sock=sock, ssl=client_tls, server_hostname="localhost" if is_tls else None)
        writer.write(b"GET /app.js HTTP/1.1\r\nHost: x\r\n\r\n" * 200)
        await until(lambda: sample(running, CLOSED, reason="write_timeout") == 1, timeout=20)
        await until(lambda: sample(running, "copas_web_connections") == 0)
        writer.close()
        if client_tls is None:
            assert await asyncio.to_thread(get_status, port) == 200
        else:
            assert await asyncio.to_thread(https_status, port, client_tls) == 200


async def test_mutual_tls_on_the_web_port_after_the_admission(tmp_path: Path) -> None:
    """The protocol's own TLS keeps --tls-client-ca: a browser without a client certificate
    is turned away in the handshake (and counted out), one with a certificate is served."""
    tls, client_tls = certificates(tmp_path)
    async with web_port(tls_client_ca=str(tmp_path / "ca.pem"), **tls) as (running, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_tls,
                                                      server_hostname="localhost")
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        with contextlib.suppress(ssl.SSLError, ConnectionError):
            assert await read_to_end(reader, 5) == b""
        writer.close()
        await until(lambda: sample(running, "copas_web_connections") == 0)
        client_tls.load_cert_chain(tmp_path / "client.pem", tmp_path / "client-key.pem")
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_tls,
                                                      server_hostname="localhost")
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (await read_head(reader, 5)).startswith(b"HTTP/1.1 200 ")
        writer.close()

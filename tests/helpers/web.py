"""HTTP/1.1 to a server's web port from a chosen loopback address (the whole 127.0.0.0/8 is
this machine's): a browser's requests, one connection each, and raw connections that send
only what a test says (half-sent requests, stalled bodies, streams held open)."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
from collections.abc import AsyncIterator
from typing import Any

from tests.helpers.servers import free_port, serving


def post_json(port: int, method: str, body: dict[str, Any], source: str,
              headers: dict[str, str] | None = None, service: str = "copas.v1.CopasService"
              ) -> tuple[int, dict[str, Any]]:
    """One Connect unary call of ``service`` in JSON from the address ``source``
    (127.0.0.0/8): its HTTP status and its JSON answer (the message, or the Connect error;
    ``{"text": ...}`` when the answer is not JSON)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10,
                                            source_address=(source, 0))
    try:
        connection.request("POST", f"/{service}/{method}", json.dumps(body),
                           {"content-type": "application/json", **(headers or {})})
        answer = connection.getresponse()
        body = answer.read()
        try:
            return answer.status, json.loads(body or b"{}")
        except ValueError:  # not Connect's answer (a 503 of the HTTP server's own)
            return answer.status, {"text": body.decode(errors="replace")}
    finally:
        connection.close()


def get_status(port: int, path: str = "/", source: str = "127.0.0.1") -> int:
    """The HTTP status of a GET of ``path`` from the address ``source``."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10,
                                            source_address=(source, 0))
    try:
        connection.request("GET", path)
        answer = connection.getresponse()
        answer.read()
        return answer.status
    finally:
        connection.close()


HALF_SENT = b"GET / HTTP/1.1\r\nHost: x\r\n"  # a request whose headers never end
FINISH = b"\r\n"  # ... until this ends them


async def connect_from(port: int, source: str, data: bytes = b""
                       ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A raw connection to the web port from the address ``source``, ``data`` sent on it."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
    if data:
        writer.write(data)
        await writer.drain()
    return reader, writer


async def read_to_end(reader: asyncio.StreamReader, timeout: float = 10.0) -> bytes:
    """What the server sends until it closes the connection (a reset counts as closed);
    TimeoutError when it is still open after ``timeout`` seconds."""
    chunks: list[bytes] = []
    async with asyncio.timeout(timeout):
        with contextlib.suppress(ConnectionResetError):
            while chunk := await reader.read(65536):
                chunks.append(chunk)
    return b"".join(chunks)


async def read_head(reader: asyncio.StreamReader, timeout: float = 10.0) -> bytes:
    """A response's status line and headers."""
    async with asyncio.timeout(timeout):
        return await reader.readuntil(b"\r\n\r\n")


def watch_request(table_id: str) -> bytes:
    """A Connect WatchTable call as raw HTTP/1.1: the connection stays busy while it streams."""
    message = json.dumps({"tableId": table_id}).encode()
    body = b"\x00" + len(message).to_bytes(4, "big") + message  # one enveloped message
    return (b"POST /copas.v1.CopasService/WatchTable HTTP/1.1\r\nHost: x\r\n"
            b"content-type: application/connect+json\r\n"
            b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


CLOSED = "copas_web_connections_closed_total"


@contextlib.asynccontextmanager
async def web_port(**options: Any) -> AsyncIterator[tuple[Any, int]]:
    """A server in this process with its web port on loopback: the server and the port."""
    port = free_port()
    async with serving(web_port=port, web_host="127.0.0.1", **options) as (running, _):
        yield running, port


def sample(running: Any, name: str, **labels: str) -> float:
    return running.metrics.registry.get_sample_value(name, labels) or 0.0


async def until(predicate: Any, timeout: float = 10.0) -> None:
    """Wait (polling the server's own books through its metrics) until ``predicate()``."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)

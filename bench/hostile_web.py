"""Flood 2 of issue 27 (streams that never read, on the web port) and the honest browser beside
it, for ``bench/hostile.py``. Everything speaks HTTP/1.1 from a loopback address of its own
(the whole of 127.0.0.0/8 is this machine's), as a browser does with Connect.

* The honest browser: four players (one address each) play a table over the web port, each
  with a keep-alive connection for its unary calls (PassCards, PlayCard in Connect's JSON,
  timed) and a WatchTable stream it reads, as the page does; beside them one more address
  fetches the page (``GET /``) on a fresh connection every ``PAGE_EVERY`` seconds.
* The slow readers (the finding: "17 addresses x 64 Connect WatchTable streams that never read
  fill the web port"): 17 addresses open 64 connections each, a WatchTable of the honest
  tables or a WatchLobby, read the answer's head and first message, then never read again.
  Each tries once, as flood 5's streams do; with ``retry`` (seconds), a refused one (a 503,
  or the stream's error) is tried again after that long (the 503 says retry-after: 1), which
  adds a flood of new connections to the finding's.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import socket
import time
from typing import Any

SLOW_ADDRESSES = [f"127.0.1.{i}" for i in range(1, 18)]  # 17 addresses ...
SLOW_PER_ADDRESS = 64  # ... of 64 connections each
PLAYER_ADDRESSES = [f"127.0.0.{2 + seat}" for seat in range(4)]
PAGE_ADDRESS = "127.0.0.9"
PAGE_EVERY = 0.2  # seconds between the page fetches
SERVICE = "/copas.v1.CopasService/"


def watch_body(table_id: str = "") -> bytes:
    """A streaming call's request body: one enveloped JSON message."""
    message = json.dumps({"tableId": table_id} if table_id else {}).encode()
    return b"\x00" + len(message).to_bytes(4, "big") + message


def request_bytes(method: str, path: str, body: bytes = b"",
                  headers: dict[str, str] | None = None) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "host: copas"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    if body or method == "POST":
        lines.append(f"content-length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def connect(port: int, source: str, receive_buffer: int = 0, limit: int = 65536
                  ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A TCP connection to the web port from ``source``; ``receive_buffer``: the kernel's
    receive buffer, small for a reader that does not read (0: the default)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        if receive_buffer:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        sock.bind((source, 0))
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    except BaseException:
        sock.close()
        raise
    return await asyncio.open_connection(sock=sock, limit=limit)


async def read_answer(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 answer: its status, headers (lower case) and body (by content-length,
    or chunked)."""
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    status = int(head[0].split()[1])
    headers = {}
    for line in head[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    if "content-length" in headers:
        return status, headers, await reader.readexactly(int(headers["content-length"]))
    chunks = []
    if headers.get("transfer-encoding") == "chunked":
        while size := int((await reader.readuntil(b"\r\n")).strip(), 16):
            chunks.append(await reader.readexactly(size))
            await reader.readexactly(2)
        await reader.readuntil(b"\r\n")
    return status, headers, b"".join(chunks)


class KeepAlive:
    """One keep-alive connection from ``source``, as a browser holds one for its calls; a
    call on a connection the server has closed meanwhile is sent again on a new one."""

    def __init__(self, port: int, source: str) -> None:
        self.port, self.source = port, source
        self._pair: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def call(self, method: str, message: dict[str, Any], token: str
                   ) -> tuple[int, dict[str, Any]]:
        """A Connect unary call in JSON: its HTTP status and JSON answer."""
        data = request_bytes("POST", SERVICE + method, json.dumps(message).encode(),
                             {"content-type": "application/json",
                              "authorization": f"Bearer {token}"})
        for attempt in range(2):
            if self._pair is None:
                self._pair = await connect(self.port, self.source)
            reader, writer = self._pair
            try:
                writer.write(data)
                await writer.drain()
                status, headers, body = await read_answer(reader)
            except (ConnectionError, asyncio.IncompleteReadError):
                self.close()
                if attempt:
                    raise
                continue
            if headers.get("connection") == "close":
                self.close()
            try:
                return status, json.loads(body or b"{}")
            except ValueError:
                return status, {"text": body.decode(errors="replace")}
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self._pair is not None:
            self._pair[1].close()
            self._pair = None


async def read_stream(port: int, source: str, table_id: str, token: str,
                      counts: dict[str, int], stop: asyncio.Event) -> None:
    """A player's WatchTable stream on the web port, read as the page reads it (opened again
    if the server ends it); counts its opening's statuses and the bytes read."""
    while not stop.is_set():
        try:
            reader, writer = await connect(port, source)
        except OSError:
            counts["stream_connect_failed"] += 1
            await asyncio.sleep(1.0)
            continue
        try:
            writer.write(request_bytes("POST", SERVICE + "WatchTable", watch_body(table_id),
                                       {"content-type": "application/connect+json",
                                        "authorization": f"Bearer {token}"}))
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head.split()[1])
            counts[f"stream_{status}"] += 1
            while chunk := await reader.read(65536):
                counts["stream_bytes"] += len(chunk)
        except (ConnectionError, asyncio.IncompleteReadError):
            counts["stream_reset"] += 1
        finally:
            writer.close()
        if not stop.is_set():
            await asyncio.sleep(1.0)


async def fetch_pages(port: int, latencies: list[float], counts: dict[str, int],
                      stop: asyncio.Event) -> None:
    """``GET /`` on a fresh connection every PAGE_EVERY seconds: the latency of each, its
    status counted."""
    while not stop.is_set():
        began = time.perf_counter()
        try:
            reader, writer = await connect(port, PAGE_ADDRESS)
            try:
                writer.write(request_bytes("GET", "/", headers={"connection": "close"}))
                status, _, _ = await read_answer(reader)
            finally:
                writer.close()
        except (OSError, asyncio.IncompleteReadError):
            status = 0
        latencies.append(time.perf_counter() - began)
        counts[f"page_{status}"] += 1
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), PAGE_EVERY)


async def slow_readers(port: int, table_ids: list[str], stop: asyncio.Event,
                       retry: float = 0.0) -> dict[str, int]:
    """Flood 2: SLOW_ADDRESSES x SLOW_PER_ADDRESS streams that stop reading once their first
    message is in; with ``retry``, each refused one is tried again after that many seconds."""
    counts = {"held": 0, "refused_503": 0, "refused_in_stream": 0, "closed": 0, "failed": 0}
    held: list[asyncio.StreamWriter] = []
    lobby = request_bytes("POST", SERVICE + "WatchLobby", watch_body(),
                          {"content-type": "application/connect+json"})
    watches = [request_bytes("POST", SERVICE + "WatchTable", watch_body(table_id),
                             {"content-type": "application/connect+json"})
               for table_id in table_ids]
    kinds = [*watches, lobby]

    async def slot(source: str, request: bytes) -> None:
        while not stop.is_set():
            try:
                reader, writer = await connect(port, source, receive_buffer=4096, limit=1024)
            except OSError:
                counts["failed"] += 1
                if not retry:
                    return
                await asyncio.sleep(retry)
                continue
            is_held = False
            try:
                writer.write(request)
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
                if int(head.split()[1]) != 200:
                    counts["refused_503"] += 1
                else:
                    await reader.readuntil(b"\r\n")  # the first chunk's size
                    flags = (await reader.readexactly(1))[0]
                    if flags & 0x02:  # Connect's end of stream: the call was refused
                        counts["refused_in_stream"] += 1
                    else:
                        is_held = True
                        counts["held"] += 1
                        held.append(writer)
                        await stop.wait()  # never read again
            except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
                counts["closed"] += 1
            finally:
                if not is_held:
                    writer.close()
            if not retry:
                return
            if not stop.is_set():
                await asyncio.sleep(retry)

    tasks = [asyncio.create_task(slot(address, kinds[i % len(kinds)]))
             for address in SLOW_ADDRESSES for i in range(SLOW_PER_ADDRESS)]
    await stop.wait()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for writer in held:
        writer.transport.abort()
    return counts


async def web_victim(port: int, table_id: str, tokens: list[str], replica: Any, moves: int
                     ) -> tuple[list[float], list[float], dict[str, int]]:
    """The honest browser: the table's four players play on over the web port, a move every
    25 ms (``bench/flood.py``'s victim, in Connect's JSON), each reading its WatchTable
    stream, while the page is fetched beside them. Returns each PlayCard's latency (a call
    refused with 503 or 429 is sent again after a second, the wait counted in it), each page
    fetch's, and the counts of statuses."""
    counts: collections.Counter[str] = collections.Counter()
    stop = asyncio.Event()
    tasks = [asyncio.create_task(read_stream(port, PLAYER_ADDRESSES[seat], table_id,
                                             tokens[seat], counts, stop))
             for seat in range(4)]
    pages: list[float] = []
    tasks.append(asyncio.create_task(fetch_pages(port, pages, counts, stop)))
    players = [KeepAlive(port, address) for address in PLAYER_ADDRESSES]
    latencies: list[float] = []
    number = 0
    try:
        while len(latencies) < moves and not replica.is_over:
            await asyncio.sleep(0.025)
            number += 1
            seat = replica.to_act()[0]
            action = replica.auto_action(seat)
            is_play = replica.phase.value == "PLAYING"
            message: dict[str, Any] = {"tableId": table_id,
                                       "requestId": f"move-{number}"}
            if is_play:
                message["card"] = {"text": str(action.card)}
            else:
                message["cards"] = [{"text": str(card)} for card in action.cards]
            began = time.perf_counter()
            while True:
                status, answer = await players[seat].call(
                    "PlayCard" if is_play else "PassCards", message, tokens[seat])
                if status == 200:
                    break
                counts[f"call_{status}"] += 1
                if status not in (429, 503):
                    raise RuntimeError(f"the honest move was refused: {status} {answer}")
                await asyncio.sleep(1.0)
            if is_play:
                latencies.append(time.perf_counter() - began)
            replica.apply(action)
    finally:
        stop.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for player in players:
            player.close()
    return latencies, pages, dict(counts)

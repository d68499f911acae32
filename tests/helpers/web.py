"""HTTP/1.1 to a server's web port the way a browser's requests arrive: from a chosen loopback
address (the whole 127.0.0.0/8 is this machine's), one connection per request."""

from __future__ import annotations

import http.client
import json
from typing import Any


def post_json(port: int, method: str, body: dict[str, Any], source: str,
              headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    """One Connect unary call in JSON from the address ``source`` (127.0.0.0/8): its HTTP
    status and its JSON answer (the message, or the Connect error)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10,
                                            source_address=(source, 0))
    try:
        connection.request("POST", f"/copas.v1.CopasService/{method}", json.dumps(body),
                           {"content-type": "application/json", **(headers or {})})
        answer = connection.getresponse()
        return answer.status, json.loads(answer.read() or b"{}")
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

"""The web port's Connect codecs: Protocol Buffers binary (the page's) as connectrpc has it, and
JSON that keeps its last encodings, so one message sent to many streams (a table's event to
each of its spectators) is turned into JSON once, not once per stream.

``MessageToJson`` is the web port's costliest step: with ~200 JSON streams of two tables
(``bench/hostile.py``'s flood 2, streams that never read) it took 30% of the server's time,
once per stream for the same event. A message is known by its type and its deterministic bytes
(``SerializeToString``, in C, costs a small part of the JSON), so a kept encoding is exactly
the JSON the message would have had.
"""

from __future__ import annotations

from typing import Any

from connectrpc.codec import Codec
from connectrpc.compat import google_protobuf_binary_codec, google_protobuf_json_codec
from google.protobuf.message import Message

from server.bounded import Bounded

ENCODINGS_KEPT = 256  # the last messages' JSON (a table's event, for its spectators' streams)
MAX_KEPT_BYTES = 16 * 1024  # a larger message (a long snapshot) is encoded each time


class SharedJSONCodec:
    """connectrpc's JSON codec for google.protobuf messages, each message's encoding kept for
    the next stream sending the same message (the last ``kept``, of at most MAX_KEPT_BYTES
    each: a few MB at most)."""

    def __init__(self, kept: int = ENCODINGS_KEPT) -> None:
        self._json: Codec[Any, Any] = google_protobuf_json_codec()
        self._kept: Bounded[tuple[str, bytes], bytes] = Bounded(kept, is_lru=True)

    def name(self) -> str:
        return self._json.name()

    def encode(self, message: Message) -> bytes:
        data = message.SerializeToString(deterministic=True)
        if len(data) > MAX_KEPT_BYTES:
            return self._json.encode(message)
        key = (message.DESCRIPTOR.full_name, data)
        known = self._kept.get(key)
        if known is None:
            known = self._kept[key] = self._json.encode(message)
        return known

    def decode(self, data: bytes | bytearray, message_class: type[Any]) -> Any:
        return self._json.decode(data, message_class)


def web_codecs() -> list[Codec[Any, Any]]:
    """The codecs of the web port's applications (one JSON codec shared by all)."""
    return [google_protobuf_binary_codec(), SharedJSONCodec()]

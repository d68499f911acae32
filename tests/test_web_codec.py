"""The web port's JSON codec (server/rpc/web_codec.py): each message's Connect JSON is exactly
google.protobuf's, and a message sent to many streams (a table's event to each of its JSON
spectators) is encoded once; what it keeps is bounded."""

from __future__ import annotations

from typing import Any

import pytest
from copas.v1 import cards_pb2, copas_pb2
from google.protobuf import json_format

from server.rpc.web_codec import MAX_KEPT_BYTES, SharedJSONCodec


@pytest.fixture
def encodings(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The messages google.protobuf is asked to turn into JSON, in order."""
    asked: list[Any] = []
    encode = json_format.MessageToJson

    def counted(message: Any, *args: Any, **kwargs: Any) -> str:
        asked.append(message)
        return encode(message, *args, **kwargs)

    monkeypatch.setattr("connectrpc.compat._codec.MessageToJson", counted)
    return asked


def event(sequence: int) -> copas_pb2.WatchTableResponse:
    return copas_pb2.WatchTableResponse(event=copas_pb2.TableEvent(
        sequence=sequence, card_played=copas_pb2.CardPlayed(seat=2, card=cards_pb2.Card(
            text="QS"))))


def test_an_event_for_many_streams_is_encoded_once_as_google_protobuf_would(
        encodings: list[Any]) -> None:
    codec = SharedJSONCodec()
    assert codec.name() == "json"
    first = [codec.encode(event(7)) for _ in range(64)]  # 64 spectators, one event each
    assert first == [json_format.MessageToJson(event(7)).encode()] * 64
    assert len(encodings) == 1
    assert codec.encode(event(8)) == json_format.MessageToJson(event(8)).encode()
    assert len(encodings) == 2
    assert codec.decode(first[0], copas_pb2.WatchTableResponse) == event(7)


def test_the_same_bytes_of_another_type_are_another_message(encodings: list[Any]) -> None:
    codec = SharedJSONCodec()
    empty = [copas_pb2.ListTablesRequest(), copas_pb2.GetViewRequest()]  # both b""
    assert [codec.encode(m) for m in empty] == [b"{}", b"{}"]
    assert [type(m) for m in encodings] == [type(m) for m in empty]


def test_what_the_codec_keeps_is_bounded(encodings: list[Any]) -> None:
    codec = SharedJSONCodec(kept=4)
    for sequence in range(6):
        codec.encode(event(sequence))
    codec.encode(event(5))  # kept
    codec.encode(event(0))  # forgotten: the oldest went when the fifth came
    assert [m.event.sequence for m in encodings] == [0, 1, 2, 3, 4, 5, 0]
    big = copas_pb2.WatchTableResponse(event=copas_pb2.TableEvent(
        snapshot=copas_pb2.Snapshot(missed_events=[event(n).event for n in range(2000)])))
    assert len(big.SerializeToString()) > MAX_KEPT_BYTES
    codec.encode(big)
    codec.encode(big)  # too large to keep: encoded each time
    assert len(encodings) == 9

"""A finished game's record as the contract shows it (``copas.v1.GameRecord``), made once
when the game ends and stored serialized, so GetGameRecord serves it as it is."""

from __future__ import annotations

import dataclasses

from copas.v1 import copas_pb2

from server import games
from server.store.base import GameRecord, RecordSummary
from server.tokens import pseudonym
from server.wire import timestamp


def record_to_pb(summary: RecordSummary, record: GameRecord | None = None
                 ) -> copas_pb2.GameRecord:
    """A record's message (its game's module fills in the rules and the result); with the
    whole ``record``, its JSON rides along (what ``copas replay`` reads) and its actions are
    counted."""
    message = copas_pb2.GameRecord(
        record_id=summary.record_id, table_id=summary.table_id,
        display_name=summary.display_name, preset=summary.preset,
        create_time=timestamp(summary.created),
        finish_time=timestamp(summary.finished), seed=str(summary.seed), rating=summary.rating,
        championship_id=summary.championship)
    games.get(summary.game).record_to_pb(summary, message)
    if record is not None:
        message.record_json = record.to_json(is_public=True)
        message.action_count = len(record.actions)
    return message


def record_message(record: GameRecord) -> bytes:
    """The serialized GameRecord GetGameRecord answers with."""
    return record_to_pb(record.summary, record).SerializeToString()


def record_message_of_json(record_json: str) -> bytes:
    """The same, for a record stored before its message was (schema version 2)."""
    return record_message(GameRecord.from_json(record_json))


def with_pseudonyms(record: GameRecord) -> GameRecord:
    """A record kept before records named their seats by pseudonym (the tables' SQLite schema
    3, PostgreSQL's 7) with each signed-in seat named as a record made now names it
    (``server.tokens.pseudonym`` of the record and the seat's account)."""
    summary = record.summary
    seats = tuple(seat if seat.player or not seat.account_id else
                  dataclasses.replace(seat, player=pseudonym(summary.record_id, seat.account_id))
                  for seat in summary.seats)
    return dataclasses.replace(record, summary=dataclasses.replace(summary, seats=seats))

"""Reactions (issue 30): one of a few fixed reactions (``copas.v1.Reaction``, no free text:
nothing to moderate), shown by its person's seat on every stream of the table.

A reaction is not a game event and changes nothing at the table: it is neither logged nor
numbered (it repeats the table's latest sequence, as a presence event does), so it needs no
step and no commit of its own. It is staged on the table's fan-out after whatever the table
staged before it (so it comes in order, once that is durable), with the view of each watched
seat, and is then forgotten: nothing is held per reaction but its staged message, and the
rate of each seat is bounded by the servicer (``Quotas.admit_reaction``)."""

from __future__ import annotations

from typing import cast

from copas.v1 import copas_pb2

from server.errors import ServiceError
from server.tables import views
from server.tables.table import Table
from server.wire import timestamp

REACTIONS = frozenset(copas_pb2.Reaction.values()) - {copas_pb2.REACTION_UNSPECIFIED}


def check(reaction: int) -> copas_pb2.Reaction.ValueType:
    """``reaction`` when it is one of the fixed reactions, else INVALID_ARGUMENT."""
    if reaction not in REACTIONS:
        names = ", ".join(copas_pb2.Reaction.Name(r) for r in sorted(REACTIONS))
        raise ServiceError.invalid(f"reaction must be one of {names}", "INVALID_REACTION")
    return cast("copas_pb2.Reaction.ValueType", reaction)


def check_seated(table: Table, seat: int) -> None:
    """PERMISSION_DENIED SEAT_HAS_LEFT when ``seat``'s person left its game: the server plays
    for that seat now, and nobody reacts for it."""
    if table.game is not None and table.game.has_left[seat]:
        raise ServiceError.denied("you left this game: your seat is played by the server and "
                                  "shows no reactions", "SEAT_HAS_LEFT")


def show(table: Table, seat: int, reaction: copas_pb2.Reaction.ValueType) -> None:
    """Stage ``seat``'s reaction for every stream of ``table`` (none open: nothing)."""
    seats = table.fanout.seats_watching()
    if not seats:
        return
    event = copas_pb2.TableEvent(
        sequence=table.sequence, time=timestamp(table.now()), is_last_in_action=True,
        reaction_shown=copas_pb2.ReactionShown(seat=seat, reaction=reaction))
    shared = views.public_bytes(table)
    table.fanout.stage_live((table.sequence, event.SerializeToString()),
                            {s: views.view_bytes(table, shared, s) for s in seats})

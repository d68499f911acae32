"""What a table may ask of the world: its owner (``TableHost``, the registry of one node's
tables) and its log in the store (``TableLog``). Both are given at construction, and are all
a table knows of either (boardgame.io's ``Master`` receives its storage and transport the
same way)."""

from __future__ import annotations

from typing import Protocol, TypeVar

from server.store.base import GameRecord

# The table a host is told about: the host knows the table's type, the table never the host's.
TableT_contra = TypeVar("TableT_contra", contravariant=True)


class TableHost(Protocol[TableT_contra]):
    """What a table may ask of its owner (the registry of one node's tables)."""

    @property
    def is_stopping(self) -> bool:
        """The server is stopping: connections that end are not news."""

    def check_room_for_player(self) -> None:
        """:raises ServiceError: the server has no room for another seated person."""

    def slot_taken(self) -> None:
        """A person took a --max-players slot."""

    def slot_freed(self) -> None:
        """A person gave theirs back (left, gave the seat up, or the game ended)."""

    def token_issued(self, token_hash: str, table_id: str, seat: int, join_key: str) -> None:
        """A seat's token now opens ``table_id``; ``join_key`` finds the join by request id."""

    def seat_given_up(self, token_hash: str, table_id: str, join_key: str, request_id: str,
                      sequence: int) -> None:
        """The token of a seat given up before its game stops working."""

    def token_removed(self, token_hash: str, table_id: str, join_key: str) -> None:
        """An operator took the token's holder out of a running game: it stops working."""

    def table_changed(self, table: TableT_contra) -> None:
        """A step ended: show its events once durable (and the lobby's change)."""

    def table_finished(self, table: TableT_contra) -> None:
        """The game ended (once)."""

    def table_idle(self, table: TableT_contra) -> None:
        """A waiting table nobody is at: it may go."""


class TableLog(Protocol):
    """What a table writes to the store."""

    def check_writable(self) -> None: ...
    def append(self, table_id: str, entry: str) -> int: ...
    def note_sequence(self, table_id: str, sequence: int) -> None: ...
    def delete_entry(self, table_id: str, n: int) -> None: ...
    def finish_table(self, table_id: str, record: GameRecord) -> None: ...

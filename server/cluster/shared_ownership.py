"""What this node's tables share with the other nodes through the database: where each valid
token belongs (so any node finds the seat), what every node's lobby shows of each table, and
the lease that says whether this node may serve at all. ``tables.ownership.OwnershipPort`` is
the protocol; the writes ride in the same commit as the change they describe (fenced like it)."""

from __future__ import annotations

from typing import Protocol

from server.cluster.ownership import Lease
from server.store.postgres import LobbyEntry, LobbyState
from server.tables.lobby import LobbyKey, lobby_key
from server.tables.views import TableFacts, summary


class SharedWrites(Protocol):
    """The writes a commit carries for the other nodes (``server.store.postgres.PgStore``),
    and the tables whose writes a commit refused (another node owns them now)."""

    def register_token(self, token_hash: str, table_id: str, seat: int,
                       join_key: str = "") -> None: ...

    def forget_token(self, token_hash: str, table_id: str) -> None: ...

    def update_lobby(self, entry: LobbyEntry) -> None: ...

    def take_fenced(self) -> set[str]: ...


class ClusterOwnership:
    def __init__(self, store: SharedWrites, lease: Lease) -> None:
        self._store = store
        self._lease = lease
        self._shown: dict[str, LobbyKey] = {}  # each held table's lobby key, as last written

    def check_serving(self) -> None:
        self._lease.check()

    def token_issued(self, token_hash: str, table_id: str, seat: int, join_key: str) -> None:
        self._store.register_token(token_hash, table_id, seat, join_key)

    def token_revoked(self, token_hash: str, table_id: str) -> None:
        self._store.forget_token(token_hash, table_id)

    def share_summary(self, table: TableFacts) -> None:
        """Write the table's lobby entry when what the lobby shows of it changed."""
        if table.is_released:
            self._shown.pop(table.id, None)  # its row goes with the table
            return
        key = lobby_key(table)
        if self._shown.get(table.id) == key:
            return
        self._shown[table.id] = key
        state: LobbyState = ("joinable" if table.is_waiting and table.has_free_seat()
                             else "finished" if table.is_finished else "playing")
        self._store.update_lobby(LobbyEntry(table.id, summary(table).SerializeToString(),
                                            state, table.preset, table.rules.players))

    def take_lost(self) -> set[str]:
        lost = self._store.take_fenced()
        for table_id in lost:
            self._shown.pop(table_id, None)
        return lost

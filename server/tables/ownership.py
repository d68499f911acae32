"""``OwnershipPort``: what this node's tables share with the other nodes of a cluster (where a
token belongs, what the lobby shows of a table) and ask of them (may this node serve now?
which of its tables did another node take?). One process shares nothing: ``LocalOwnership``.
The cluster's lives in ``server.cluster.shared_ownership``."""

from __future__ import annotations

from typing import Protocol

from server.tables.views import TableFacts


class OwnershipPort(Protocol):
    def check_serving(self) -> None:
        """:raises ServiceError: this node may not serve or make tables now."""

    def token_issued(self, token_hash: str, table_id: str, seat: int, join_key: str) -> None:
        """A seat's token is valid (written with the join's commit); ``join_key``: the
        JoinTable request that took the seat ("" without one)."""

    def token_revoked(self, token_hash: str, table_id: str) -> None: ...

    def share_summary(self, table: TableFacts) -> None:
        """A step of the table ended, or it left this node (what the lobby shows of it may
        have changed)."""

    def take_lost(self) -> set[str]:
        """The tables another node took from this one since the last call (their writes
        were refused): they must go from memory before anyone hears of their commits."""


class LocalOwnership:
    """One process: every table is this node's, and nothing needs sharing."""

    def check_serving(self) -> None:
        return None

    def token_issued(self, token_hash: str, table_id: str, seat: int, join_key: str) -> None:
        return None

    def token_revoked(self, token_hash: str, table_id: str) -> None:
        return None

    def share_summary(self, table: TableFacts) -> None:
        return None

    def take_lost(self) -> set[str]:
        return set()

"""Who sits where: each valid player token's table and seat, the tokens of seats given up
before their game (with the LeaveTable answer a retry gets), and the JoinTable request ids
that seated people (so a retried join finds its table). Everything here is bounded."""

from __future__ import annotations

from server.bounded import Bounded

MEMORY = 10_000  # given-up seats and spent JoinTable request ids remembered


class Seating:
    def __init__(self) -> None:
        self.tokens: dict[str, tuple[str, int]] = {}  # token hash -> (table_id, seat)
        self.joins: dict[str, str] = {}  # JoinTable request key -> table_id
        # Seats given up before their game: the token's LeaveTable answer (request id,
        # sequence), and the JoinTable keys that took them.
        # A token an operator removed has no answer (request id None).
        self._revoked: Bounded[str, tuple[str | None, int]] = Bounded(MEMORY)
        self._spent_joins: Bounded[str, None] = Bounded(MEMORY)
        self._expired: Bounded[str, None] = Bounded(MEMORY)  # reservations not taken up

    def seat_of(self, token_hash: str) -> tuple[str, int] | None:
        return self.tokens.get(token_hash)

    def is_revoked(self, token_hash: str) -> bool:
        return token_hash in self._revoked

    def is_spent(self, join_key: str) -> bool:
        return join_key in self._spent_joins

    def seated(self, token_hash: str, table_id: str, seat: int, join_key: str) -> None:
        self.tokens[token_hash] = (table_id, seat)
        if join_key:
            self.joins[join_key] = table_id

    def given_up(self, token_hash: str, join_key: str, request_id: str, sequence: int) -> None:
        """A seat given up before its game: its token stops working; its LeaveTable answer
        and spent JoinTable request are remembered."""
        self.tokens.pop(token_hash, None)
        self.joins.pop(join_key, None)
        self._revoked[token_hash] = (request_id, sequence)
        if join_key:
            self._spent_joins[join_key] = None

    def was_removed(self, token_hash: str) -> bool:
        known = self._revoked.get(token_hash)
        return known is not None and known[0] is None

    def removed(self, token_hash: str, join_key: str) -> None:
        """An operator took the token's holder out of a game: the token stops working and
        the JoinTable request that seated them is spent."""
        self.tokens.pop(token_hash, None)
        self.joins.pop(join_key, None)
        self._revoked[token_hash] = (None, -1)
        if join_key:
            self._spent_joins[join_key] = None

    def expired(self, token_hash: str, join_key: str) -> None:
        """A quick-match reservation not taken up in time: its token stops working and the
        JoinTable request that made it is spent."""
        self.given_up(token_hash, join_key, "", -1)
        self._expired[token_hash] = None

    def has_expired(self, token_hash: str) -> bool:
        return token_hash in self._expired

    def first_answer_of_revoked(self, token_hash: str, request_id: str) -> int | None:
        known = self._revoked.get(token_hash)
        return known[1] if known is not None and known[0] == request_id else None

    def forget(self, token_hashes: list[str], join_keys: list[str]) -> None:
        """A table left this node: its tokens and join requests go with it."""
        for token_hash in token_hashes:
            self.tokens.pop(token_hash, None)
        for key in join_keys:
            self.joins.pop(key, None)

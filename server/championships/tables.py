"""What the driver asks of the tables: make a round's table, seat an account at it (again,
after a restart: the same seat and token), make a seat leave, close it, show it. ``TablePort``
is that narrow port; ``LocalTables`` serves it from this node's registry. Every call is
idempotent by its request id, so a driver that dies mid-seating and seats the round again
gets the same tables and seats back."""

from __future__ import annotations

import contextlib
import hashlib
from typing import Protocol

from copas.v1 import copas_pb2

from server import games
from server.errors import ServiceError
from server.games import GameRules
from server.tables.registry import TableRegistry


class TablePort(Protocol):
    def create(self, *, request_id: str, name: str, preset: str, rules: GameRules,
               seed: int, championship: str = "", is_duplicate: bool = False,
               game: str = "") -> str:
        """The table's id (the same for the same request id), a table of ``game`` ("" for
        the default game) for ``championship`` (with duplicate deals: watched by its players
        only)."""
    def join(self, table_id: str, seat: int, name: str, account_id: str,
             request_id: str) -> str:
        """Seats ``account_id`` at ``seat``; its player token (the same for the same
        request id, even once the game has started)."""
    def leave(self, table_id: str, seat: int) -> None:
        """The seat's person leaves the running game (the server plays it from now on)."""
    def close(self, table_id: str) -> None:
        """Ends the running game now (CLOSED)."""
    def time_up(self, table_id: str) -> None:
        """Ends the running game now (TIME_LIMIT: its round's time limit passed)."""
    def hold(self, table_id: str, is_held: bool) -> None:
        """Holds the running game (nobody acts, no clock runs), or releases it."""
    def here(self) -> dict[str, set[str]]:
        """The tables of championships on this node whose games are not over, by
        championship."""
    def summary(self, table_id: str) -> copas_pb2.TableSummary | None:
        """The table as a spectator sees it, when it is here."""
    async def committed(self) -> None:
        """Returns once everything done so far is on disk."""


def _fingerprint(*parts: object) -> str:
    return hashlib.sha256("/".join(str(p) for p in parts).encode()).hexdigest()


class LocalTables:
    """The ``TablePort`` of one node: its own registry."""

    def __init__(self, registry: TableRegistry) -> None:
        self._registry = registry

    def create(self, *, request_id: str, name: str, preset: str, rules: GameRules,
               seed: int, championship: str = "", is_duplicate: bool = False,
               game: str = "") -> str:
        table = self._registry.create(
            preset=preset, overrides=games.get(game).rules_as_overrides(rules), bot_seats=0,
            name=name, seed=str(seed), request_id=request_id,
            fingerprint=_fingerprint("championship-table", request_id, seed),
            is_server_seed=True, championship=championship,
            is_spectating_closed=is_duplicate, game=game)
        return table.id

    def join(self, table_id: str, seat: int, name: str, account_id: str,
             request_id: str) -> str:
        table = self._registry.get(table_id)
        _, token = table.join(name, seat, request_id,
                              _fingerprint("championship-seat", table_id, seat, account_id),
                              account_id)
        return token

    def leave(self, table_id: str, seat: int) -> None:
        table = self._registry.get(table_id)
        if table.game is None or table.game.is_over or table.game.has_left[seat]:
            return
        table.act(seat, table.game_module.leave(seat))

    def close(self, table_id: str) -> None:
        with contextlib.suppress(ServiceError):  # over already, or gone
            self._registry.get(table_id).close_by_operator()

    def time_up(self, table_id: str) -> None:
        with contextlib.suppress(ServiceError):  # over already, or gone
            self._registry.get(table_id).end_by_time_limit()

    def hold(self, table_id: str, is_held: bool) -> None:
        with contextlib.suppress(ServiceError):  # over already, or gone
            self._registry.get(table_id).hold(is_held)

    def here(self) -> dict[str, set[str]]:
        found: dict[str, set[str]] = {}
        for table in self._registry.live():
            championship = table.meta.championship
            if championship and not table.is_finished and not table.is_released:
                found.setdefault(championship, set()).add(table.id)
        return found

    def summary(self, table_id: str) -> copas_pb2.TableSummary | None:
        try:
            return self._registry.get(table_id).summary()
        except ServiceError:
            return None

    async def committed(self) -> None:
        await self._registry.delivery.committed()

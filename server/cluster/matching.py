"""The table a call means without naming it, found across the cluster: a quick match's (the
oldest waiting table of its kind, with someone seated and a free seat, on any node) and a
retried request's (the table a CreateTable or JoinTable ``request_id`` made or seated, on
any node). The gateway routes the call to that table's owner as if the request named it; the
owner then answers it as one node does (its own quick match, its own memory of the request),
so a relayed quick match is never matched again.

Two nodes asked for the same kind at the same moment, with no table of that kind anywhere,
may each open one (neither has committed its table when the other looks): the next player
asking joins the older of them. No lock across nodes is taken for a quick match.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from copas.v1 import copas_pb2

from server.cluster.queries import ClusterQueries
from server.errors import ServiceError
from server.tables.idempotency import request_key
from server.tables.registry import TableRegistry
from server.tables.table import JOIN_SCOPE

CANDIDATES = 16  # waiting tables of a kind read per quick match (the oldest first)


def _has_person(summary: copas_pb2.TableSummary) -> bool:
    return any(s.is_taken and not s.is_bot for s in summary.seats)


class ClusterMatch:
    def __init__(self, registry: TableRegistry, queries: ClusterQueries,
                 spend_lookup: Callable[[], None]) -> None:
        self._registry = registry
        self._queries = queries
        self._spend_lookup = spend_lookup  # the node's budget of database reads (routing)
        self.matched_elsewhere = 0  # quick matches sent to a table another node held

    async def implied_table(self, method: str, request: Any) -> str:
        """The table the call means ("": none, serve it here as one node would).

        :raises ServiceError: RATE_LIMITED for a request with a request_id when the node's
            lookups are spent (without one, a quick match is then matched here instead).
        """
        request_id: str = getattr(request, "request_id", "")
        if method == "CreateTable":
            if not request_id:
                return ""
            create_key = request_key("create", request_id)
            if self._registry.remembers(create_key, ""):
                return ""
            self._spend_lookup()
            return await asyncio.to_thread(self._queries.table_of_request, create_key, "") or ""
        if method != "JoinTable" or request.table_id or not request.preset:
            return ""
        if request_id:  # a retry is answered where its seat is, or refused: never seated twice
            join_key = request_key(JOIN_SCOPE, request_id)
            if self._registry.remembers("", join_key):
                return ""
            self._spend_lookup()
            seated = await asyncio.to_thread(self._queries.table_of_request, "", join_key)
            if seated:
                return seated
        try:
            self._spend_lookup()
            players = request.players if request.HasField("players") else 0
            partnerships = request.partnerships if request.HasField("partnerships") else None
            rules = self._registry.quick_match_rules_pb(request.preset, players or None,
                                                        request.game, partnerships)
            rows = await asyncio.to_thread(self._queries.joinable, request.preset,
                                           rules.players, CANDIDATES)
        except ServiceError as error:
            if error.reason == "RATE_LIMITED":
                return ""  # over budget: matched among this node's tables
            raise
        for table_id, data in rows:
            summary = copas_pb2.TableSummary.FromString(data)
            # Only a table a quick match could have opened: the preset's rules, no bots.
            if _has_person(summary) and summary.rules == rules \
                    and not any(s.is_bot for s in summary.seats):
                if not self._registry.holds(table_id):
                    self.matched_elsewhere += 1
                return table_id
        return ""

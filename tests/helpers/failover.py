"""People who play through an outage as a careful client does: each action has a request_id
and is sent again, the same, until a server answers it (so an action the store committed
before a node went away is answered, not taken twice); every acknowledged action is kept,
and every refusal by its kind. For the tests of a PostgreSQL failover."""

from __future__ import annotations

import asyncio
import collections
import time
import uuid
from dataclasses import dataclass
from typing import Any

import grpc
from copas.v1 import copas_pb2
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from tests.helpers.calls import auth

# What a client waits out and sends again: the node or the database away, a node starting.
TRANSIENT = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
             grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.CANCELLED)
# Channels that look for a restarted node at once, not after gRPC's growing back-off.
CHANNEL_OPTIONS = (("grpc.initial_reconnect_backoff_ms", 100),
                   ("grpc.min_reconnect_backoff_ms", 100),
                   ("grpc.max_reconnect_backoff_ms", 500))


def is_unreachable(error: grpc.aio.AioRpcError) -> bool:
    """The client's own channel found no server there (no process listening: a node between
    its exit and its restart), as opposed to a server's answer."""
    details = error.details() or ""
    return error.code() == grpc.StatusCode.UNAVAILABLE and (
        "failed to connect" in details or "Connection refused" in details
        or "connections to all backends failing" in details)


def reason(error: grpc.aio.AioRpcError) -> str:
    """The ErrorInfo reason of a server's refusal ("" for none: a bare status)."""
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    for detail in status.details if status is not None else ():
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            return info.reason
    return ""


@dataclass(frozen=True)
class Acked:
    """An action a server acknowledged: what it was, and the sequence it was answered."""

    table_id: str
    seat: int
    sequence: int
    action: dict[str, Any]  # as a game record's JSON has it (engine.action_to_json)
    request_id: str
    at: float  # time.monotonic() of the answer


class People:
    """Four people at one table, each acting in turn through ``stub`` with unary calls, a
    ``pace`` between two of their actions: a seat to act plays its first legal card (passes
    its first three, shoots for the others), until the game is over."""

    def __init__(self, stub: Any, table_id: str, tokens: dict[int, str],
                 pace: float) -> None:
        self.stub, self.table_id, self.tokens, self.pace = stub, table_id, tokens, pace
        self.acked: list[Acked] = []
        self.refusals: collections.Counter[tuple[str, str]] = collections.Counter()
        self.examples: dict[tuple[str, str], str] = {}  # a refusal's message, by kind
        self.unreachable = 0  # calls that found no server listening
        self.retried = 0  # requests sent again after no answer
        self.is_over = False
        self.progress = asyncio.Event()

    async def run(self) -> None:
        while not self.is_over:
            for seat, token in self.tokens.items():
                if not self.is_over:
                    await self._turn(seat, token)

    async def _turn(self, seat: int, token: str) -> None:
        try:
            view = (await self.stub.GetView(
                copas_pb2.GetViewRequest(table_id=self.table_id), metadata=auth(token),
                timeout=5)).view
        except grpc.aio.AioRpcError as error:
            self._refused(error)
            await asyncio.sleep(0.1)
            return
        if view.phase == copas_pb2.PHASE_GAME_OVER:
            self.is_over = True
            return
        if seat not in view.to_act:
            return
        request_id = f"ha-{uuid.uuid4().hex}"
        if view.phase == copas_pb2.PHASE_PASSING:
            cards = list(view.legal_cards)[:3]
            method, message = self.stub.PassCards, copas_pb2.PassCardsRequest(
                table_id=self.table_id, cards=cards, request_id=request_id)
            action: dict[str, Any] = {"type": "pass", "seat": seat,
                                      "cards": [c.text for c in cards]}
        elif view.phase == copas_pb2.PHASE_MOON_CHOICE:
            method, message = self.stub.ChooseMoon, copas_pb2.ChooseMoonRequest(
                table_id=self.table_id, choice=copas_pb2.MOON_CHOICE_ADD_TO_OTHERS,
                request_id=request_id)
            action = {"type": "moon", "seat": seat, "choice": "ADD_TO_OTHERS"}
        else:
            card = view.legal_cards[0]
            method, message = self.stub.PlayCard, copas_pb2.PlayCardRequest(
                table_id=self.table_id, card=card, request_id=request_id)
            action = {"type": "play", "seat": seat, "card": card.text}
        sequence = await self._until_answered(method, message, token)
        if sequence is not None:
            self.acked.append(Acked(self.table_id, seat, sequence, action, request_id,
                                    time.monotonic()))
            self.progress.set()
            await asyncio.sleep(self.pace)

    async def _until_answered(self, method: Any, message: Any, token: str) -> int | None:
        """The request sent until a server answers it; its sequence, or None when it was
        refused for good (a refusal that is no outage: kept in ``refusals``)."""
        while True:
            try:
                answer = await method(message, metadata=auth(token), timeout=5)
                return int(answer.sequence)
            except grpc.aio.AioRpcError as error:
                self._refused(error)
                if error.code() not in TRANSIENT:
                    return None
                self.retried += 1
                await asyncio.sleep(0.1)

    def _refused(self, error: grpc.aio.AioRpcError) -> None:
        if is_unreachable(error):
            self.unreachable += 1
            return
        kind = (error.code().name, reason(error))
        self.refusals[kind] += 1
        self.examples.setdefault(kind, error.details() or "")


async def until_acked(people: list[People], count: int) -> None:
    """Until the people have ``count`` acknowledged actions in all."""
    while sum(len(p.acked) for p in people) < count:
        for p in people:
            p.progress.clear()
        await asyncio.wait([asyncio.create_task(p.progress.wait()) for p in people],
                           return_when=asyncio.FIRST_COMPLETED)

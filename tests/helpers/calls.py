"""Calls and streams against a server on loopback: cards and tokens as the wire has them, a
WatchTable stream read in the background, tables made and played through to a point."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable
from typing import Any

import grpc
from copas.v1 import cards_pb2, copas_pb2, copas_pb2_grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from engine import Card


def card_pb(card: Card | str) -> cards_pb2.Card:
    return cards_pb2.Card(text=str(card))


def cards_text(cards: Any) -> list[str]:
    return [c.text for c in cards]


def quota_details(error: grpc.aio.AioRpcError) -> tuple[str, str, float]:
    """(ErrorInfo reason, QuotaFailure subject, RetryInfo seconds) of a refusal."""
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    assert status is not None, "no rich status"
    reason, subject, retry = "", "", -1.0
    for detail in status.details:
        info, quota, delay = (error_details_pb2.ErrorInfo(), error_details_pb2.QuotaFailure(),
                              error_details_pb2.RetryInfo())
        if detail.Unpack(info):
            reason = info.reason
        elif detail.Unpack(quota):
            subject = quota.violations[0].subject
        elif detail.Unpack(delay):
            retry = delay.retry_delay.ToNanoseconds() / 1e9
    return reason, subject, retry


def auth(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


class Watch:
    """A WatchTable stream read by a background task into ``messages``."""

    def __init__(self, stub: copas_pb2_grpc.CopasServiceStub, table_id: str,
                 token: str | None = None, after_sequence: int = 0,
                 check: Callable[[copas_pb2.TableEvent], None] | None = None,
                 is_batched: bool = False) -> None:
        self.messages: list[copas_pb2.TableEvent] = []  # batched: each batch's events
        self.batches: list[copas_pb2.EventBatch] = []  # batched: the messages as they came
        self.changed = asyncio.Condition()
        self.check = check
        self.error: grpc.aio.AioRpcError | None = None
        self.call = stub.WatchTable(
            copas_pb2.WatchTableRequest(table_id=table_id, after_sequence=after_sequence,
                                        is_batched=is_batched),
            metadata=auth(token) if token else None)
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        try:
            async for response in self.call:
                if response.HasField("batch"):
                    self.batches.append(response.batch)
                events = list(response.batch.events) if response.HasField("batch") \
                    else [response.event]
                for event in events:
                    if self.check:
                        self.check(event)
                async with self.changed:
                    self.messages.extend(events)
                    self.changed.notify_all()
        except grpc.aio.AioRpcError as error:
            self.error = error
            async with self.changed:
                self.changed.notify_all()

    async def wait_for(self, predicate: Callable[[copas_pb2.TableEvent], bool],
                       start: int = 0, timeout: float = 10.0) -> copas_pb2.TableEvent:
        async def find() -> copas_pb2.TableEvent:
            async with self.changed:
                index = start
                while True:
                    while index < len(self.messages):
                        if predicate(self.messages[index]):
                            return self.messages[index]
                        index += 1
                    if self.error is not None or self.task.done():
                        raise AssertionError(f"stream ended: {self.error}")
                    await self.changed.wait()
        return await asyncio.wait_for(find(), timeout)

    async def opened(self) -> copas_pb2.TableEvent:
        """The stream's first message: once it is here, the server sends this stream every
        later event (an event before it is only in the snapshot)."""
        return await self.wait_for(lambda m: True)

    def latest(self) -> copas_pb2.TableEvent:
        return self.messages[-1]

    def kinds(self) -> list[str]:
        return [m.WhichOneof("kind") or "" for m in self.messages]

    async def close(self) -> None:
        self.call.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


def is_over(m: copas_pb2.TableEvent) -> bool:
    """The game is over: the GameOver event, or the snapshot of a stream opened after it."""
    return m.view.phase == copas_pb2.PHASE_GAME_OVER


async def new_table(stub: copas_pb2_grpc.CopasServiceStub, *, preset: str = "online",
                    seed: str | None = "1", bots: int = 0, **rules: Any) -> copas_pb2.TableSummary:
    overrides = {"trick_pause_seconds": 0.0, "hand_pause_seconds": 0.0,
                 "play_timeout_seconds": 0.0, "pass_timeout_seconds": 0.0,
                 "moon_timeout_seconds": 0.0} | rules
    request = copas_pb2.CreateTableRequest(
        preset=preset, bot_seats=bots, display_name="test",
        rules=copas_pb2.RulesOverrides(**overrides))
    if seed is not None:
        request.seed = seed
    return (await stub.CreateTable(request)).table


async def finished_bot_table(stub: copas_pb2_grpc.CopasServiceStub, **options: Any
                             ) -> copas_pb2.TableSummary:
    """A table of four bots, once its game is over (bots move in steps of their own)."""
    table = await new_table(stub, bots=4, **options)
    watch = Watch(stub, table.table_id)
    await watch.wait_for(is_over, timeout=30)
    await watch.close()
    return (await stub.GetTable(copas_pb2.GetTableRequest(table_id=table.table_id))).table


async def join_all(stub: copas_pb2_grpc.CopasServiceStub, table_id: str, count: int
                   ) -> list[copas_pb2.JoinTableResponse]:
    """``count`` people join, as the reference client does: each join has a request id and is
    sent again while the answer is UNAVAILABLE (a relayed call whose node did not answer in
    time on a loaded machine), so a join the owner took is answered, not taken twice."""
    joined = []
    number = 0  # P0, P1...: a name another person at the table has is passed over
    while len(joined) < count:
        request = copas_pb2.JoinTableRequest(table_id=table_id, display_name=f"P{number}",
                                             request_id=f"join-{uuid.uuid4().hex}")
        number += 1
        for attempt in range(20):
            try:
                joined.append(await stub.JoinTable(request))
                break
            except grpc.aio.AioRpcError as error:
                if error.code() == grpc.StatusCode.ALREADY_EXISTS:  # NAME_TAKEN
                    break
                if error.code() != grpc.StatusCode.UNAVAILABLE or attempt == 19:
                    raise
                await asyncio.sleep(0.25)
    return joined


PHASES = {"PASSING": copas_pb2.PHASE_PASSING, "PLAYING": copas_pb2.PHASE_PLAYING,
          "MOON_CHOICE": copas_pb2.PHASE_MOON_CHOICE}


async def play_seat_until(stub: copas_pb2_grpc.CopasServiceStub, table_id: str, token: str,
                          watch: Watch, replica: Any, seat: int,
                          stop: Callable[[Any], bool]) -> None:
    """Play ``seat`` with the engine's automatic choices (read from the server's view), and
    advance the replica for the other seats, until ``stop(replica)``."""
    from engine import ChooseMoon, PassCards, PlayCard

    while not replica.is_over and not stop(replica):
        if seat not in replica.to_act():
            replica.apply(replica.auto_action(replica.to_act()[0]), is_automatic=True)
            continue
        h, t, k = replica.hand_number, replica.trick_number, len(replica.trick_cards)
        phase = PHASES[replica.phase.value]
        await watch.wait_for(
            lambda m: m.view.hand_number == h and m.view.trick_number == t
            and len(m.view.trick.cards) == k and seat in m.view.to_act
            and m.view.phase == phase)
        action = replica.auto_action(seat)
        meta = auth(token)
        if isinstance(action, PassCards):
            await stub.PassCards(copas_pb2.PassCardsRequest(
                table_id=table_id, cards=[card_pb(c) for c in action.cards]), metadata=meta)
        elif isinstance(action, PlayCard):
            await stub.PlayCard(copas_pb2.PlayCardRequest(
                table_id=table_id, card=card_pb(action.card)), metadata=meta)
        else:
            assert isinstance(action, ChooseMoon)
            return  # the caller decides the moon
        replica.apply(action)


async def drive(stub: copas_pb2_grpc.CopasServiceStub, table_id: str, tokens: dict[int, str],
                watches: dict[int, Watch], replica: Any,
                stop: Callable[[Any], bool] = lambda g: False,
                request_ids: dict[int, str] | None = None) -> list[Any]:
    """Play every human seat (``tokens``) with the engine's automatic choices, waiting for
    each seat's view to ask; bots are advanced in the replica. Returns the acknowledged
    responses. ``request_ids`` maps a replica action index to the request_id to use."""
    from engine import ChooseMoon, PassCards, PlayCard

    answers = []
    while not replica.is_over and not stop(replica):
        bot = next((s for s in replica.to_act() if s not in tokens), None)
        if bot is not None:  # the server lets bots act at once, before anyone else
            replica.apply(replica.auto_action(bot), is_automatic=True)
            continue
        seat = replica.to_act()[0]
        h, t, k = replica.hand_number, replica.trick_number, len(replica.trick_cards)
        phase = PHASES[replica.phase.value]
        await watches[seat].wait_for(
            lambda m, seat=seat: m.view.hand_number == h and m.view.trick_number == t
            and len(m.view.trick.cards) == k and seat in m.view.to_act
            and m.view.phase == phase and not m.view.HasField("paused_until"), timeout=20)
        action = replica.auto_action(seat)
        meta = auth(tokens[seat])
        rid = (request_ids or {}).get(len(replica.actions), "")
        if isinstance(action, PassCards):
            answer = await stub.PassCards(copas_pb2.PassCardsRequest(
                table_id=table_id, cards=[card_pb(c) for c in action.cards], request_id=rid),
                metadata=meta, timeout=15)
        elif isinstance(action, PlayCard):
            answer = await stub.PlayCard(copas_pb2.PlayCardRequest(
                table_id=table_id, card=card_pb(action.card), request_id=rid), metadata=meta,
                timeout=15)
        else:
            assert isinstance(action, ChooseMoon)
            answer = await stub.ChooseMoon(copas_pb2.ChooseMoonRequest(
                table_id=table_id, choice=copas_pb2.MOON_CHOICE_ADD_TO_OTHERS,
                request_id=rid), metadata=meta)
        replica.apply(action)
        answers.append(answer)
    return answers


def flatten(batch: copas_pb2.EventBatch) -> list[copas_pb2.PlayResponse]:
    """A batch as the messages of a stream that is not batched: its events, then its results."""
    return [*(copas_pb2.PlayResponse(event=e) for e in batch.events),
            *(copas_pb2.PlayResponse(result=r) for r in batch.results)]


class PlayStream:
    """A Play stream read by a background task: ``events`` (TableEvents) and ``results``
    (PlayResults) as they came, and ``messages`` (each event or result, in order). Batched
    (``is_batched``), ``batches`` holds the messages as they came, and ``messages`` each
    batch's events then its results."""

    def __init__(self, stub: copas_pb2_grpc.CopasServiceStub, table_id: str, token: str | None,
                 after_sequence: int = 0, is_batched: bool = False) -> None:
        self.call = stub.Play(metadata=auth(token) if token else None)
        self.messages: list[copas_pb2.PlayResponse] = []
        self.batches: list[copas_pb2.EventBatch] = []
        self.changed = asyncio.Condition()
        self.error: grpc.aio.AioRpcError | None = None
        self.opening = copas_pb2.PlayRequest(open=copas_pb2.WatchTableRequest(
            table_id=table_id, after_sequence=after_sequence, is_batched=is_batched))
        self.opened = asyncio.Event()  # the opening is written: actions may follow
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        try:
            await self.call.write(self.opening)
            self.opened.set()
            async for response in self.call:
                async with self.changed:
                    if response.WhichOneof("kind") == "batch":
                        self.batches.append(response.batch)
                        self.messages.extend(flatten(response.batch))
                    else:
                        self.messages.append(response)
                    self.changed.notify_all()
        except grpc.aio.AioRpcError as error:
            self.error = error
        except asyncio.InvalidStateError:  # the call ended while writing the opening
            pass
        async with self.changed:
            self.changed.notify_all()

    @property
    def events(self) -> list[copas_pb2.TableEvent]:
        return [m.event for m in self.messages if m.WhichOneof("kind") == "event"]

    @property
    def results(self) -> list[copas_pb2.PlayResult]:
        return [m.result for m in self.messages if m.WhichOneof("kind") == "result"]

    async def wait_for(self, predicate: Callable[[copas_pb2.PlayResponse], bool],
                       start: int = 0, timeout: float = 10.0) -> copas_pb2.PlayResponse:
        async def find() -> copas_pb2.PlayResponse:
            async with self.changed:
                index = start
                while True:
                    while index < len(self.messages):
                        if predicate(self.messages[index]):
                            return self.messages[index]
                        index += 1
                    if self.task.done():
                        raise AssertionError(f"stream ended: {self.error}")
                    await self.changed.wait()
        return await asyncio.wait_for(find(), timeout)

    async def wait_event(self, predicate: Callable[[copas_pb2.TableEvent], bool],
                         timeout: float = 10.0) -> copas_pb2.TableEvent:
        found = await self.wait_for(lambda m: m.WhichOneof("kind") == "event"
                                    and predicate(m.event), timeout=timeout)
        return found.event

    async def send(self, **action: Any) -> None:
        await asyncio.wait_for(self.opened.wait(), 10)
        await self.call.write(copas_pb2.PlayRequest(**action))

    async def act(self, timeout: float = 10.0, **action: Any) -> copas_pb2.PlayResult:
        """Send one action and wait for its result (the next result on the stream)."""
        count = len(self.results)
        await self.send(**action)
        await self.wait_for(lambda m: len(self.results) > count, timeout=timeout)
        return self.results[count]

    async def ended(self, timeout: float = 10.0) -> grpc.aio.AioRpcError | None:
        await asyncio.wait_for(asyncio.shield(self.task), timeout)
        return self.error

    async def close(self) -> None:
        self.call.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


async def play_out(stub: copas_pb2_grpc.CopasServiceStub, table_id: str,
                   tokens: dict[int, str], stop: Callable[[copas_pb2.TableView], bool]
                   = lambda view: False) -> copas_pb2.TableView:
    """Play every seat of ``tokens`` by its own hand through unary calls, reading each seat's
    view: the first three legal cards to pass, the first legal card to play, "add to the
    others" at a moon; other seats (bots, absent people) are left to the server. Until the
    game is over (or ``stop(view)``); returns the last view read."""
    while True:
        acted = False
        for seat, token in tokens.items():
            view = (await stub.GetView(copas_pb2.GetViewRequest(table_id=table_id),
                                       metadata=auth(token))).view
            if view.phase == copas_pb2.PHASE_GAME_OVER or stop(view):
                return view
            if seat not in view.to_act or view.HasField("paused_until"):
                continue
            meta = auth(token)
            try:
                if view.phase == copas_pb2.PHASE_PASSING:
                    await stub.PassCards(copas_pb2.PassCardsRequest(
                        table_id=table_id, cards=list(view.legal_cards[:3])), metadata=meta)
                elif view.phase == copas_pb2.PHASE_PLAYING:
                    await stub.PlayCard(copas_pb2.PlayCardRequest(
                        table_id=table_id, card=view.legal_cards[0]), metadata=meta)
                elif view.phase == copas_pb2.PHASE_MOON_CHOICE:
                    await stub.ChooseMoon(copas_pb2.ChooseMoonRequest(
                        table_id=table_id, choice=copas_pb2.MOON_CHOICE_ADD_TO_OTHERS),
                        metadata=meta)
                acted = True
            except grpc.aio.AioRpcError as error:  # the table moved on meanwhile (a timer)
                if error.code() != grpc.StatusCode.FAILED_PRECONDITION:
                    raise
        if not acted:
            await asyncio.sleep(0.01)  # a bot's or a timer's turn: the server acts

"""The reference clients' own logic, without a server: fakes stand in for the stubs, and
refusals are built as grpc.aio raises them (status code, details, trailer)."""

from __future__ import annotations

import asyncio
import io
import re
from typing import Any

import grpc
from copas.v1 import copas_pb2
from google.protobuf import any_pb2, duration_pb2
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2
from rich.console import Console

from clients.common import (
    ActionRequest,
    ActionResponse,
    Player,
    PlaySession,
    error_reason,
    retry_delay,
)
from clients.play import Lines, Session
from clients.watch import list_tables

DETAILS = "grpc-status-details-bin"


def refusal(code: grpc.StatusCode, details: str, *detail_messages: Message,
            trailer: bytes | None = None) -> grpc.aio.AioRpcError:
    """A refused call as grpc.aio raises it, its google.rpc.Status in the trailer."""
    if trailer is None:
        status = status_pb2.Status(code=code.value[0], message=details)
        for message in detail_messages:
            packed = any_pb2.Any()
            packed.Pack(message)
            status.details.append(packed)
        trailer = status.SerializeToString()
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata((DETAILS, trailer)),
                                details=details)


def test_error_reason_reads_the_error_info_of_the_trailer() -> None:
    error = refusal(grpc.StatusCode.FAILED_PRECONDITION, "follow suit",
                    error_details_pb2.ErrorInfo(reason="MUST_FOLLOW_SUIT"))
    assert error_reason(error) == "MUST_FOLLOW_SUIT"


def test_error_reason_is_the_status_code_when_the_trailer_does_not_parse() -> None:
    error = refusal(grpc.StatusCode.FAILED_PRECONDITION, "?", trailer=b"\xff\xff\xff")
    assert error_reason(error) == "FAILED_PRECONDITION"


def test_error_reason_ignores_a_status_of_another_code() -> None:
    status = status_pb2.Status(code=grpc.StatusCode.NOT_FOUND.value[0])
    packed = any_pb2.Any()
    packed.Pack(error_details_pb2.ErrorInfo(reason="TABLE_NOT_FOUND"))
    status.details.append(packed)
    error = refusal(grpc.StatusCode.UNAVAILABLE, "", trailer=status.SerializeToString())
    assert error_reason(error) == "UNAVAILABLE"


def test_retry_delay_is_the_retry_info_of_a_quota_refusal_only() -> None:
    wait = error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration(seconds=1,
                                                                          nanos=500_000_000))
    assert retry_delay(refusal(grpc.StatusCode.RESOURCE_EXHAUSTED, "slow down", wait)) == 1.5
    assert retry_delay(refusal(grpc.StatusCode.UNAVAILABLE, "later", wait)) is None
    assert retry_delay(refusal(grpc.StatusCode.RESOURCE_EXHAUSTED, "full")) is None


class PagingStub:
    """ListTables over ``count`` tables, in pages cut as the server cuts them (20 by
    default, at most 100)."""

    def __init__(self, count: int) -> None:
        self.count = count

    async def ListTables(self, request: copas_pb2.ListTablesRequest
                         ) -> copas_pb2.ListTablesResponse:
        start = int(request.page_token or 0)
        end = min(start + min(request.page_size or 20, 100), self.count)
        return copas_pb2.ListTablesResponse(
            tables=[copas_pb2.TableSummary(table_id=f"t{i}") for i in range(start, end)],
            next_page_token=str(end) if end < self.count else "")


async def test_watch_lists_at_most_limit_tables() -> None:
    stub = PagingStub(1000)
    for limit in (50, 100, 150, 250):
        out = io.StringIO()
        # A fake of the one RPC list_tables calls, not a CopasServiceStub:
        await list_tables(stub, Console(file=out, width=200), limit)  # type: ignore[arg-type]
        assert len(re.findall(r"\bt\d+\b", out.getvalue())) == limit


class RefusedLeave(Player):
    """A seat whose every action is refused: the game ended meanwhile."""

    # One body for the four overloads of Player._call (every call is refused):
    async def _call(  # type: ignore[override]
            self, method: str, request: ActionRequest) -> ActionResponse:
        raise refusal(grpc.StatusCode.FAILED_PRECONDITION, "the game is over",
                      error_details_pb2.ErrorInfo(reason="WRONG_PHASE"))


async def test_copas_play_says_why_it_could_not_leave_instead_of_crashing() -> None:
    lines = Lines.__new__(Lines)  # typed lines without stdin's thread
    lines.queue = asyncio.Queue()
    lines.queue.put_nowait("y")
    out = io.StringIO()
    player = RefusedLeave(None, "t1", 0, "token")  # type: ignore[arg-type]  # no stub called
    session = Session(Console(file=out, width=200), player, lines)
    assert await session.confirm_leave() is False
    assert "could not leave: WRONG_PHASE: the game is over" in out.getvalue()


class _CutCall:
    """A Play call as grpc.aio gives one: it yields ``events``, then (``is_cut``) ends
    INTERNAL ("Internal error from Core": a stream a drained node cut), else ends OK."""

    def __init__(self, events: list[copas_pb2.TableEvent], is_cut: bool) -> None:
        self.events = events
        self.is_cut = is_cut
        self.written: list[copas_pb2.PlayRequest] = []

    async def write(self, request: copas_pb2.PlayRequest) -> None:
        self.written.append(request)

    def cancel(self) -> bool:
        return True

    def __aiter__(self) -> Any:
        return self._responses()

    async def _responses(self) -> Any:
        for event in self.events:
            yield copas_pb2.PlayResponse(event=event)
        if self.is_cut:
            raise grpc.aio.AioRpcError(grpc.StatusCode.INTERNAL, grpc.aio.Metadata(),
                                       grpc.aio.Metadata(), "Internal error from Core")


async def test_a_play_session_resumes_after_a_stream_ends_internal() -> None:
    """Issue 27, finding 7e: INTERNAL on a Play stream counts as UNAVAILABLE: the session
    opens a new stream after the last sequence seen, instead of failing."""
    seen = copas_pb2.TableEvent(sequence=7, snapshot=copas_pb2.Snapshot())
    calls = [_CutCall([seen], is_cut=True),
             _CutCall([copas_pb2.TableEvent(sequence=8)], is_cut=False)]
    opened: list[_CutCall] = []

    class Stub:
        def Play(self, metadata: Any = None) -> _CutCall:
            opened.append(calls.pop(0))
            return opened[-1]

    session = PlaySession(Stub(), "t_cut", "x" * 32)  # type: ignore[arg-type]
    session.start()
    got = [event.sequence async for event in session.events()]
    assert got == [7, 8] and len(opened) == 2
    assert opened[1].written[0].open.after_sequence == 7
    await session.close()

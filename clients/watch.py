"""`copas watch`: list the tables, or follow one as a spectator."""

from __future__ import annotations

import argparse

import grpc
from copas.v1 import copas_pb2, copas_pb2_grpc
from rich.console import Console
from rich.table import Table

from clients.common import (
    add_server_arguments,
    channel,
    connection,
    has_view,
    is_game_over,
    watch,
)
from clients.render import PHASE_TEXT, event_line, render

REDRAW_ON: frozenset[str] = frozenset({  # TableEvent kinds (its oneof) that redraw
    "snapshot", "trick_won", "hand_scored", "game_over", "cards_exchanged"})


async def list_tables(stub: copas_pb2_grpc.CopasServiceStub, console: Console,
                      limit: int) -> None:
    table = Table(title="tables (newest first)")
    for col in ("table_id", "name", "preset", "players", "phase", "hand", "seats"):
        table.add_column(col)
    token, shown = "", 0
    while shown < limit:
        page = await stub.ListTables(copas_pb2.ListTablesRequest(
            page_size=min(100, limit - shown), page_token=token, include_finished=True))
        for t in page.tables:
            seats = ", ".join((s.display_name or "·") + ("*" if s.is_bot else "")
                              for s in t.seats)
            table.add_row(t.table_id, t.display_name, t.preset, str(t.rules.players),
                          PHASE_TEXT.get(t.phase, "?"), str(t.hand_number + 1), seats)
            shown += 1
        token = page.next_page_token
        if not token:
            break
    console.print(table)


async def watch_main(args: argparse.Namespace) -> int:
    console = Console(highlight=False)
    async with channel(connection(args)) as ch:
        stub = copas_pb2_grpc.CopasServiceStub(ch)
        try:
            if not args.table:
                await list_tables(stub, console, args.limit)
                return 0
            view = copas_pb2.TableView()
            redraw = False
            async for event in watch(stub, args.table):
                if has_view(event):  # batched: the commit's view is on its last event
                    view = event.view
                if event.WhichOneof("kind") == "snapshot":  # what came since (coalesced)
                    if event.snapshot.has_gap:
                        console.print("(earlier events are no longer kept)")
                    for missed in event.snapshot.missed_events:
                        missed_line = event_line(missed, view)
                        if missed_line is not None:
                            console.print(missed_line)
                line = event_line(event, view)
                if line is not None:
                    console.print(line)
                redraw = redraw or event.WhichOneof("kind") in REDRAW_ON
                if redraw and has_view(event):
                    console.print(render(view, f"table {args.table} (spectator)"))
                    redraw = False
                if is_game_over(event):
                    break
        except grpc.aio.AioRpcError as error:
            console.print(f"copas watch: {error.code().name}: {error.details()}")
            return 1
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_server_arguments(parser)
    parser.add_argument("--table", help="follow this table; without it, list the tables")
    parser.add_argument("--limit", type=int, default=50, help="tables to list")

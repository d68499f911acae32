"""`copas admin`: the operators' commands (copas.admin.v1.AdminService).

The server must have been started with --admin-token-file (or --admin-subjects, mutual TLS).
Give the same token with --token-file FILE or the COPAS_ADMIN_TOKEN environment variable (or
a client certificate with --cert/--key). Output is a table; --json prints the answer as JSON.

  copas admin status                       the node: version, lease, store, tables, settings
  copas admin tables [--stuck]             every table of every phase (newest first)
  copas admin table TABLE_ID               one table: seats, timers, latest events
  copas admin close TABLE_ID --reason TEXT end its game now (reason CLOSED, record kept)
  copas admin remove TABLE_ID SEAT --reason TEXT
                                           revoke a person's token; a bot plays the seat
  copas admin drain                        take no new tables or seats here (a cluster
                                           node hands its tables over)
  copas admin undrain                      take them again
  copas admin championship create --name NAME --rounds N ... --reason TEXT
                                           a championship (no quota), open for registration
  copas admin championship start|cancel ID --reason TEXT
                                           start it now, or cancel it (its games end CLOSED)
  copas admin championship remove-player ID ACCOUNT_ID --reason TEXT
                                           take a player out (withdrawn after the start)
  copas admin championship pause|resume ID --reason TEXT
                                           hold its tables and seat no round / go on
  copas admin championship correct ID ROUND TABLE --totals 5,10,0,11 [--leavers 1]
                                  [--no-shows 2] --reason TEXT
                                           set a counted table's result (seats 0-based; with
                                           --leavers or --no-shows, who left and who never
                                           came, else as counted)
  copas admin championship disqualify ID PLAYER --reason TEXT
                                           out of the next rounds, ranked last (PLAYER: its
                                           account a_... or player id p_...)
  copas admin championship reseat ID ROUND PLAYER_A PLAYER_B --reason TEXT
                                           swap two players of an announced round

On the node's machine, from its files (no server call, no token; run as the server's user):

  copas admin backup [--data-dir DIR] DEST  a consistent backup of a node's SQLite data
                                           into the new directory DEST, while it runs
  copas admin restore BACKUP [--data-dir DIR]
                                           copy a backup, verified, into a new or empty
                                           data directory; then start the server on it
"""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
from copas.admin.v1 import admin_pb2, admin_pb2_grpc
from google.protobuf import json_format
from google.protobuf.message import Message
from rich.console import Console
from rich.table import Table

from clients.championship import add_settings_arguments, print_championship, settings_from
from clients.common import DEFAULT_SERVER, error_reason
from clients.render import PHASE_TEXT

TOKEN_ENV = "COPAS_ADMIN_TOKEN"

# `backup` and `restore` work on a node's files, not through the admin service: their code is
# the server's store (server.store.backup), which clients/ never imports; `copas`
# (tools/cli.py) puts it here, each command's runner by its name.
LOCAL_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}


def _add_connection(parser: argparse.ArgumentParser, *, after: bool = False) -> None:
    """Where and how to connect; ``after``: the same options after the command, which
    override those before it only when given."""
    def default(value: object) -> object:
        return argparse.SUPPRESS if after else value
    parser.add_argument("--server", default=default(DEFAULT_SERVER),
                        help="host:port of the server")
    parser.add_argument("--tls", action="store_true", default=default(False),
                        help="connect with TLS")
    parser.add_argument("--ca", default=default(""),
                        help="PEM file of the CA to trust (implies --tls)")
    parser.add_argument("--token-file", default=default(""),
                        help=f"file whose first line is the admin token (else ${TOKEN_ENV})")
    parser.add_argument("--cert", default=default(""),
                        help="PEM client certificate (mutual TLS)")
    parser.add_argument("--key", default=default(""), help="PEM private key of --cert")
    parser.add_argument("--json", action="store_true", default=default(False),
                        help="print the answer as JSON")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _add_connection(parser)
    # The same options after the command too (`copas admin status --server H:P`).
    shared = argparse.ArgumentParser(add_help=False)
    _add_connection(shared, after=True)
    commands = parser.add_subparsers(dest="admin_command", required=True)

    def command(name: str, text: str) -> argparse.ArgumentParser:
        return commands.add_parser(name, help=text, parents=[shared])
    command("status", "the node's state and settings")
    tables = command("tables", "every table of every phase")
    tables.add_argument("--stuck", action="store_true", help="only stuck tables")
    tables.add_argument("--limit", type=int, default=100, help="at most this many")
    one = command("table", "one table: seats, timers, latest events")
    one.add_argument("table_id")
    close = command("close", "end a table's game now")
    close.add_argument("table_id")
    close.add_argument("--reason", required=True, help="why (for the audit log)")
    remove = command("remove", "take a person out of a table")
    remove.add_argument("table_id")
    remove.add_argument("seat", type=int)
    remove.add_argument("--reason", required=True, help="why (for the audit log)")
    command("drain", "take no new tables or seats on this node")
    command("undrain", "take new tables and seats again")
    account = command("account", "an account, by its id or username")
    account.add_argument("query")
    for name, text in (("rename", "rename an account"), ("revoke", "end its sessions"),
                       ("ban", "ban an account (its seats played as leavers')"),
                       ("unban", "lift a ban"), ("delete", "delete an account on request")):
        acting = command(name, text)
        acting.add_argument("account_id")
        if name == "rename":
            acting.add_argument("display_name")
        acting.add_argument("--reason", required=True, help="why (for the audit log)")
    championship = command("championship", "create, start, cancel, pause, resume a "
                                           "championship; correct a result; disqualify, "
                                           "remove a player; re-seat an announced round")
    champ = championship.add_subparsers(dest="championship_command", required=True)
    made = champ.add_parser("create", help="a championship (no quota)", parents=[shared])
    add_settings_arguments(made)
    for name, text in (("start", "start it now (3 players at least)"),
                       ("cancel", "cancel it: its running games end CLOSED"),
                       ("remove-player", "take a player out (withdrawn after the start)"),
                       ("pause", "hold its running tables, seat no round, stop its time limit"),
                       ("resume", "go on after a pause (each held turn gets its whole time)"),
                       ("correct", "set a counted table's result"),
                       ("disqualify", "out of the next rounds, ranked last, results kept"),
                       ("reseat", "swap two players of an announced round")):
        acting = champ.add_parser(name, help=text, parents=[shared])
        acting.add_argument("championship_id")
        if name == "remove-player":
            acting.add_argument("account_id", help="the player's account (a_...)")
        if name == "disqualify":
            acting.add_argument("player", help="the player's account (a_...) or player id "
                                               "(p_...)")
        if name in ("correct", "reseat"):
            acting.add_argument("round", type=int, help="the round (rounds + 1: the final)")
        if name == "correct":
            acting.add_argument("table", type=int, help="the table's number in the round")
            acting.add_argument("--totals", type=_seats_list, required=True,
                                help="game points by seat, comma-separated")
            acting.add_argument("--leavers", type=_seats_list, default=None,
                                help="seats that left, in the order they left")
            acting.add_argument("--no-shows", type=_seats_list, default=None,
                                help="seats whose players never came")
        if name == "reseat":
            acting.add_argument("player_a", help="a player (a_... or p_...)")
            acting.add_argument("player_b", help="the player at another table to swap with")
    for acting in champ.choices.values():
        acting.add_argument("--reason", required=True, help="why (for the audit log)")
    local = commands.add_parser("backup", help="a consistent backup of a node's SQLite data "
                                               "while it runs (on its machine)")
    local.add_argument("dest", help="the new directory to write the backup in")
    restore = commands.add_parser("restore", help="copy a backup into a new or empty data "
                                                  "directory (on the node's machine)")
    restore.add_argument("backup", help="the backup's directory")
    for made, text in ((local, "the data directory to back up: the server's --data-dir"),
                       (restore, "the new or empty directory to restore into, the server's "
                                 "--data-dir to be")):
        made.add_argument("--data-dir", default="data", help=f"{text} (default: data)")
        made.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                          help="print the backup's manifest as JSON")


def _seats_list(text: str) -> list[int]:
    """``"5,10,0,11"`` as numbers ("" for none)."""
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not comma-separated numbers: {text!r}") from None


async def _championship_call(call: Callable[[Callable[..., Awaitable[Any]], Message],
                                            Awaitable[Any]],
                             stub: admin_pb2_grpc.AdminServiceStub,
                             args: argparse.Namespace) -> Any:
    command, cid = args.championship_command, getattr(args, "championship_id", "")
    if command == "create":
        return await call(stub.CreateChampionship, admin_pb2.CreateChampionshipRequest(
            settings=settings_from(args), request_id=uuid.uuid4().hex, reason=args.reason))
    if command == "start":
        return await call(stub.StartChampionship, admin_pb2.StartChampionshipRequest(
            championship_id=cid, reason=args.reason))
    if command == "cancel":
        return await call(stub.CancelChampionship, admin_pb2.CancelChampionshipRequest(
            championship_id=cid, reason=args.reason))
    if command in ("pause", "resume"):
        return await call(stub.PauseChampionship, admin_pb2.PauseChampionshipRequest(
            championship_id=cid, is_paused=command == "pause", reason=args.reason))
    if command == "correct":
        absences = args.leavers is not None or args.no_shows is not None
        return await call(stub.CorrectChampionshipResult,
                          admin_pb2.CorrectChampionshipResultRequest(
                              championship_id=cid, round_number=args.round,
                              table_number=args.table, totals=args.totals,
                              set_absences=absences, leaver_seats=args.leavers or [],
                              no_show_seats=args.no_shows or [], reason=args.reason))
    if command == "disqualify":
        return await call(stub.DisqualifyChampionshipPlayer,
                          admin_pb2.DisqualifyChampionshipPlayerRequest(
                              championship_id=cid, player=args.player, reason=args.reason))
    if command == "reseat":
        return await call(stub.ReseatChampionshipRound, admin_pb2.ReseatChampionshipRoundRequest(
            championship_id=cid, round_number=args.round, player_a=args.player_a,
            player_b=args.player_b, reason=args.reason))
    return await call(stub.RemoveChampionshipPlayer, admin_pb2.RemoveChampionshipPlayerRequest(
        championship_id=cid, account_id=args.account_id, reason=args.reason))


def _token(args: argparse.Namespace) -> str:
    if args.token_file:
        lines = Path(args.token_file).read_text(encoding="utf-8").splitlines()
        return lines[0].strip() if lines else ""
    return os.environ.get(TOKEN_ENV, "").strip()


def _channel(args: argparse.Namespace) -> grpc.aio.Channel:
    if not (args.tls or args.ca or args.cert):
        return grpc.aio.insecure_channel(args.server)
    root = Path(args.ca).read_bytes() if args.ca else None
    key = Path(args.key).read_bytes() if args.key else None
    cert = Path(args.cert).read_bytes() if args.cert else None
    return grpc.aio.secure_channel(args.server, grpc.ssl_channel_credentials(root, key, cert))


def _seats(seats: Any) -> str:
    out = []
    for s in seats:
        if not s.is_taken:
            out.append("·")
            continue
        marks = "*" if s.is_bot else ("" if s.is_connected else " (away)")
        out.append(f"{s.display_name}{marks}{' (left)' if s.has_left else ''}")
    return ", ".join(out)


def _tables(console: Console, tables: list[admin_pb2.AdminTable]) -> None:
    grid = Table(title="tables (newest first)")
    for col in ("table_id", "name", "phase", "hand", "age", "idle", "node", "stuck",
                "bots", "seats"):
        grid.add_column(col)
    for t in tables:
        grid.add_row(t.table_id, t.display_name, PHASE_TEXT.get(t.phase, "?"),
                     str(t.hand_number + 1), f"{t.age_seconds:.0f}s", f"{t.idle_seconds:.0f}s",
                     t.owner_node or "-", "STUCK" if t.is_stuck else "", t.bot_policy,
                     _seats(t.seats))
    console.print(grid)


def _status(console: Console, answer: admin_pb2.ServerStatusResponse) -> None:
    grid = Table(title="server status", show_header=False)
    grid.add_column("what")
    grid.add_column("value")
    for name, value in (
            ("version", answer.version), ("uptime", f"{answer.uptime_seconds:.0f}s"),
            ("node", answer.node_id or "-"),
            ("lease", f"{answer.lease_state} ({answer.lease_age_seconds:.1f}s ago)"
             if answer.lease_state != "none" else "none"),
            ("store", f"{answer.store} ({'ok' if answer.is_store_healthy else 'FAILED'})"),
            ("draining", "yes" if answer.is_draining else "no"),
            ("tables", ", ".join(f"{k} {v}" for k, v in sorted(answer.tables.items()))),
            ("stuck tables", str(answer.tables_stuck)),
            ("players", f"{answer.players} seated, {answer.players_connected} connected"),
            ("quota clients", str(answer.quota_clients)),
            ("bot workers", str(answer.bot_workers))):
        grid.add_row(name, value)
    console.print(grid)
    settings = Table(title="settings in force")
    settings.add_column("flag")
    settings.add_column("value")
    for name, value in sorted(answer.settings.items()):
        settings.add_row(f"--{name}", value)
    console.print(settings)


def _table(console: Console, answer: admin_pb2.GetTableResponse) -> None:
    _tables(console, [answer.table])
    for timer in answer.timers:
        seats = f" seats {', '.join(map(str, timer.seats))}" if timer.seats else ""
        console.print(f"timer {timer.kind} at {timer.at.ToJsonString()}{seats}")
    for event in answer.last_events:
        kind = event.WhichOneof("kind") or "?"
        console.print(f"#{event.sequence} {kind}")


ACCOUNT_COMMANDS = ("account", "rename", "revoke", "ban", "unban", "delete")


async def _account_call(call: Callable[[Callable[..., Awaitable[Any]], Message], Awaitable[Any]],
                        stub: admin_pb2_grpc.AdminServiceStub, args: argparse.Namespace) -> Any:
    command = args.admin_command
    if command == "account":
        return await call(stub.FindAccount, admin_pb2.FindAccountRequest(query=args.query))
    if command == "rename":
        return await call(stub.RenameAccount, admin_pb2.RenameAccountRequest(
            account_id=args.account_id, display_name=args.display_name, reason=args.reason))
    if command == "revoke":
        return await call(stub.RevokeSessions, admin_pb2.RevokeSessionsRequest(
            account_id=args.account_id, reason=args.reason))
    if command == "delete":
        return await call(stub.DeleteAccount, admin_pb2.DeleteAccountRequest(
            account_id=args.account_id, reason=args.reason))
    return await call(stub.BanAccount, admin_pb2.BanAccountRequest(
        account_id=args.account_id, is_banned=command == "ban", reason=args.reason))


async def admin_main(args: argparse.Namespace) -> int:
    if args.admin_command in ("backup", "restore"):
        runner = LOCAL_COMMANDS.get(args.admin_command)
        if runner is None:
            print(f"copas admin {args.admin_command}: run it with the `copas` command of the "
                  "server's installation", file=sys.stderr)
            return 2
        return runner(args)
    console = Console()
    try:
        token = _token(args)
    except OSError as exc:
        print(f"copas admin: --token-file: {exc}", file=sys.stderr)
        return 2
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    async with _channel(args) as channel:
        stub = admin_pb2_grpc.AdminServiceStub(channel)
        command = args.admin_command

        async def call(method: Callable[..., Awaitable[Any]], request: Message) -> Any:
            return await method(request, metadata=metadata, timeout=30)
        try:
            answer: Message
            if command == "status":
                answer = await call(stub.ServerStatus, admin_pb2.ServerStatusRequest())
            elif command == "tables":
                found: list[admin_pb2.AdminTable] = []
                unreachable: set[str] = set()
                page = ""
                while len(found) < args.limit:
                    listed = await call(stub.ListTables, admin_pb2.ListTablesRequest(
                        page_size=min(1000, args.limit - len(found)), page_token=page,
                        only_stuck=args.stuck))
                    found += listed.tables
                    unreachable |= set(listed.unreachable_nodes)
                    page = listed.next_page_token
                    if not page:
                        break
                answer = admin_pb2.ListTablesResponse(tables=found[:args.limit],
                                                      unreachable_nodes=sorted(unreachable))
            elif command == "table":
                answer = await call(stub.GetTable,
                                    admin_pb2.GetTableRequest(table_id=args.table_id))
            elif command == "close":
                answer = await call(stub.CloseTable, admin_pb2.CloseTableRequest(
                    table_id=args.table_id, reason=args.reason))
            elif command == "remove":
                answer = await call(stub.RemovePlayer, admin_pb2.RemovePlayerRequest(
                    table_id=args.table_id, seat=args.seat, reason=args.reason))
            elif command in ACCOUNT_COMMANDS:
                answer = await _account_call(call, stub, args)
            elif command == "championship":
                answer = await _championship_call(call, stub, args)
            elif command == "drain":
                answer = await call(stub.Drain, admin_pb2.DrainRequest())
            else:
                answer = await call(stub.Undrain, admin_pb2.UndrainRequest())
        except grpc.aio.AioRpcError as error:
            if command == "championship":
                command = f"championship {args.championship_command}"
            print(f"copas admin {command}: {error.code().name} {error_reason(error)}: "
                  f"{error.details()}", file=sys.stderr)
            return 1
    if args.json:
        print(json_format.MessageToJson(answer, preserving_proto_field_name=True))
        return 0
    if isinstance(answer, admin_pb2.ServerStatusResponse):
        _status(console, answer)
    elif isinstance(answer, admin_pb2.ListTablesResponse):
        _tables(console, list(answer.tables))
        if answer.unreachable_nodes:
            console.print("not answering (their tables are missing): "
                          + ", ".join(answer.unreachable_nodes))
    elif isinstance(answer, admin_pb2.GetTableResponse):
        _table(console, answer)
    elif isinstance(answer, admin_pb2.CloseTableResponse):
        _tables(console, [answer.table])
        console.print(f"closed; record {answer.record_id or '(none: it was waiting)'}")
    elif isinstance(answer, admin_pb2.RemovePlayerResponse):
        _tables(console, [answer.table])
        console.print(f"seat {args.seat} removed")
    elif command == "championship":
        print_championship(console, getattr(answer, "championship"))  # noqa: B009 (a Message)
    elif command in ACCOUNT_COMMANDS:
        console.print(json_format.MessageToJson(answer, preserving_proto_field_name=True))
    elif isinstance(answer, admin_pb2.DrainResponse):
        console.print(f"draining: {answer.games_running} games still running here, "
                      f"{answer.tables_handed_over} tables handed to other nodes")
    else:
        console.print("taking new tables and seats again")
    return 0

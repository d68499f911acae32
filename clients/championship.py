"""`copas championship`: championships at the server (copas.v1.ChampionshipService).

Reading needs no account; registering, creating and watching your own tables need `copas
login` first (the saved session is used, and renewed when its access token expires).

  copas championship list [--all]          open and running ones (--all: the ended too)
  copas championship show ID               its rules, rounds, tables and standings
  copas championship create --name NAME --rounds N [--game GAME] [--max-players N]
                            [--start-when-full] ...
                                           one of yours (within the server's quota), of
                                           the server's default game or of GAME
  copas championship register ID           take part (while registration is open)
  copas championship unregister ID         take it back (before the start)
  copas championship withdraw ID           leave it after the start (seated in no later round)
  copas championship check-in ID           say you are here (in the check-in before the start)
  copas championship watch ID [--bot POLICY]
                                           follow it; each round the server seats you, and
                                           you play that table here (or a bot plays it)
  copas championship export ID --format csv|json [--output FILE]
                                           its standings (place, name, player id, points and
                                           every tie-break value, what decided the place,
                                           games) and each round's pairings and results,
                                           as the server writes it (the page's download too)

Operators create, start, cancel, pause and resume championships, correct a result,
disqualify and remove players and re-seat an announced round with `copas admin championship`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import grpc
from copas.v1 import (
    accounts_pb2_grpc,
    championships_pb2,
    championships_pb2_grpc,
    copas_pb2,
    copas_pb2_grpc,
)
from rich.console import Console
from rich.table import Table

from clients.account import access_token, bearer
from clients.common import (
    Player,
    add_server_arguments,
    add_transport_argument,
    channel,
    connection,
    error_reason,
)

pb = championships_pb2
STATE_TEXT = {pb.CHAMPIONSHIP_STATE_REGISTERING: "registering",
              pb.CHAMPIONSHIP_STATE_RUNNING: "running",
              pb.CHAMPIONSHIP_STATE_FINISHED: "finished",
              pb.CHAMPIONSHIP_STATE_CANCELLED: "cancelled"}
TIE_BREAK_TEXT = {pb.TIE_BREAK_POINTS: "points", pb.TIE_BREAK_FIRSTS: "first places",
                  pb.TIE_BREAK_RELATIVE_POINTS: "game points against the table",
                  pb.TIE_BREAK_HEAD_TO_HEAD: "head to head", pb.TIE_BREAK_DRAW: "seeded draw",
                  pb.TIE_BREAK_BUCHHOLZ: "Buchholz", pb.TIE_BREAK_FINAL: "the final"}
ENDED = (pb.CHAMPIONSHIP_STATE_FINISHED, pb.CHAMPIONSHIP_STATE_CANCELLED)
# A watch broken by these is opened again (a restart, a node gone).
REOPEN = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED,
          grpc.StatusCode.DEADLINE_EXCEEDED)


# ------------------------------------------------------------------ settings (shared)

def add_settings_arguments(parser: argparse.ArgumentParser) -> None:
    """A championship's settings as options (`create` here and in `copas admin`)."""
    parser.add_argument("--name", required=True, help="its name (1-60 characters)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (1..20)")
    parser.add_argument("--game", default="",
                        help="the game every table plays, as the server names it (empty: its"
                             " default game); --preset and the options are that game's")
    parser.add_argument("--preset", default="",
                        help="the games' preset (empty: the game's first)")
    parser.add_argument("--hands", type=int, default=0,
                        help="hands per game (0: the preset's)")
    parser.add_argument("--play-timeout", type=float, default=0,
                        help="seconds a card (0: the preset's; the clocks must be on)")
    parser.add_argument("--trick-pause", type=float, default=-1,
                        help="seconds a finished trick stays shown (-1: the preset's)")
    parser.add_argument("--hand-pause", type=float, default=-1,
                        help="seconds between hands (-1: the preset's)")
    parser.add_argument("--max-players", type=int, default=0,
                        help="registrations taken at most (0: the server's most)")
    parser.add_argument("--min-players", type=int, default=0,
                        help="it starts only with this many (0: 3)")
    parser.add_argument("--start-when-full", action="store_true",
                        help="start as soon as --max-players are registered")
    parser.add_argument("--start-in", type=float, default=0,
                        help="start by itself this many seconds from now (0: no time)")
    parser.add_argument("--pause", type=float, default=0,
                        help="seconds between a round's end and the next one's seating")
    parser.add_argument("--duplicate-deals", action="store_true",
                        help="all tables of one size in a round get the same cards")
    parser.add_argument("--matchpoints", action="store_true",
                        help="score by matchpoints against the same cards (with "
                             "--duplicate-deals)")
    parser.add_argument("--buchholz", action="store_true",
                        help="the Buchholz tie-break right after the main score")
    parser.add_argument("--final-table", type=int, default=0,
                        help="the top N play a final after the last round (3..5; 0: none)")
    parser.add_argument("--registration-opens-in", type=float, default=0,
                        help="registration opens this many seconds from now (0: at once)")
    parser.add_argument("--registration-closes-in", type=float, default=0,
                        help="registration closes this many seconds from now (0: at the "
                             "start)")
    parser.add_argument("--late-entry-rounds", type=int, default=0,
                        help="after the start, players may register until round N is paired")
    parser.add_argument("--check-in", type=float, default=0,
                        help="seconds before the start (--start-in) that players check in; "
                             "who did not is removed at the start")
    parser.add_argument("--keep-absent", action="store_true",
                        help="keep seating players who never came to a round (default: "
                             "they are dropped from the next rounds)")
    parser.add_argument("--round-time-limit", type=float, default=0,
                        help="seconds a round's games may run; then they end (TIME_LIMIT)")
    parser.add_argument("--pairing-notice", type=float, default=0,
                        help="seconds a round's pairings are shown before its tables start")


def _from_now(seconds: float) -> Any:
    from google.protobuf.timestamp_pb2 import Timestamp

    stamp = Timestamp()
    stamp.FromNanoseconds(int((time.time() + seconds) * 1e9))
    return stamp


def settings_from(args: argparse.Namespace) -> championships_pb2.ChampionshipSettings:
    rules = copas_pb2.RulesOverrides()
    if args.hands:
        rules.max_hands = args.hands
    if args.play_timeout:
        rules.play_timeout_seconds = args.play_timeout
    if args.trick_pause >= 0:
        rules.trick_pause_seconds = args.trick_pause
    if args.hand_pause >= 0:
        rules.hand_pause_seconds = args.hand_pause
    settings = pb.ChampionshipSettings(
        display_name=args.name, rounds=args.rounds, preset=args.preset, rules=rules,
        game=args.game,
        duplicate_deals=args.duplicate_deals, max_players=args.max_players,
        min_players=args.min_players, start_when_full=args.start_when_full,
        round_pause_seconds=args.pause, buchholz=args.buchholz, final_table=args.final_table,
        scoring=pb.CHAMPIONSHIP_SCORING_MATCHPOINTS if args.matchpoints
        else pb.CHAMPIONSHIP_SCORING_PLACES, late_entry_rounds=args.late_entry_rounds,
        check_in_seconds=args.check_in, drop_absent=not args.keep_absent,
        round_time_limit_seconds=args.round_time_limit,
        pairing_notice_seconds=args.pairing_notice)
    if args.start_in > 0:
        settings.start_time.FromSeconds(int(time.time() + args.start_in))
    if args.registration_opens_in > 0:
        settings.registration_open_time.CopyFrom(_from_now(args.registration_opens_in))
    if args.registration_closes_in > 0:
        settings.registration_close_time.CopyFrom(_from_now(args.registration_closes_in))
    return settings


# ------------------------------------------------------------------ printing

def _number(value: float) -> str:
    return f"{value:g}" if value == int(value) else f"{value:.2f}"


def _line(c: championships_pb2.Championship) -> str:
    state = STATE_TEXT.get(c.state, "?") + (" (paused)" if c.is_paused else "")
    rounds = f"round {c.current_round} of {c.settings.rounds}" \
        if c.state == pb.CHAMPIONSHIP_STATE_RUNNING else f"{c.settings.rounds} rounds"
    mine = ", you are registered" if c.is_registered else ""
    game = f" of {c.settings.game} ({c.settings.preset})" if c.settings.game else ""
    return f"{c.settings.display_name} ({c.championship_id}): {state}, {rounds}{game}, " \
           f"{c.player_count} players{mine}"


def print_list(console: Console, championships: list[championships_pb2.Championship]) -> None:
    grid = Table(title="championships (newest first)")
    for col in ("championship_id", "name", "state", "round", "players", "you"):
        grid.add_column(col)
    for c in championships:
        grid.add_row(c.championship_id, c.settings.display_name, STATE_TEXT.get(c.state, "?"),
                     f"{c.current_round}/{c.settings.rounds}", str(c.player_count),
                     "registered" if c.is_registered else "")
    console.print(grid)


def print_standings(console: Console, c: championships_pb2.Championship) -> None:
    final = "final standings" if c.state == pb.CHAMPIONSHIP_STATE_FINISHED else "standings"
    grid = Table(title=f"{c.settings.display_name}: {final}")
    duplicate = c.settings.duplicate_deals
    buchholz = c.settings.buchholz
    has_final = any(s.final_place for s in c.standings)
    columns = ["place", "player", "points", *(["matchpoints", "%"] if duplicate else []),
               *(["Buchholz"] if buchholz else []), "firsts", "vs table", "head to head",
               "games", *(["final"] if has_final else []), "decided by"]
    for col in columns:
        grid.add_column(col)
    for s in c.standings:
        marks = (" (you)" if s.is_you else "") + (" (withdrew)" if s.has_withdrawn else "") \
            + (" (dropped)" if s.is_dropped else "") \
            + (" (disqualified)" if s.is_disqualified else "")
        grid.add_row(str(s.place), s.display_name + marks, str(s.points),
                     *([_number(s.matchpoints), f"{s.percentage:.2f}"] if duplicate else []),
                     *([_number(s.buchholz)] if buchholz else []), _number(s.firsts),
                     f"{s.relative_points:+.2f}", f"{s.head_to_head:+d}", str(s.games),
                     *([str(s.final_place or "")] if has_final else []),
                     TIE_BREAK_TEXT.get(s.decided_by, ""))
    console.print(grid)


def _clock_time(stamp: Any) -> str:
    return time.strftime("%H:%M:%S", time.localtime(stamp.ToNanoseconds() / 1e9))


def print_round(console: Console, round_: championships_pb2.ChampionshipRound) -> None:
    name = "final" if round_.is_final else f"round {round_.round_number}"
    if round_.is_announced:
        done = f" (pairings; starts at {_clock_time(round_.start_time)})"
    else:
        done = " (over)" if round_.is_finished else ""
        if round_.HasField("time_limit") and not round_.is_finished:
            done += f" (time limit {_clock_time(round_.time_limit)})"
    console.print(f"{name}{done}:", markup=False)
    for t in round_.tables:
        seats = ", ".join(
            f"{s.display_name}{' (you)' if s.is_you else ''}{' (left)' if s.has_left else ''}"
            + (" (absent)" if s.is_no_show else "")
            + (f" {s.place}. {s.total} pts +{s.points}" if s.place else "")
            + (f" {s.percentage:.1f}%" if s.place and s.matchpoints + s.percentage else "")
            for s in t.seats)
        state = "announced" if round_.is_announced else "over" if t.is_finished else "playing"
        if t.end_reason == copas_pb2.GAME_END_REASON_TIME_LIMIT:
            state += ", time limit"
        if t.is_corrected:
            state += ", corrected"
        console.print(f"  table {t.table_number} {t.table_id or '-'} [{state}]: {seats}",
                      markup=False)


def print_championship(console: Console, c: championships_pb2.Championship) -> None:
    console.print(_line(c))
    if c.state == pb.CHAMPIONSHIP_STATE_REGISTERING and c.players:
        console.print("registered: " + ", ".join(
            p.display_name + (" (you)" if p.is_you else "") for p in c.players))
    for round_ in c.rounds:
        print_round(console, round_)
    if c.standings:
        print_standings(console, c)
    if c.seed:
        console.print(f"seed {c.seed}")


# ------------------------------------------------------------------ the calls

async def _signed_in(ch: grpc.aio.Channel, args: argparse.Namespace, console: Console
                     ) -> str | None:
    token = await access_token(accounts_pb2_grpc.AccountServiceStub(ch), args.server)
    if token is None:
        console.print(f"copas championship {args.championship_command}: not signed in: "
                      "copas login")
    return token


async def championship_main(args: argparse.Namespace) -> int:
    console = Console(highlight=False)
    command = args.championship_command
    if command == "watch":
        return await watch_main(args, console)
    async with channel(connection(args)) as ch:
        stub = championships_pb2_grpc.ChampionshipServiceStub(ch)
        try:
            token = await access_token(accounts_pb2_grpc.AccountServiceStub(ch), args.server)
            metadata = bearer(token) if token else None
            if command == "list":
                listed = await stub.ListChampionships(pb.ListChampionshipsRequest(
                    page_size=100, include_finished=args.all), metadata=metadata)
                print_list(console, list(listed.championships))
                return 0
            if command == "show":
                got = await stub.GetChampionship(pb.GetChampionshipRequest(
                    championship_id=args.championship_id), metadata=metadata)
                print_championship(console, got.championship)
                return 0
            if command == "export":  # the server writes it, the same file as the page's
                exported = await stub.ExportChampionship(pb.ExportChampionshipRequest(
                    championship_id=args.championship_id,
                    format=pb.EXPORT_FORMAT_JSON if args.format == "json"
                    else pb.EXPORT_FORMAT_CSV))
                if args.output:
                    Path(args.output).write_text(exported.content, encoding="utf-8")
                else:
                    sys.stdout.write(exported.content)
                return 0
            if token is None:
                await _signed_in(ch, args, console)
                return 1
            answer: Any
            if command == "create":
                answer = await stub.CreateChampionship(pb.CreateChampionshipRequest(
                    settings=settings_from(args), request_id=uuid.uuid4().hex),
                    metadata=metadata)
            elif command == "register":
                answer = await stub.Register(pb.RegisterRequest(
                    championship_id=args.championship_id), metadata=metadata)
            elif command == "unregister":
                answer = await stub.Unregister(pb.UnregisterRequest(
                    championship_id=args.championship_id), metadata=metadata)
            elif command == "check-in":
                answer = await stub.CheckIn(pb.CheckInRequest(
                    championship_id=args.championship_id), metadata=metadata)
            else:
                answer = await stub.Withdraw(pb.WithdrawRequest(
                    championship_id=args.championship_id), metadata=metadata)
        except grpc.aio.AioRpcError as error:
            console.print(f"copas championship {command}: {error_reason(error)}: "
                          f"{error.details()}")
            return 1
    done = {"create": "created", "register": "registered", "unregister": "registration "
            "taken back", "withdraw": "withdrawn", "check-in": "checked in"}[command]
    console.print(f"{done}: {_line(answer.championship)}")
    return 0


def personalized(message: pb.WatchChampionshipResponse) -> pb.Championship:
    """The message's championship as its watcher sees it: the server sends every watcher the
    same one (no ``is_you``, no ``is_registered``); the watcher's own lines are those of its
    ``your_player_id``."""
    c = message.championship
    you = message.your_player_id
    if you:
        c.is_registered = True
        for player in c.players:
            player.is_you = player.player_id == you
        for line in c.standings:
            line.is_you = line.player_id == you
        for seat in (s for r in c.rounds for t in r.tables for s in t.seats):
            seat.is_you = seat.player_id == you
    return c


class Follower:
    """Follows one championship for a signed-in person: prints each change, and plays each
    table the server seats them at (with ``play_table``) until the championship is over."""

    def __init__(self, console: Console, args: argparse.Namespace, token: str,
                 play_table: Any) -> None:
        self.console = console
        self.args = args
        self.token = token
        self.play_table = play_table
        self.played: set[str] = set()
        self.last: championships_pb2.Championship | None = None
        self.round_seen = -1

    def show(self, c: championships_pb2.Championship) -> None:
        if self.last is None or c.state != self.last.state:
            self.console.print(_line(c))
        if c.current_round != self.round_seen and c.rounds:
            self.round_seen = c.current_round
            print_round(self.console, c.rounds[-1])
        if c.state in ENDED:
            print_championship(self.console, c)
        self.last = c

    async def follow(self) -> int:
        """Watches until the end (a broken stream is opened again); 0 once FINISHED."""
        while True:
            try:
                async with channel(connection(self.args)) as ch:
                    if await self._watch(ch):
                        break
            except grpc.aio.AioRpcError as error:
                if error.code() not in REOPEN:
                    self.console.print(f"copas championship watch: {error_reason(error)}: "
                                       f"{error.details()}")
                    return 1
            await asyncio.sleep(0.5)
        last = self.last
        return 0 if last is not None and last.state == pb.CHAMPIONSHIP_STATE_FINISHED else 1

    async def _watch(self, ch: grpc.aio.Channel) -> bool:
        stub = championships_pb2_grpc.ChampionshipServiceStub(ch)
        game = copas_pb2_grpc.CopasServiceStub(ch)
        playing: asyncio.Task[None] | None = None
        try:
            async for message in stub.WatchChampionship(pb.WatchChampionshipRequest(
                    championship_id=self.args.championship_id), metadata=bearer(self.token)):
                self.show(personalized(message))
                mine = message.your_table
                if mine.table_id and mine.table_id not in self.played:
                    self.played.add(mine.table_id)
                    self.console.print(f"round {mine.round_number}: your table is "
                                       f"{mine.table_id}, seat {mine.seat}")
                    # The stream is read meanwhile: the next round comes after this game.
                    playing = asyncio.ensure_future(self.play_table(Player(
                        game, mine.table_id, mine.seat, mine.player_token)))
                if message.championship.state in ENDED:
                    return True
            return False
        finally:
            if playing is not None and not playing.done():
                playing.cancel()
            if playing is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await playing


async def watch_main(args: argparse.Namespace, console: Console) -> int:
    async with channel(connection(args)) as ch:
        token = await _signed_in(ch, args, console)
    if token is None:
        return 1
    if args.bot:
        from clients.bots import print_standings as table_standings
        from clients.bots import run_bot

        async def play_table(player: Player) -> None:
            while True:
                try:
                    table_standings(await run_bot(player, args.bot, transport=args.transport))
                    return
                except grpc.aio.AioRpcError as error:
                    if error.code() not in REOPEN:
                        raise
                    await asyncio.sleep(0.2)
    else:
        from clients.play import Lines, Session
        lines = Lines()

        async def play_table(player: Player) -> None:
            await Session(console, player, lines, args.transport).run()
    with contextlib.suppress(asyncio.CancelledError):
        return await Follower(console, args, token, play_table).follow()
    return 130


def add_arguments(parser: argparse.ArgumentParser) -> None:
    shared = argparse.ArgumentParser(add_help=False)
    add_server_arguments(shared)
    commands = parser.add_subparsers(dest="championship_command", required=True)

    def command(name: str, text: str, *, with_id: bool = True) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=text, parents=[shared])
        if with_id:
            sub.add_argument("championship_id")
        return sub
    listing = command("list", "open and running championships", with_id=False)
    listing.add_argument("--all", action="store_true", help="the ended ones too")
    command("show", "one championship: rounds, tables, standings")
    add_settings_arguments(command("create", "a championship of yours", with_id=False))
    command("register", "take part (while registration is open)")
    command("unregister", "take your registration back (before the start)")
    command("withdraw", "leave after the start (you leave your game, seated in no later round)")
    command("check-in", "say you are here (in the check-in before the start)")
    export = command("export", "its standings and rounds as CSV or JSON")
    export.add_argument("--format", choices=("csv", "json"), default="csv")
    export.add_argument("--output", default="", help="write to this file (else stdout)")
    watch = command("watch", "follow it and play your table each round")
    watch.add_argument("--bot", default="", help="a bot of this policy plays your tables "
                                                 "(greedy, random, duck, mc)")
    add_transport_argument(watch)

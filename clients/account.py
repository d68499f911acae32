"""`copas login`, `copas me`, `copas leaderboard`, `copas logout`: an account at the server.

`copas login` signs in as a guest of this machine (a device secret made once and kept in
``~/.config/copas/``, or ``$COPAS_HOME``), or with ``--username`` and a password (asked, or
read from stdin with ``--password-stdin``; ``--sign-up`` makes the account). The session it gets
is kept beside it (mode 0600) and renewed when its access token expires; `copas play` then
joins as that account. Secrets are never printed."""

from __future__ import annotations

import argparse
import contextlib
import getpass
import json
import os
import secrets
import sys
import time
from pathlib import Path
from typing import Any

import grpc
from copas.v1 import accounts_pb2, accounts_pb2_grpc
from rich.console import Console
from rich.table import Table

from clients.common import add_server_arguments, channel, connection, error_reason

RENEW_BEFORE = 30.0  # seconds before its expiry an access token is renewed


def home() -> Path:
    return Path(os.environ.get("COPAS_HOME") or Path.home() / ".config" / "copas")


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(text)


def device_secret() -> str:
    """This machine's device secret, made on first use."""
    path = home() / "device"
    if path.exists():
        return path.read_text().strip()
    secret = secrets.token_urlsafe(32)
    _write_private(path, secret)
    return secret


def save(server: str, session: accounts_pb2.Session) -> None:
    sessions = _load_all()
    sessions[server] = {"access": session.access_token, "refresh": session.refresh_token,
                        "expires": session.access_expire_time.seconds,
                        "name": session.account.display_name}
    _write_private(home() / "sessions.json", json.dumps(sessions))


def _load_all() -> dict[str, Any]:
    path = home() / "sessions.json"
    try:
        loaded = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def forget(server: str) -> dict[str, Any] | None:
    sessions = _load_all()
    gone = sessions.pop(server, None)
    _write_private(home() / "sessions.json", json.dumps(sessions))
    return gone if isinstance(gone, dict) else None


async def access_token(stub: accounts_pb2_grpc.AccountServiceStub, server: str) -> str | None:
    """The saved session's access token for ``server`` (renewed if it is about to expire),
    or None when not signed in there (or the session ended)."""
    saved = _load_all().get(server)
    if not isinstance(saved, dict):
        return None
    if float(saved.get("expires", 0)) - RENEW_BEFORE > time.time():
        return str(saved["access"])
    try:
        answer = await stub.RefreshSession(accounts_pb2.RefreshSessionRequest(
            refresh_token=str(saved.get("refresh", ""))))
    except grpc.aio.AioRpcError as error:
        if error.code() == grpc.StatusCode.UNAUTHENTICATED:
            forget(server)
            return None
        raise
    save(server, answer.session)
    return answer.session.access_token


def bearer(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


async def login_main(args: argparse.Namespace) -> int:
    console = Console(highlight=False)
    async with channel(connection(args)) as ch:
        stub = accounts_pb2_grpc.AccountServiceStub(ch)
        try:
            if not args.username:
                answer = await stub.SignInDevice(accounts_pb2.SignInDeviceRequest(
                    device_secret=device_secret(), display_name=args.name))
                session = answer.session
            else:
                password = sys.stdin.readline().rstrip("\n") if args.password_stdin \
                    else getpass.getpass("password: ")
                if args.sign_up:
                    session = (await stub.SignUpPassword(accounts_pb2.SignUpPasswordRequest(
                        username=args.username, password=password,
                        display_name=args.name))).session
                else:
                    session = (await stub.SignInPassword(accounts_pb2.SignInPasswordRequest(
                        username=args.username, password=password))).session
        except grpc.aio.AioRpcError as error:
            console.print(f"copas login: {error_reason(error) or error.code().name}: "
                          f"{error.details()}")
            return 1
        save(args.server, session)
        made = " (a new account)" if session.is_new_account else ""
        console.print(f"Signed in as {session.account.display_name}{made}.")
    return 0


async def logout_main(args: argparse.Namespace) -> int:
    saved = forget(args.server)
    if saved is not None:
        async with channel(connection(args)) as ch:
            stub = accounts_pb2_grpc.AccountServiceStub(ch)
            with contextlib.suppress(grpc.aio.AioRpcError):  # ended already: forgotten
                await stub.SignOut(accounts_pb2.SignOutRequest(),
                                   metadata=bearer(str(saved.get("access", ""))))
    Console().print("Signed out.")
    return 0


async def me_main(args: argparse.Namespace) -> int:
    console = Console(highlight=False)
    async with channel(connection(args)) as ch:
        stub = accounts_pb2_grpc.AccountServiceStub(ch)
        token = await access_token(stub, args.server)
        if token is None:
            console.print("copas me: not signed in: copas login")
            return 1
        try:
            profile = await stub.GetProfile(accounts_pb2.GetProfileRequest(),
                                            metadata=bearer(token))
            games = await stub.ListMyGames(accounts_pb2.ListMyGamesRequest(
                page_size=args.games), metadata=bearer(token))
        except grpc.aio.AioRpcError as error:
            console.print(f"copas me: {error_reason(error)}: {error.details()}")
            return 1
    console.print(f"{profile.account.display_name}: {profile.games} games, {profile.wins} "
                  f"won, average place {profile.average_place:.2f}")
    for rating in profile.ratings:
        console.print(f"  {kind_text(rating.game, rating.players, rating.partnerships)}: "
                      f"rating {rating.rating} (place {rating.place}, {rating.games} rated "
                      f"games, {rating.wins} won)")
    table = Table(title="last games")
    for col in ("finished", "table", "game", "place", "points", "rating"):
        table.add_column(col)
    for g in games.games:
        change = f"{g.rating_after} ({g.rating_change:+d})" if g.is_rated else "unrated"
        table.add_row(time.strftime("%Y-%m-%d %H:%M", time.localtime(g.finish_time.seconds)),
                      g.table_name, kind_text(g.game, g.players, g.partnerships), str(g.place),
                      str(g.points), change)
    console.print(table)
    return 0


def kind_text(game: str, players: int, partnerships: bool) -> str:
    """A kind of game in words: '4 players' (the server's first game, as before), or the
    game's name before its players ('<game>, 4 players in partnerships')."""
    seats = f"{players} players" + (" in partnerships" if partnerships else "")
    return f"{game}, {seats}" if game else seats


async def leaderboard_main(args: argparse.Namespace) -> int:
    console = Console(highlight=False)
    async with channel(connection(args)) as ch:
        stub = accounts_pb2_grpc.AccountServiceStub(ch)
        token = await access_token(stub, args.server)
        if args.around_me and token is None:
            console.print("copas leaderboard: --around-me needs you signed in: copas login")
            return 1
        try:
            board = await stub.GetLeaderboard(accounts_pb2.GetLeaderboardRequest(
                players=args.players, page_size=args.limit, around_me=args.around_me,
                game=args.game, partnerships=args.partnerships),
                metadata=bearer(token) if token else None)
        except grpc.aio.AioRpcError as error:
            console.print(f"copas leaderboard: {error_reason(error)}: {error.details()}")
            return 1
    table = Table(title=f"leaderboard, {kind_text(board.game, board.players, board.partnerships)}")
    for col in ("place", "name", "rating", "games", "wins"):
        table.add_column(col)
    for e in board.entries:
        mark = " (you)" if e.is_you else ""
        table.add_row(str(e.place), e.display_name + mark, str(e.rating), str(e.games),
                      str(e.wins))
    console.print(table)
    return 0


def add_login_arguments(parser: argparse.ArgumentParser) -> None:
    add_server_arguments(parser)
    parser.add_argument("--username", help="sign in with a username and password (else: a "
                                           "guest of this machine)")
    parser.add_argument("--password-stdin", action="store_true",
                        help="read the password from stdin instead of asking")
    parser.add_argument("--sign-up", action="store_true", help="make the account first")
    parser.add_argument("--name", default="", help="a new account's display name")


def add_me_arguments(parser: argparse.ArgumentParser) -> None:
    add_server_arguments(parser)
    parser.add_argument("--games", type=int, default=10, help="how many last games to show")


def add_leaderboard_arguments(parser: argparse.ArgumentParser) -> None:
    add_server_arguments(parser)
    parser.add_argument("--players", type=int, default=4, help="the kind of game: its players "
                                                              "(the game's counts)")
    parser.add_argument("--game", default="", help="the kind's game (default: the server's "
                                                   "first); the server lists the others")
    parser.add_argument("--partnerships", action="store_true",
                        help="the kind where partners share the result")
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--around-me", action="store_true", help="the page around you")

"""`copas`: the reference clients (play, bot, loadtest, watch; login, me, leaderboard,
logout for an account; championship) and the operators' `admin`."""

from __future__ import annotations

import argparse
import asyncio
import sys

from clients import account, admin, bots, championship, games, loadtest, play, watch
from clients.common import add_server_arguments


def main(argv: list[str] | None = None) -> int:
    first, *others = games.every()
    played = "; ".join([first.title, *(f"{g.title} with --game {g.name}" for g in others)])
    parser = argparse.ArgumentParser(
        prog="copas", description=f"Copas clients ({played}). `copas replay RECORD` checks a "
                                  "finished game with the engine.")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, adder, runner, text in (
            ("login", account.add_login_arguments, account.login_main,
             "sign in (a guest of this machine, or --username)"),
            ("logout", add_server_arguments, account.logout_main, "sign out"),
            ("me", account.add_me_arguments, account.me_main,
             "your name, rating and last games"),
            ("leaderboard", account.add_leaderboard_arguments, account.leaderboard_main,
             "the best players (or --around-me)")):
        sub = commands.add_parser(name, help=text, description=account.__doc__,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
        adder(sub)
        sub.set_defaults(runner=runner)
    for name, module, runner, text in (
            ("play", play, play.play_main, "play at a table (with three bots by default)"),
            ("bot", bots, bots.bots_main, "join bot players to a table"),
            ("loadtest", loadtest, loadtest.loadtest_main, "keep many tables busy with bots"),
            ("watch", watch, watch.watch_main, "list tables or follow one as a spectator"),
            ("championship", championship, championship.championship_main,
             "championships: list, show, create, register, unregister, withdraw, watch"),
            ("admin", admin, admin.admin_main, "operators: tables, close, remove, drain, "
                                               "status, championship (the admin service); "
                                               "backup, restore (a node's files)")):
        sub = commands.add_parser(name, help=text, description=module.__doc__,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(sub)
        sub.set_defaults(runner=runner)
    args = parser.parse_args(argv)
    try:
        return int(asyncio.run(args.runner(args)))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

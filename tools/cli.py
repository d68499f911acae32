"""`copas`: the clients (play, bot, loadtest, watch) and `replay`, which checks a finished
game with the engine (so it lives outside `clients/`, which never imports the engine). It
also gives `copas bot` and `copas loadtest` the engine's bots (`--policy duck` or `mc`), and
`copas admin backup` and `restore` the server's store (tools/backup.py)."""

from __future__ import annotations

import argparse
import asyncio
import sys

from clients import cli as clients_cli
from tools import backup, games, replay


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    games.register()
    backup.register()
    if args[:1] != ["replay"]:
        return clients_cli.main(args)
    parser = argparse.ArgumentParser(prog="copas replay", description=replay.__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    replay.add_arguments(parser)
    return int(asyncio.run(replay.replay_main(parser.parse_args(args[1:]))))


if __name__ == "__main__":
    sys.exit(main())

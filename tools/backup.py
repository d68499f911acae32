"""`copas admin backup` and `copas admin restore`: the command lines of server.store.backup
(the reference clients never import the server, so `copas` registers these with them).

Exit status: 0 done; 2 refused for what was asked (nothing written); 1 failed on the way
(nothing left behind). The reason is one line on stderr."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def register() -> None:
    from clients import admin

    admin.LOCAL_COMMANDS.update(backup=backup_main, restore=restore_main)


def _report(args: argparse.Namespace, manifest: dict[str, Any], done: str) -> None:
    from server.store.backup import summary

    if args.json:
        print(json.dumps(manifest, indent=2, sort_keys=True))
    else:
        print(f"{done}; {summary(manifest)}")


def backup_main(args: argparse.Namespace) -> int:
    from server.observability import version
    from server.store.backup import BackupError, backup

    try:
        manifest = backup(Path(args.data_dir), Path(args.dest), version=version())
    except BackupError as exc:
        print(f"copas admin backup: {exc}", file=sys.stderr)
        return exc.status
    _report(args, manifest, f"backed up {args.data_dir} into {args.dest}")
    return 0


def restore_main(args: argparse.Namespace) -> int:
    from server.store.backup import BackupError, restore

    try:
        manifest = restore(Path(args.backup), Path(args.data_dir))
    except BackupError as exc:
        print(f"copas admin restore: {exc}", file=sys.stderr)
        return exc.status
    _report(args, manifest, f"restored {args.backup} into {args.data_dir} (start the server "
                            f"with --data-dir {args.data_dir})")
    return 0

"""`copas championship` and `copas admin championship` in a terminal against a server process:
an operator creates a championship, three people signed in with `copas login` list it,
register (one takes it back and registers again), and follow it with `copas championship
watch --bot`, which takes each of them to their table each round and plays it, to the final
standings; `show` prints them with the tie-break that decided each place; an operator's
start, remove-player and cancel, and the refusals' reasons."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.servers import ServerProcess

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "operator-token-for-the-championship-cli-test"
FAST = ["--hands", "1", "--play-timeout", "5", "--trick-pause", "0", "--hand-pause", "0"]


def copas(home: Path, *words: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tools.cli", *words], cwd=ROOT, input=stdin,
                          capture_output=True, text=True, timeout=120, env=_env(home))


def _env(home: Path) -> dict[str, str]:
    return {"COLUMNS": "200", "PATH": "/usr/bin:/bin", "COPAS_HOME": str(home),
            "PYTHONPATH": os.environ.get("PYTHONPATH", "")}


def test_people_register_and_follow_a_championship_from_the_terminal(tmp_path: Path) -> None:
    token_file = tmp_path / "admin-token"
    token_file.write_text(TOKEN + "\n")
    with ServerProcess("--data-dir", str(tmp_path / "data"), "--admin-token-file",
                       str(token_file), "--unlimited-quotas",
                       "--championship-interval", "0.05") as server:
        at = ["--server", server.address]
        operator = ["admin", "--server", server.address, "--token-file", str(token_file)]
        ops = tmp_path / "operator"
        made = copas(ops, *operator, "--json", "championship", "create", "--name", "Night Cup",
                     "--rounds", "2", "--max-players", "3", "--start-when-full", *FAST,
                     "--reason", "test")
        assert made.returncode == 0, made.stderr
        cid = json.loads(made.stdout)["championship"]["championship_id"]
        homes = [tmp_path / name for name in ("ana", "bia", "caio")]
        ana = copas(homes[0], "login", "--username", "ana", "--sign-up", "--password-stdin",
                    "--name", "Ana", *at, stdin="a long password\n")
        assert ana.returncode == 0, ana
        for home, name in zip(homes[1:], ("Bia", "Caio"), strict=True):
            signed = copas(home, "login", "--name", name, *at)
            assert signed.returncode == 0 and f"Signed in as {name}" in signed.stdout, signed
        listed = copas(homes[0], "championship", "list", *at)
        assert "Night Cup" in listed.stdout and cid in listed.stdout, listed
        anonymous = copas(tmp_path / "nobody", "championship", "register", cid, *at)
        assert anonymous.returncode == 1 and "copas login" in anonymous.stdout
        for home in homes[:2]:
            registered = copas(home, "championship", "register", cid, *at)
            assert registered.returncode == 0 and "registered" in registered.stdout, registered
        twice = copas(homes[0], "championship", "register", cid, *at)
        assert twice.returncode == 1 and "ALREADY_REGISTERED" in twice.stdout, twice
        back = copas(homes[1], "championship", "unregister", cid, *at)
        assert back.returncode == 0 and "taken back" in back.stdout, back
        early = copas(ops, *operator, "championship", "start", cid, "--reason", "test")
        assert early.returncode == 1 and "NOT_ENOUGH_PLAYERS" in early.stderr, early
        again = copas(homes[1], "championship", "register", cid, *at)
        assert again.returncode == 0, again
        watchers = [subprocess.Popen(
            [sys.executable, "-m", "tools.cli", "championship", "watch", cid, "--bot", "greedy",
             *at], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=_env(home)) for home in homes[:2]]
        last = copas(homes[2], "championship", "register", cid, *at)  # full: it starts
        assert last.returncode == 0, last
        watchers.append(subprocess.Popen(
            [sys.executable, "-m", "tools.cli", "championship", "watch", cid, "--bot", "greedy",
             *at], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=_env(homes[2])))
        outputs = []
        try:
            for watcher in watchers:
                out, err = watcher.communicate(timeout=120)
                assert watcher.returncode == 0, (out, err)
                outputs.append(out)
        finally:
            for watcher in watchers:
                if watcher.poll() is None:
                    watcher.kill()
                    watcher.wait()
        for out in outputs:  # each was taken to its table in both rounds, to the end
            assert "round 1: your table is t_" in out and "round 2: your table is t_" in out
            assert "final standings" in out and "(you)" in out, out
        shown = copas(homes[0], "championship", "show", cid, *at)
        assert "finished" in shown.stdout and "final standings" in shown.stdout, shown
        assert "decided by" in shown.stdout and "seed " in shown.stdout
        assert sum(name in shown.stdout for name in ("Ana", "Bia", "Caio")) == 3
        late = copas(homes[0], "championship", "withdraw", cid, *at)
        assert late.returncode == 1 and "CHAMPIONSHIP_NOT_RUNNING" in late.stdout, late

        # An operator's other calls: remove a player before the start, cancel.
        other = copas(ops, *operator, "--json", "championship", "create", "--name", "Spare",
                      "--rounds", "1", *FAST, "--reason", "test")
        oid = json.loads(other.stdout)["championship"]["championship_id"]
        assert copas(homes[0], "championship", "register", oid, *at).returncode == 0
        account = json.loads(copas(ops, *operator, "--json", "account", "ana").stdout)
        account_id = account["account"]["account"]["account_id"]
        removed = copas(ops, *operator, "championship", "remove-player", oid, account_id,
                        "--reason", "test")
        assert removed.returncode == 0 and "0 players" in removed.stdout, removed
        cancelled = copas(ops, *operator, "championship", "cancel", oid, "--reason", "test")
        assert cancelled.returncode == 0 and "cancelled" in cancelled.stdout, cancelled
        gone = copas(homes[0], "championship", "register", oid, *at)
        assert gone.returncode == 1 and "REGISTRATION_CLOSED" in gone.stdout, gone

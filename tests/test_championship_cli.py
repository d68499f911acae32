"""`copas championship` and `copas admin championship` in a terminal against a server process:
an operator creates a championship, three people signed in with `copas login` list it,
register (one takes it back and registers again), and follow it with `copas championship
watch --bot`, which takes each of them to their table each round and plays it, to the final
standings; `show` prints them with the tie-break that decided each place; an operator's
start, remove-player and cancel, and the refusals' reasons. The director's commands: an
announced round's re-seating, pause and resume, a disqualification, a result corrected, and
the standings exported as CSV and JSON (equal to what GetChampionship says)."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
from copas.admin.v1 import admin_pb2, admin_pb2_grpc
from copas.v1 import championships_pb2 as pb
from copas.v1 import championships_pb2_grpc

from tests.helpers.calls import auth
from tests.helpers.championships import FAST_RULES, BotPlayer, sign_in
from tests.helpers.servers import ServerProcess, serving

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


# ---------------------------------------------------------------- the director's commands


async def cli(home: Path, *words: str) -> tuple[int, str, str]:
    """``copas WORDS`` as a process of its own (the server runs in this one, on its loop):
    its exit code, stdout and stderr."""
    done = await asyncio.to_thread(copas, home, *words)
    return done.returncode, done.stdout, done.stderr


async def test_an_operator_reseats_pauses_and_disqualifies_from_the_terminal(
        tmp_path: Path) -> None:
    token_file = tmp_path / "admin-token"
    token_file.write_text(TOKEN + "\n")
    async with serving(admin_token_file=str(token_file), championship_interval=0.05) \
            as (running, _):
        address = f"127.0.0.1:{running.port}"
        operator = ["admin", "--server", address, "--token-file", str(token_file)]
        home = tmp_path / "operator"
        code, out, err = await cli(
            home, *operator, "--json", "championship", "create", "--name", "Night Cup",
            "--rounds", "1", "--max-players", "4", "--start-when-full", "--pairing-notice",
            "600", "--buchholz", "--round-time-limit", "900", *FAST, "--reason", "test")
        assert code == 0, err
        made = json.loads(out)["championship"]
        cid = made["championship_id"]
        assert made["settings"]["buchholz"] and made["settings"]["pairing_notice_seconds"] == 600
        assert made["settings"]["drop_absent"] is True
        sessions = await sign_in(address, ["Ana", "Bia", "Caio", "Duda"])
        async with grpc.aio.insecure_channel(address) as channel:
            champs = championships_pb2_grpc.ChampionshipServiceStub(channel)
            for session in sessions:  # the fourth fills it: it starts, round 1 announced
                await champs.Register(pb.RegisterRequest(championship_id=cid),
                                      metadata=auth(session.access_token))
            async for message in champs.WatchChampionship(pb.WatchChampionshipRequest(
                    championship_id=cid), timeout=30):  # until round 1 is announced
                if message.championship.rounds:
                    break
        (announced,) = message.championship.rounds
        assert announced.is_announced
        a, b = announced.tables[0].seats[0].player_id, announced.tables[0].seats[1].player_id
        code, out, err = await cli(
            home, *operator, "championship", "reseat", cid, "1", a, b, "--reason", "test")
        assert code == 1 and "INVALID_SWAP" in err, (out, err)  # one table of four
        code, out, err = await cli(
            home, *operator, "championship", "pause", cid, "--reason", "a break")
        assert code == 0 and "(paused)" in out, err
        code, out, err = await cli(
            home, *operator, "championship", "resume", cid, "--reason", "back")
        assert code == 0 and "(paused)" not in out, err
        code, out, err = await cli(
            home, *operator, "championship", "disqualify", cid, a, "--reason", "cheating")
        assert code == 0 and "(disqualified)" in out, err
        code, out, err = await cli(home, "championship", "show", cid, "--server",
                                                 address)
        assert code == 0 and "round 1 (pairings; starts at" in out, (out, err)
        code, out, err = await cli(
            home, "championship", "export", cid, "--format", "csv", "--server", address)
        assert code == 0, err
        standings_part, seats_part = out.split("\n\n")
        rows = list(csv.DictReader(io.StringIO(seats_part)))
        assert [(r["round"], r["announced"], r["table_id"]) for r in rows] == [
            ("1", "true", "")] * 4
        lines = list(csv.DictReader(io.StringIO(standings_part)))
        disqualified = next(line for line in lines if line["player_id"] == a)
        assert disqualified["disqualified"] == "true" and disqualified["place"] == "4"
        code, out, err = await cli(
            home, *operator, "championship", "correct", cid, "1", "1", "--totals", "1,2,3,4",
            "--reason", "test")
        assert code == 1 and "CHAMPIONSHIP_TABLE_NOT_FOUND" in err, err
        code, out, err = await cli(
            home, *operator, "championship", "cancel", cid, "--reason", "test")
        assert code == 0, err


async def test_a_result_corrected_and_the_export_from_the_terminal(tmp_path: Path) -> None:
    token_file = tmp_path / "admin-token"
    token_file.write_text(TOKEN + "\n")
    admin_auth = (("authorization", f"Bearer {TOKEN}"),)
    async with serving(admin_token_file=str(token_file), championship_interval=0.05) \
            as (running, _), grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        address = f"127.0.0.1:{running.port}"
        operator = ["admin", "--server", address, "--token-file", str(token_file)]
        champs = championships_pb2_grpc.ChampionshipServiceStub(channel)
        cid = (await admin_pb2_grpc.AdminServiceStub(channel).CreateChampionship(
            admin_pb2.CreateChampionshipRequest(settings=pb.ChampionshipSettings(
                display_name="Export cup", rounds=2, rules=FAST_RULES, max_players=3,
                start_when_full=True, round_pause_seconds=600), reason="test"),
            metadata=admin_auth)).championship.championship_id
        sessions = await sign_in(address, ["Eva", "Fabi", "Gil"])
        for session in sessions:
            await champs.Register(pb.RegisterRequest(championship_id=cid),
                                  metadata=auth(session.access_token))
        bots = [asyncio.ensure_future(BotPlayer(address, s, cid).run()) for s in sessions]
        async for message in champs.WatchChampionship(pb.WatchChampionshipRequest(
                championship_id=cid), timeout=60):  # until round 1 is counted
            if message.championship.rounds and message.championship.rounds[0].is_finished:
                break
        home = tmp_path / "operator"
        code, out, err = await cli(
            home, *operator, "championship", "correct", cid, "1", "1", "--totals", "26,0,0",
            "--no-shows", "2", "--reason", "a slip")
        assert code == 0 and "corrected" in out, (out, err)
        c = (await champs.GetChampionship(pb.GetChampionshipRequest(championship_id=cid))
             ).championship
        table = c.rounds[0].tables[0]
        assert table.is_corrected and [s.total for s in table.seats] == [26, 0, 0]
        assert table.seats[2].is_no_show and table.seats[2].place == 3
        out_file = tmp_path / "standings.json"
        code, out, err = await cli(
            home, "championship", "export", cid, "--format", "json", "--output",
            str(out_file), "--server", address)
        assert code == 0 and not out, err
        exported = json.loads(out_file.read_text())
        assert [(s["place"], s["name"], s["player_id"], s["points"], s["decided_by"],
                 s["games"]) for s in exported["standings"]] == [
            (line.place, line.display_name, line.player_id, line.points,
             pb.TieBreak.Name(line.decided_by).removeprefix("TIE_BREAK_").lower(), line.games)
            for line in c.standings]
        (round_,) = exported["rounds"]
        assert round_["tables"][0]["corrected"] and round_["tables"][0]["table_id"]
        assert [s["total"] for s in round_["tables"][0]["seats"]] == [26, 0, 0]
        code, out, err = await cli(
            home, "championship", "export", cid, "--format", "csv", "--server", address)
        standings_part, seats_part = out.split("\n\n")
        assert [dict(r) for r in csv.DictReader(io.StringIO(standings_part))] == [
            {k: _text(v) for k, v in s.items()} for s in exported["standings"]]
        assert [(r["round"], r["seat"], r["total"], r["no_show"], r["corrected"])
                for r in csv.DictReader(io.StringIO(seats_part))] == [
            ("1", "0", "26", "false", "true"), ("1", "1", "0", "false", "true"),
            ("1", "2", "0", "true", "true")]
        await admin_pb2_grpc.AdminServiceStub(channel).CancelChampionship(
            admin_pb2.CancelChampionshipRequest(championship_id=cid, reason="test"),
            metadata=admin_auth)
        await asyncio.wait_for(asyncio.gather(*bots), 30)


def _text(value: Any) -> str:
    """A JSON export's value as its CSV cell."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}" if value == int(value) else repr(value)
    return str(value)

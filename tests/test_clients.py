"""The reference clients against a real server on loopback: `copas play` through a
pseudo-terminal, bots in 3, 4 and 5 players, a load test, `copas watch`. (Their logic without
a server: tests/test_clients_offline.py.)"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from copas.v1 import copas_pb2, copas_pb2_grpc

from clients import bots, common
from tests.helpers.servers import ROOT, ServerProcess, clients_server, free_port, metric
from tests.helpers.terminal import ENV, PROMPT, Terminal, copas


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with clients_server(tmp_path_factory.mktemp("data")) as server:
        yield server
        server.stop()


@pytest.fixture
def server_address(served: ServerProcess) -> str:
    return served.address



def test_copas_play_a_whole_game_through_a_terminal(server_address: str) -> None:
    term = Terminal("play", "--server", server_address, "--name", "Tester", "--preset", "quick")
    term.read_until(r"You are Tester, seat 0")
    tried_bad_input = tried_illegal = False
    while True:
        prompt = term.read_until(PROMPT, timeout=60)
        text = prompt.group(1)
        if text.startswith("final standings"):
            break
        if text.startswith("Choose"):
            if not tried_bad_input:
                term.type("ZZ 1 2\n")
                term.read_until(r"'ZZ' is not a card")
                term.read_until(r"Choose 3 cards to pass[^\n]*: ")
                tried_bad_input = True
            term.type("1 2 3\n")
        elif text.startswith("Your turn"):
            legal = prompt.group(2).split()
            hand = re.findall(r"(\d+):(\S+)", term.screen[:prompt.start()].rsplit(
                "your hand:", 1)[-1].split("\n", 1)[0])
            if not tried_illegal and len(hand) > len(legal):
                # A card from the hand that is not legal now: the server's reason is shown.
                index = next(i for i, c in hand if c not in legal)  # both shown as A♠
                term.type(f"{index}\n")
                term.read_until(r"✗ (MUST_FOLLOW_SUIT|HEARTS_NOT_BROKEN|"
                                r"NO_POINTS_ON_FIRST_TRICK|MUST_LEAD_OPENING_CARD): ")
                term.read_until(r"Your turn[^\n]*: ")
                tried_illegal = True
            term.type(legal[0] + "\n")
        else:
            term.type("a\n")
    term.read_until(r"1\s+\S+")
    assert term.exit_code() == 0
    assert tried_bad_input and tried_illegal
    # The end, each once: the last card and its trick, the hand's score, the standings.
    assert "(auto)" not in term.screen and "Basil plays" in term.screen
    assert "out of time" not in term.screen  # bots' own moves are not marked
    assert term.screen.count("final standings") == 1
    assert term.screen.count("hand 1 scored") == 1
    last_trick = term.screen.rsplit("hand 1 scored", 1)[0].rsplit("\n", 3)
    assert "takes the trick" in "".join(last_trick)


def test_ctrl_c_leaves_after_confirmation(server_address: str) -> None:
    term = Terminal("play", "--server", server_address, "--name", "Quitter")
    term.read_until(r"Choose 3 cards to pass[^\n]*: ")
    term.type("\x03")
    term.read_until(r"Leave the table for good\?")
    term.type("n\n")
    term.read_until(r"Choose 3 cards to pass[^\n]*: ")
    term.type("\x03")
    term.read_until(r"Leave the table for good\?")
    term.type("y\n")
    term.read_until(r"You left the table\.")
    assert term.exit_code() == 0


@pytest.mark.parametrize(("players", "transport"), [(3, "play"), (4, "unary"), (5, "play")])
def test_bots_finish_a_game(served: ServerProcess, players: int, transport: str) -> None:
    server_address = served.address
    before = metric(served, "copas_rpc_duration_seconds_count", method="PlayCard", code="OK")
    done = copas("bot", "--server", server_address, "--create", "--seats", str(players),
                 "--players", str(players), "--preset", "quick", "--policy",
                 "random" if players == 4 else "greedy", "--transport", transport)
    unary_plays = metric(served, "copas_rpc_duration_seconds_count", method="PlayCard",
                         code="OK") - before
    assert (unary_plays > 0) == (transport == "unary")  # Play carries the moves otherwise
    assert done.returncode == 0, done.stderr
    assert "final standings:" in done.stdout
    places = re.findall(r"^\s+(\d)\. .*: (\d+) points$", done.stdout, re.M)
    assert len(places) == players
    assert sum(int(points) for _, points in places) in (26, 26 * (players - 1))


async def test_copas_bot_closes_every_channel_it_opens(server_address: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[grpc.aio.Channel] = []

    def recorded(target: common.Connection | str) -> grpc.aio.Channel:
        opened.append(common.channel(target))
        return opened[-1]

    monkeypatch.setattr(bots, "channel", recorded)
    parser = argparse.ArgumentParser()
    bots.add_arguments(parser)
    args = parser.parse_args(["--server", server_address, "--create", "--preset", "quick"])
    assert await bots.bots_main(args) == 0
    assert len(opened) == 5  # the table's creator and one per bot
    assert all(c.get_state() is grpc.ChannelConnectivity.SHUTDOWN for c in opened)


@pytest.mark.parametrize("transport", ["play", "unary"])
def test_a_load_test_accounts_for_every_game(served: ServerProcess, transport: str) -> None:
    plays = metric(served, "copas_stream_duration_seconds_count", method="Play")
    # A count of games, not a duration: on a loaded machine a game may take longer than any
    # fixed test length, and the test is about the report, not the machine's speed.
    done = copas("loadtest", "--server", served.address, "--tables", "6", "--games", "6",
                 "--processes", "2", "--json", "--transport", transport, timeout=240)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["transport"] == transport
    streams = metric(served, "copas_stream_duration_seconds_count", method="Play") - plays
    assert (streams > 0) == (transport == "play")
    assert report["errors"] == {}
    assert report["games_finished"] >= 6 and report["moves"] > 0
    assert report["games_started"] == report["games_finished"] + report["games_unfinished"]
    assert report["moves_per_s"] > 0
    for key in ("play_card_latency_ms", "move_to_view_latency_ms"):
        p = report[key]
        assert 0 < p["p50"] <= p["p95"] <= p["p99"] <= p["max"]
    assert report["server_peak_rss_mb"] and report["server_peak_rss_mb"] > 10


def test_watch_lists_and_follows_a_table(server_address: str) -> None:
    created = copas("bot", "--server", server_address, "--create", "--seats", "4",
                    "--preset", "quick")
    table_id = re.search(r"created table (\S+)", created.stdout).group(1)  # type: ignore[union-attr]
    listed = copas("watch", "--server", server_address)
    assert listed.returncode == 0 and table_id in listed.stdout
    followed = copas("watch", "--server", server_address, "--table", table_id)
    assert followed.returncode == 0
    assert "final standings" in followed.stdout and "your hand" not in followed.stdout


def test_watch_lists_every_card_also_those_a_coalesced_snapshot_carries(
        server_address: str) -> None:
    """A spectator's updates are coalesced per tick (a snapshot listing the events missed):
    `copas watch`, following a game of instant bots from before its start, lists every card."""
    with grpc.insecure_channel(server_address) as ch:
        table = copas_pb2_grpc.CopasServiceStub(ch).CreateTable(copas_pb2.CreateTableRequest(
            preset="quick", rules=copas_pb2.RulesOverrides(
                players=4, trick_pause_seconds=0, hand_pause_seconds=0))).table
    watcher = subprocess.Popen([sys.executable, "-m", "clients.cli", "watch", "--server",
                                server_address, "--table", table.table_id], cwd=ROOT,
                               env=ENV, stdout=subprocess.PIPE, text=True)
    try:
        assert watcher.stdout is not None
        assert watcher.stdout.readline()  # the table drawn: the watch has begun
        played = copas("bot", "--server", server_address, "--table", table.table_id,
                       "--seats", "4")
        assert played.returncode == 0, played.stderr
        out, _ = watcher.communicate(timeout=60)
    finally:
        watcher.kill()
    assert watcher.returncode == 0 and "final standings" in out
    assert out.count(" plays ") == 52, out


def test_copas_play_carries_on_after_the_server_restarts(tmp_path: Path) -> None:
    """A dropped connection: the client reconnects with the same token and plays on."""
    port = free_port()
    data = tmp_path / "data"

    def serve() -> ServerProcess:
        return ServerProcess("--trick-pause", "0", "--hand-pause", "0", "--log-level",
                             "warning", "--data-dir", str(data), port=port)

    server = serve()
    try:
        term = Terminal("play", "--server", f"127.0.0.1:{port}", "--name", "Steady",
                        "--preset", "quick")
        term.read_until(r"Choose 3 cards to pass[^\n]*: ")
        term.type("1 2 3\n")
        prompt = term.read_until(r"Your turn[^\n]*legal: ([^.]*)\. Card[^\n]*: ")
        server.kill9()  # a crash, then a restart on the same data
        server = serve()
        term.type(prompt.group(1).split()[0] + "\n")
        while True:
            prompt = term.read_until(PROMPT, timeout=90)
            if prompt.group(1).startswith("final standings"):
                break
            if prompt.group(1).startswith("Your turn"):
                term.type(prompt.group(2).split()[0] + "\n")
            else:
                term.type("1 2 3\n" if prompt.group(1).startswith("Choose") else "a\n")
        assert term.exit_code() == 0
    finally:
        server.kill9()


def test_copas_play_counts_down_then_the_server_plays_for_you(tmp_path: Path) -> None:
    with ServerProcess("--trick-pause", "0", "--hand-pause", "0", "--pass-timeout", "5",
                       "--log-level", "warning", "--data-dir", str(tmp_path)) as server:
        term = Terminal("play", "--server", server.address, "--name", "Slow")
        term.read_until(r"Choose 3 cards to pass to [^[]*\[[0-9]s\]")
        term.read_until(r"⏳ 2s left")
        term.read_until(r"Slow ran out of time")
        term.read_until(r"too late: the turn moved on")
        term.type("\x03")
        term.read_until(r"Leave the table for good\?[^\n]*\[y\/N\]")
        term.type("y\n")
        assert term.exit_code() == 0

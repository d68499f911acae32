"""The server's bots: the strong one (mc) fills bot seats by default, thinking in worker
processes that stop with the server; a decision that comes back too late is dropped."""

from __future__ import annotations

import itertools
import multiprocessing
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from copas.v1 import copas_pb2, copas_pb2_grpc

from engine import Leave, Phase
from server.main import shutdown, start
from server.store.base import TableMeta
from server.tables.clock import ManualScheduler
from tests.helpers.calls import Watch, auth, join_all, new_table
from tests.helpers.servers import ServerProcess, config_for_tests, registry_for_tests, serving


async def test_mc_bots_play_a_whole_game_and_their_pool_stops_with_the_server() -> None:
    before = set(multiprocessing.active_children())
    running = await start(config_for_tests(allow_seed=True, bot_policy="mc", bot_workers=1,
                                           bot_think_seconds=0.02))
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            from copas.v1 import copas_pb2_grpc

            stub = copas_pb2_grpc.CopasServiceStub(channel)
            table = await new_table(stub, preset="quick", seed="6", bots=3)
            assert table.bot_policy == "mc"
            token = (await join_all(stub, table.table_id, 1))[0].player_token
            watch = Watch(stub, table.table_id, token)
            acted: set[tuple[int, ...]] = set()
            while True:
                last = await watch.wait_for(
                    lambda m: m.WhichOneof("kind") == "game_over" or (
                        0 in m.view.to_act and not m.view.HasField("paused_until")
                        and (m.view.hand_number, m.view.phase, m.view.trick_number,
                             len(m.view.trick.cards)) not in acted), timeout=30)
                if last.WhichOneof("kind") == "game_over":
                    break
                view = last.view
                acted.add((view.hand_number, view.phase, view.trick_number,
                           len(view.trick.cards)))
                try:
                    if view.phase == copas_pb2.PHASE_PASSING:
                        await stub.PassCards(copas_pb2.PassCardsRequest(
                            table_id=table.table_id, cards=list(view.legal_cards[:3])),
                            metadata=auth(token))
                    elif view.phase == copas_pb2.PHASE_PLAYING:
                        await stub.PlayCard(copas_pb2.PlayCardRequest(
                            table_id=table.table_id, card=view.legal_cards[0]),
                            metadata=auth(token))
                    else:
                        await stub.ChooseMoon(copas_pb2.ChooseMoonRequest(
                            table_id=table.table_id,
                            choice=copas_pb2.MOON_CHOICE_ADD_TO_OTHERS), metadata=auth(token))
                except grpc.aio.AioRpcError as error:  # a stale view: the next one decides
                    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
            bots_played = [m for m in watch.messages if m.WhichOneof("kind") == "card_played"
                           and m.card_played.seat != 0]
            assert len(bots_played) == 39 and all(m.card_played.is_automatic
                                                  for m in bots_played)
            await watch.close()
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.CreateTable(copas_pb2.CreateTableRequest(bot_policy="genius"))
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert set(multiprocessing.active_children()) - before, "the bots think elsewhere"
    finally:
        await shutdown(running, 0)
    assert not set(multiprocessing.active_children()) - before, "the pool outlived the server"


class HeldThinker:
    """Keeps a decision's answer until the test gives it (to make it arrive late)."""

    def __init__(self) -> None:
        self.waiting: list[Any] = []

    def think(self, info: Any, policy: str, seed: int, done: Any, module: Any = None) -> Any:
        self.waiting.append((info, done))

        class Handle:
            def cancel(self) -> None:
                pass
        return Handle()


def test_a_late_decision_is_dropped_when_the_table_moved_on() -> None:
    clock = ManualScheduler()
    thinker = HeldThinker()
    registry = registry_for_tests(clock, allow_seed=True, bot_policy="mc", thinker=thinker)
    table = registry.create(preset="online", overrides={"pass_timeout": 0.0,
                                                      "play_timeout": 0.0},
                          bot_seats=2, name="", seed="3")
    seats = [table.join(f"P{i}", None)[0] for i in range(2)]
    clock.run_due()
    game = table.game
    assert game is not None and game.phase is Phase.PASSING
    assert thinker.waiting, "the first bot is thinking"
    info, done = thinker.waiting.pop()
    answer = game.auto_action(info.seat)  # what the bot will say
    # Meanwhile both people leave: the game ends (no person left), the bot answers late.
    for seat in seats:
        table.act(seat, Leave(seat))
    assert table.is_finished
    moves = len(game.actions)
    done(answer)
    assert len(game.actions) == moves


def children_of(pid: int) -> set[int]:
    """The processes whose parent is ``pid`` (Linux /proc)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry.name))
    return found


def test_the_bots_workers_start_with_the_first_bot_and_go_when_the_server_is_killed(
        tmp_path: Path) -> None:
    """No bot worker runs (nor multiprocessing's helpers) until a table's bot first decides;
    a kill -9 then leaves nobody to stop the bot pool: its workers go with the server anyway
    (else every crash and restart would leave one behind)."""
    server = ServerProcess("--data-dir", "memory", "--bot-workers", "2", "--allow-seed")
    try:
        with grpc.insecure_channel(server.address) as channel:
            stub = copas_pb2_grpc.CopasServiceStub(channel)
            stub.ListTables(copas_pb2.ListTablesRequest(), timeout=30)  # serving, idle
            assert children_of(server.proc.pid) == set()
            stub.CreateTable(copas_pb2.CreateTableRequest(
                preset="online", bot_seats=4, bot_policy="duck", seed="1",
                rules=copas_pb2.RulesOverrides(bot_pace_seconds=0.5)), timeout=30)
        deadline = time.monotonic() + 60
        while not (workers := children_of(server.proc.pid)):  # the first bot's decision
            assert time.monotonic() < deadline, "the bot pool never started"
            time.sleep(0.05)
        server.kill9()
        deadline = time.monotonic() + 10
        while any(Path(f"/proc/{pid}").exists() for pid in workers):
            assert time.monotonic() < deadline, "a bot worker outlived its server"
            time.sleep(0.05)
    finally:
        server.kill9()


def _times(table: Any, kind: str, seat: int | None = None) -> list[float]:
    """The server's own times of ``table``'s events of ``kind`` (of ``seat``'s, if given)."""
    found = []
    for event in table.history:
        if event.WhichOneof("kind") == kind and (
                seat is None or getattr(event, kind).seat == seat):
            found.append(event.time.seconds + event.time.nanos / 1e9)
    return found


def _play_a_hand(table: Any, clock: ManualScheduler, person: int, step: float) -> None:
    """Until the first hand is scored: the person acts at once when to act, the clock moves
    ``step`` seconds at a time otherwise (0: what is due now runs, and something must be)."""
    while not _times(table, "hand_scored"):
        game = table.game
        if person in game.to_act() and table.paused_until is None:
            table.act(person, game.auto_action(person))
        else:
            assert clock.advance(step) or step, "nothing is due: the bots wait"


def test_bots_play_one_by_one_at_the_tables_pace_when_a_person_is_seated() -> None:
    clock = ManualScheduler()
    registry = registry_for_tests(clock, bot_pace=1.0)
    table = registry.create(preset="online", overrides={"trick_pause": 0.0, "hand_pause": 0.0,
                                                      "play_timeout": 30.0,
                                                      "pass_timeout": 30.0},
                            bot_seats=3, name="", seed=None)
    assert table.summary().rules.bot_pace_seconds == 1.0  # the default where a person sits
    assert TableMeta.from_json(table.meta.to_json()).bot_pace == 1.0  # kept over a restart
    person = table.join("Ana", None)[0]
    _play_a_hand(table, clock, person, 0.05)
    passes = _times(table, "pass_chosen")
    assert len(passes) == 4
    bot_passes = sorted(_times(table, "pass_chosen", s)[0] for s in (1, 2, 3))
    start = _times(table, "hand_started")[0]
    assert bot_passes[0] - start >= 1.5 - 1e-6
    assert all(b - a >= 1.5 - 1e-6 for a, b in itertools.pairwise(bot_passes))
    played = [(e.time.seconds + e.time.nanos / 1e9, e.card_played.seat)
              for e in table.history if e.WhichOneof("kind") == "card_played"]
    assert len(played) == 52
    for (before, _), (at, seat) in itertools.pairwise(played):
        if seat != person:  # a bot waits its pace after the card before it
            assert at - before >= 1.0 - 1e-6, (before, at, seat)
    # The person's clock is their rules' own, however long the bots took.
    game = table.game
    assert game is not None
    while person not in game.to_act() or table.paused_until is not None:
        clock.advance(0.05)
    assert table.deadline == pytest.approx(clock.now() + 30.0, abs=0.051)


def test_a_table_of_bots_only_and_a_table_asking_for_no_pace_play_at_once() -> None:
    clock = ManualScheduler()
    registry = registry_for_tests(clock, bot_pace=1.0, bot_table_pace=0.0)
    bots_only = registry.create(preset="quick", overrides={"trick_pause": 0.0,
                                                          "hand_pause": 0.0},
                                bot_seats=4, name="", seed=None)
    assert bots_only.summary().rules.bot_pace_seconds == 0.0
    clock.run_due()
    clock.advance(0.0)
    assert bots_only.is_finished, "no time passed, the whole game was played"
    asked = registry.create(preset="online", overrides={"trick_pause": 0.0, "hand_pause": 0.0,
                                                       "play_timeout": 0.0, "pass_timeout": 0.0},
                            bot_seats=3, name="", seed=None, bot_pace=0.0)
    person = asked.join("Ana", None)[0]
    began = clock.now()
    _play_a_hand(asked, clock, person, 0.0)
    assert clock.now() == began


async def test_a_table_asks_for_its_pace_within_the_servers_bounds() -> None:
    async with serving(allow_seed=True) as (_, stub):
        table = await new_table(stub, bots=3, bot_pace_seconds=0.25)
        assert table.rules.bot_pace_seconds == 0.25
        for wrong in (-1.0, 11.0, float("nan")):
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await new_table(stub, bots=3, bot_pace_seconds=wrong)
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT

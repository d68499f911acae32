"""A request fuzzer: hypothesis builds requests for every RPC, well formed and not (random
ids, names, cards, rules, page tokens, sequences, tokens and undecodable bytes), against a
real server (1,000 requests; 10,000 in the thorough profile). No request gets UNKNOWN or
INTERNAL, health answers after every batch, and a refused request changes nothing."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from copas.v1 import cards_pb2, copas_pb2, copas_pb2_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from server.main import RunningServer, shutdown, start
from tests.helpers.budget import budget
from tests.helpers.servers import config_for_tests

BATCH = 50
BATCHES = budget(20, 200)  # 1,000 requests; 10,000 in the thorough profile
BAD_CODES = {grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL,
             grpc.StatusCode.DEADLINE_EXCEEDED}


class ServerThread:
    """A real server on loopback, on an event loop of its own in a thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.running: RunningServer = self.run(start(config_for_tests(
            allow_seed=True, max_tables=40)))

    def run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(60)

    def state(self) -> Any:
        """Everything a request could change, read on the server's loop."""
        async def read() -> Any:
            out = []
            for table in self.running.registry.live():
                game = table.game
                out.append((table.id, table.sequence,
                            tuple((s.is_taken, s.name, s.token_hash) for s in table.seats),
                            None if game is None else (game.phase, tuple(game.hands),
                                                       len(game.actions), tuple(game.has_left))))
            return out, len(self.running.registry.seating.tokens)
        return self.run(read())

    def streams_open(self) -> int:
        return self.running.quotas.open_streams()

    def stop(self) -> None:
        self.run(shutdown(self.running, 0))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture(scope="module")
def world() -> Iterator[dict[str, Any]]:
    server = ServerThread()
    channel = grpc.insecure_channel(f"127.0.0.1:{server.running.port}")
    stub = copas_pb2_grpc.CopasServiceStub(channel)
    no_clock = copas_pb2.RulesOverrides(pass_timeout_seconds=0, play_timeout_seconds=0,
                                        moon_timeout_seconds=0, trick_pause_seconds=0,
                                        hand_pause_seconds=0)
    tables, tokens = [], []
    for seats in (2, 4, 4):  # one waiting, one passing, one playing
        table = stub.CreateTable(copas_pb2.CreateTableRequest(rules=no_clock, seed="5")).table
        tables.append(table.table_id)
        for i in range(seats):
            tokens.append(stub.JoinTable(copas_pb2.JoinTableRequest(
                table_id=table.table_id, display_name=f"P{i}")).player_token)
    playing = server.running.registry.get(tables[2])
    game = playing.game
    assert game is not None
    for seat in range(4):
        action = game.auto_action(seat)
        stub.PassCards(copas_pb2.PassCardsRequest(
            table_id=tables[2], cards=[cards_pb2.Card(text=str(c)) for c in action.cards]),  # type: ignore[union-attr]
            metadata=(("authorization", f"Bearer {tokens[6 + seat]}"),))
    yield {"server": server, "stub": stub, "channel": channel, "tables": tables,
           "tokens": tokens, "health": health_pb2_grpc.HealthStub(channel), "sent": [0]}
    channel.close()
    server.stop()


# ---------------------------------------------------------------- strategies


def ids(world_ids: list[str]) -> st.SearchStrategy[str]:
    known = st.sampled_from(world_ids)
    return st.one_of(known, known, known, st.text(max_size=80), st.just(""),
                     st.text(alphabet="t_abcXYZ-", min_size=1, max_size=70))


any_text = st.text(max_size=70)
names = st.one_of(st.text(max_size=40), st.sampled_from(["Ana", "", " ", "\x00", "\u202e"]))
ints = st.integers(-(2**31), 2**31 - 1)
small = st.integers(-5, 120)
doubles = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.floats(-5, 100))
DECK = [r + s for s in "CDSH" for r in ("2", "3", "4", "5", "6", "7", "8", "9", "10", "J",
                                          "Q", "K", "A")]
real_card = st.sampled_from(DECK).map(lambda t: cards_pb2.Card(text=t))
odd_card = st.builds(lambda s, r, t: cards_pb2.Card(suit=s, rank=r, text=t),  # type: ignore[arg-type]
                     st.integers(-3, 8), st.integers(-3, 20),
                     st.one_of(st.just(""), st.sampled_from(["QS", "2C", "1Z", "q♠"]),
                               st.text(max_size=6)))
card = st.one_of(real_card, real_card, real_card, odd_card)


def overrides() -> st.SearchStrategy[copas_pb2.RulesOverrides]:
    def build(values: dict[str, Any]) -> copas_pb2.RulesOverrides:
        message = copas_pb2.RulesOverrides()
        for key, value in values.items():
            if value is not None:
                setattr(message, key, value)
        return message
    return st.fixed_dictionaries({
        "players": st.one_of(st.none(), small), "max_hands": st.one_of(st.none(), ints),
        "point_limit": st.one_of(st.none(), ints), "moon": st.one_of(st.none(), small),
        "points_on_first_trick": st.one_of(st.none(), st.booleans()),
        "play_timeout_seconds": st.one_of(st.none(), doubles),
        "trick_pause_seconds": st.one_of(st.none(), doubles),
        "hand_pause_seconds": st.one_of(st.none(), doubles)}).map(build)


def requests(world_ids: list[str]) -> st.SearchStrategy[tuple[str, Any]]:
    table_ids = ids(world_ids)

    def with_optional_seat(table_id: str, name: str, seat: int | None, rid: str,
                           preset: str, players: int | None) -> Any:
        message = copas_pb2.JoinTableRequest(table_id=table_id, display_name=name,
                                             request_id=rid, preset=preset)
        if seat is not None:
            message.seat = seat
        if players is not None:
            message.players = players
        return message

    def create(preset: str, rules: Any, bots: int, name: str, seed: str | None,
               rid: str) -> Any:
        message = copas_pb2.CreateTableRequest(preset=preset, rules=rules, bot_seats=bots,
                                               display_name=name, request_id=rid)
        if seed is not None:
            message.seed = seed
        return message

    return st.one_of(
        st.tuples(st.just("CreateTable"), st.builds(
            create, st.one_of(st.sampled_from(["", "online", "quick", "20", "zz"]), any_text),
            overrides(), small, names, st.one_of(st.none(), any_text), any_text)),
        st.tuples(st.just("ListTables"), st.builds(
            copas_pb2.ListTablesRequest, page_size=small, page_token=any_text)),
        st.tuples(st.just("GetTable"), st.builds(copas_pb2.GetTableRequest,
                                                 table_id=table_ids)),
        st.tuples(st.just("JoinTable"), st.builds(
            with_optional_seat, table_ids, names, st.one_of(st.none(), small), any_text,
            st.one_of(st.just(""), st.sampled_from(["quick", "online", "zz"]), any_text),
            st.one_of(st.none(), small))),
        st.tuples(st.just("WatchLobby"), st.builds(
            copas_pb2.WatchLobbyRequest, only_joinable=st.booleans(), preset=any_text,
            players=small, include_finished=st.booleans())),
        st.tuples(st.just("GetView"), st.builds(copas_pb2.GetViewRequest, table_id=table_ids)),
        st.tuples(st.just("PassCards"), st.builds(
            copas_pb2.PassCardsRequest, table_id=table_ids,
            cards=st.one_of(st.lists(real_card, min_size=3, max_size=3),
                            st.lists(card, max_size=5)), request_id=any_text)),
        st.tuples(st.just("PlayCard"), st.builds(
            copas_pb2.PlayCardRequest, table_id=table_ids, card=card, request_id=any_text)),
        st.tuples(st.just("ChooseMoon"), st.builds(
            copas_pb2.ChooseMoonRequest, table_id=table_ids, choice=small,
            request_id=any_text)),
        st.tuples(st.just("LeaveTable"), st.builds(
            copas_pb2.LeaveTableRequest, table_id=table_ids, request_id=any_text)),
        st.tuples(st.just("WatchTable"), st.builds(
            copas_pb2.WatchTableRequest, table_id=table_ids,
            after_sequence=st.one_of(small, st.integers(-(2**63), 2**63 - 1)))),
        st.tuples(st.just("GetGameRecord"), st.builds(
            copas_pb2.GetGameRecordRequest, record_id=table_ids)),
        st.tuples(st.just("ListGameRecords"), st.builds(
            copas_pb2.ListGameRecordsRequest, page_size=small, page_token=any_text)),
        st.tuples(st.just("raw"), st.tuples(
            st.sampled_from(["CreateTable", "JoinTable", "PlayCard", "WatchTable"]),
            st.binary(max_size=40))),
    )


def tokens_for(world_tokens: list[str]) -> st.SearchStrategy[Any]:
    valid = st.sampled_from(world_tokens).map(lambda t: f"Bearer {t}")
    return st.one_of(st.none(), valid, valid, valid, valid, valid, st.sampled_from(
        ["Bearer forged", "Basic abc", "Bearer ", "bearer  x", "Bearer " + "y" * 300]),
        st.text(alphabet="abcXYZ -", max_size=60))


# ---------------------------------------------------------------- the fuzzer


def send(world: dict[str, Any], method: str, request: Any, authorization: str | None) -> Any:
    """One call; returns None on success, else its status code."""
    stub, channel = world["stub"], world["channel"]
    metadata = (("authorization", authorization),) if authorization is not None else None
    try:
        if method == "raw":
            name, body = request
            if name == "WatchTable":
                call = channel.unary_stream(f"/copas.v1.CopasService/{name}")(
                    body, metadata=metadata, timeout=5)
                next(call)
                call.cancel()
            else:
                channel.unary_unary(f"/copas.v1.CopasService/{name}")(
                    body, metadata=metadata, timeout=5)
        elif method in ("WatchTable", "WatchLobby"):
            call = getattr(stub, method)(request, metadata=metadata, timeout=5)
            next(call)
            call.cancel()
        else:
            getattr(stub, method)(request, metadata=metadata, timeout=5)
    except grpc.RpcError as error:
        code = error.code()  # type: ignore[attr-defined]
        if code == grpc.StatusCode.CANCELLED:
            return None
        return code
    return None


def wait_for_streams_to_close(server: ServerThread) -> None:
    deadline = time.monotonic() + 5
    while server.streams_open() and time.monotonic() < deadline:
        time.sleep(0.001)


def fuzz(world: dict[str, Any]) -> Any:
    strategy = st.lists(st.tuples(requests(world["tables"]), tokens_for(world["tokens"])),
                        min_size=BATCH, max_size=BATCH)

    @settings(max_examples=BATCHES, deadline=None, database=None, derandomize=True,
              phases=[Phase.generate],  # the failing request is in the message: no shrinking
              report_multiple_bugs=False, suppress_health_check=list(HealthCheck))
    @given(batch=strategy)
    def run(batch: list[tuple[tuple[str, Any], str | None]]) -> None:
        server: ServerThread = world["server"]
        for (method, request), authorization in batch:
            before = server.state()
            code = send(world, method, request, authorization)
            world["sent"][0] += 1
            assert code not in BAD_CODES, f"{method} {request!r} got {code}"
            wait_for_streams_to_close(server)
            if code is not None:
                assert server.state() == before, f"refused {method} changed the server"
        answer = world["health"].Check(health_pb2.HealthCheckRequest(), timeout=10)
        assert answer.status == health_pb2.HealthCheckResponse.SERVING

    return run


def test_hostile_requests_of_every_kind(world: dict[str, Any]) -> None:
    began = time.monotonic()
    fuzz(world)()
    assert world["sent"][0] >= BATCH * BATCHES
    print(f"{world['sent'][0]} requests in {time.monotonic() - began:.1f} s")  # a figure only

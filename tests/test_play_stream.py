"""The Play stream, from the rules and from an attacker: four players play a whole game each on
one stream (the same events as WatchTable, each action's result after its events, no card of
another seat anywhere); resuming after a reconnect and after a restart; retries by request_id
on a new stream; refusals in-band with the unary call's code and reason; a flood of actions;
a client that never reads; malformed streams; spectators and leavers; the store failing; a
flood paced by its quota, refusals in a row ending the stream (issue 27)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from copas.v1 import cards_pb2, copas_pb2, copas_pb2_grpc
from google.rpc import error_details_pb2, status_pb2
from structlog.testing import capture_logs

from engine import ChooseMoon, Game, PassCards, PlayCard
from server.main import shutdown, start
from tests.helpers.calls import (
    PlayStream,
    Watch,
    auth,
    card_pb,
    join_all,
    new_table,
    quota_details,
)
from tests.helpers.games import rules_of
from tests.helpers.servers import config_for_tests, serving

PRIVATE = ("hand", "pass_choice", "received", "legal_cards")


@pytest.fixture(params=[False, True], ids=["per-event", "batched"])
def batched(request: pytest.FixtureRequest) -> bool:
    """Each promise holds for both forms of the stream: one message per event (the default)
    and one EventBatch per commit (``open.is_batched``)."""
    is_batched: bool = request.param
    return is_batched


def without_view(event: copas_pb2.TableEvent) -> bytes:
    bare = copas_pb2.TableEvent()
    bare.CopyFrom(event)
    bare.ClearField("view")
    return bare.SerializeToString(deterministic=True)


def commits(batches: list[copas_pb2.EventBatch], first: int) -> list[list[bytes]]:
    """Each batch's events (serialized; the view on the last), from sequence ``first`` on,
    snapshots and result-only batches left out."""
    return [[e.SerializeToString(deterministic=True) for e in b.events] for b in batches
            if b.events and b.events[0].WhichOneof("kind") != "snapshot"
            and b.events[0].sequence >= first]


def reason_of(status: status_pb2.Status) -> str:
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            return info.reason
    raise AssertionError("no ErrorInfo")


def request_for(action: Any, request_id: str = "") -> dict[str, Any]:
    """The PlayRequest field for an engine action."""
    if isinstance(action, PassCards):
        return {"pass_cards": copas_pb2.PassCardsRequest(
            cards=[card_pb(c) for c in action.cards], request_id=request_id)}
    if isinstance(action, PlayCard):
        return {"play_card": copas_pb2.PlayCardRequest(card=card_pb(action.card),
                                                       request_id=request_id)}
    assert isinstance(action, ChooseMoon)
    return {"choose_moon": copas_pb2.ChooseMoonRequest(
        choice=copas_pb2.MOON_CHOICE_ADD_TO_OTHERS, request_id=request_id)}


def check_order(messages: list[copas_pb2.PlayResponse]) -> None:
    """Events come in sequence order (presence is not numbered: it repeats the latest
    sequence); each result comes after the last event its action caused (the one just before
    it ends its action) and before any event numbered later."""
    last = 0
    for i, message in enumerate(messages):
        if message.WhichOneof("kind") == "event":
            event = message.event
            if event.WhichOneof("kind") == "snapshot":
                last = event.sequence
                continue
            if event.WhichOneof("kind") == "player_connection":
                assert event.sequence == last, (event.sequence, last)
                continue
            assert event.sequence == last + 1, (event.sequence, last)
            last = event.sequence
            continue
        result = message.result
        assert result.last_sequence == last
        if not result.HasField("error") and result.sequence <= last and i:
            before = messages[i - 1]
            if before.WhichOneof("kind") == "event" and result.sequence < last + 1:
                assert before.event.is_last_in_action or \
                    before.event.WhichOneof("kind") == "snapshot"


async def play_game(stub: Any, table: copas_pb2.TableSummary, seed: str,
                    streams: dict[int, PlayStream], game: Game,
                    stop: Any = lambda g: False) -> dict[int, dict[int, set[str]]]:
    """Play every seat's automatic choices through its stream; returns the cards each seat
    held in each hand (what its view may show)."""
    held: dict[int, dict[int, set[str]]] = {}

    def note() -> None:
        for seat in range(game.players):
            cards = held.setdefault(game.hand_number, {}).setdefault(seat, set())
            cards |= {str(c) for c in game.hand(seat)}

    note()
    while not game.is_over and not stop(game):
        seat = game.to_act()[0]
        action = game.auto_action(seat)
        result = await streams[seat].act(**request_for(action))
        assert not result.HasField("error"), result
        assert result.sequence > 0 and result.last_sequence >= result.sequence
        game.apply(action)
        note()
    return held


async def test_four_players_play_a_whole_game_each_on_one_stream(batched: bool) -> None:
    async with serving(allow_seed=True) as (_, stub):
        table = await new_table(stub, seed="21")
        joins = await join_all(stub, table.table_id, 4)
        tokens = {j.seat: j.player_token for j in joins}
        watches = {s: Watch(stub, table.table_id, t, is_batched=batched)
                   for s, t in tokens.items()}
        for w in watches.values():
            await w.opened()
        streams = {s: PlayStream(stub, table.table_id, t, is_batched=batched)
                   for s, t in tokens.items()}
        for p in streams.values():
            await p.wait_for(lambda m: True)
        game = Game(rules_of(table), "21")
        with capture_logs() as logs:
            held = await play_game(stub, table, "21", streams, game)
        for seat, stream in streams.items():
            await stream.wait_event(lambda e: e.view.phase == copas_pb2.PHASE_GAME_OVER)
            await watches[seat].wait_for(lambda m: m.view.phase == copas_pb2.PHASE_GAME_OVER)
            check_order(stream.messages)
            # Exactly what WatchTable sends this seat: the same events, views and sequences.
            played = [e for e in stream.events if e.WhichOneof("kind") != "snapshot"]
            watched = [m for m in watches[seat].messages if m.WhichOneof("kind") != "snapshot"]
            first = max(played[0].sequence, watched[0].sequence)
            assert [e.SerializeToString(deterministic=True) for e in played
                    if e.sequence >= first] == \
                [m.SerializeToString(deterministic=True) for m in watched if m.sequence >= first]
            if batched:  # the same batches too: one message per commit, the view on the last
                assert commits(stream.batches, first) == commits(watches[seat].batches, first)
                for batch in stream.batches:
                    assert [e.HasField("view") for e in batch.events] == \
                        [i == len(batch.events) - 1 for i in range(len(batch.events))]
            # One result per action, in order, none refused.
            assert len(stream.results) == sum(1 for a in game.actions if a.seat == seat)
            # No card of another seat: a view shows only cards this seat held in that hand.
            for event in stream.events:
                if batched and not event.HasField("view"):
                    continue  # the view is on the batch's last event
                view = event.view
                assert view.seat == seat
                allowed = held.get(view.hand_number, {}).get(seat, set())
                for name in PRIVATE:
                    shown = {c.text for c in getattr(view, name)}
                    assert shown <= allowed, (name, shown - allowed)
        for token in tokens.values():
            assert not any(token in str(entry) for entry in logs)
        for closing in (*streams.values(), *watches.values()):
            await closing.close()


async def test_batched_one_message_per_commit_with_the_movers_result_and_getviews_view(
        ) -> None:
    """Issue 29: batched, each message holds one commit's events for the seat (an action's
    events together: the trick's last card and the trick won), the view once on the last
    (the same bytes as GetView's), and the mover's result in the same message."""
    async with serving(allow_seed=True) as (_, stub):
        table = await new_table(stub, seed="21")
        joins = await join_all(stub, table.table_id, 4)
        tokens = {j.seat: j.player_token for j in joins}
        streams = {s: PlayStream(stub, table.table_id, t, is_batched=True)
                   for s, t in tokens.items()}
        for p in streams.values():
            await p.wait_for(lambda m: True)
        game = Game(rules_of(table), "21")
        await play_game(stub, table, "21", streams, game,
                        stop=lambda g: g.phase.value == "PLAYING" and g.trick_number == 3)
        sequence = max(r.last_sequence for s in streams.values() for r in s.results)
        for seat, stream in streams.items():
            await stream.wait_event(lambda e: e.sequence >= sequence and e.HasField("view"))
            answer = await stub.GetView(copas_pb2.GetViewRequest(table_id=table.table_id),
                                        metadata=auth(tokens[seat]))
            assert answer.sequence == sequence
            shown = [e for e in stream.events if e.HasField("view")][-1]
            assert shown.view.SerializeToString() == answer.view.SerializeToString()
        await play_game(stub, table, "21", streams, game)
        for seat, stream in streams.items():
            await stream.wait_event(lambda e: e.view.phase == copas_pb2.PHASE_GAME_OVER)
            check_order(stream.messages)
            moved = 0
            for batch in stream.batches:
                kinds = [e.WhichOneof("kind") for e in batch.events]
                if "trick_won" in kinds:  # the card that won it came in the same message
                    assert kinds[kinds.index("trick_won") - 1] == "card_played"
                for result in batch.results:
                    if not result.HasField("error") and result.sequence > 0:
                        assert result.sequence in {e.sequence for e in batch.events}
                        assert result.last_sequence == batch.events[-1].sequence
                        moved += 1
            assert moved == sum(1 for a in game.actions if a.seat == seat)
            # Fewer messages than events (an action's events share one), none for a result.
            tricks = sum(1 for e in stream.events if e.WhichOneof("kind") == "trick_won")
            assert len(stream.batches) + tricks <= len(stream.events), \
                (len(stream.batches), tricks, len(stream.events))
        for closing in streams.values():
            await closing.close()


async def test_a_stream_resumes_after_a_reconnect_and_after_a_restart(tmp_path: Path,
                                                                      batched: bool) -> None:
    config = config_for_tests(allow_seed=True, data_dir=str(tmp_path / "data"))
    running = await start(config)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = copas_pb2_grpc.CopasServiceStub(channel)
            table = await new_table(stub, seed="8")
            joins = await join_all(stub, table.table_id, 4)
            tokens = {j.seat: j.player_token for j in joins}
            streams = {s: PlayStream(stub, table.table_id, t, is_batched=batched)
                       for s, t in tokens.items()}
            game = Game(rules_of(table), "8")
            await play_game(stub, table, "8", streams, game,
                            stop=lambda g: g.phase.value == "PLAYING" and g.trick_number == 2)
            seen = streams[0].events[-1].sequence
            for stream in streams.values():
                await stream.close()
            # A reconnect: the snapshot lists what happened meanwhile, nothing is missing.
            streams = {s: PlayStream(stub, table.table_id, t, is_batched=batched)
                       for s, t in tokens.items()}
            streams[0] = PlayStream(stub, table.table_id, tokens[0], after_sequence=seen - 3,
                                    is_batched=batched)
            head = (await streams[0].wait_for(lambda m: True)).event
            assert head.WhichOneof("kind") == "snapshot" and not head.snapshot.has_gap
            assert [e.sequence for e in head.snapshot.missed_events] == \
                list(range(seen - 2, head.sequence + 1))
            await play_game(stub, table, "8", streams, game,
                            stop=lambda g: g.phase.value == "PLAYING" and g.trick_number == 5)
            acknowledged = max(r.last_sequence for s in streams.values() for r in s.results)
            for stream in streams.values():
                await stream.close()
    finally:
        await shutdown(running, 0)
    running = await start(config)  # a restart on the same data
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = copas_pb2_grpc.CopasServiceStub(channel)
            streams = {s: PlayStream(stub, table.table_id, t, after_sequence=acknowledged,
                                     is_batched=batched)
                       for s, t in tokens.items()}
            head = (await streams[1].wait_for(lambda m: True)).event
            assert head.WhichOneof("kind") == "snapshot" and head.sequence >= acknowledged
            assert head.view.trick_number == game.trick_number  # nothing acknowledged lost
            await play_game(stub, table, "8", streams, game)
            over = await streams[2].wait_event(
                lambda e: e.view.phase == copas_pb2.PHASE_GAME_OVER)
            assert len(over.view.standings) == 4
            for stream in streams.values():
                check_order(stream.messages)
                await stream.close()
    finally:
        await shutdown(running, 0)


async def test_a_retry_by_request_id_on_a_new_stream_gets_the_first_answer(batched: bool) -> None:
    async with serving(allow_seed=True) as (_, stub):
        table = await new_table(stub, seed="42")
        joins = await join_all(stub, table.table_id, 4)
        tokens = {j.seat: j.player_token for j in joins}
        game = Game(rules_of(table), "42")
        action = game.auto_action(0)
        first = PlayStream(stub, table.table_id, tokens[0], is_batched=batched)
        answer = await first.act(**request_for(action, "pass-once"))
        assert not answer.HasField("error") and answer.sequence > 0
        await first.close()
        again = PlayStream(stub, table.table_id, tokens[0], is_batched=batched)
        head = (await again.wait_for(lambda m: True)).event
        retried = await again.act(**request_for(action, "pass-once"))
        assert retried.sequence == answer.sequence and not retried.HasField("error")
        assert retried.last_sequence == head.sequence  # applied nothing: no new event
        # The unary call with the same id and content gets the same answer too.
        unary = await stub.PassCards(copas_pb2.PassCardsRequest(
            table_id=table.table_id, cards=[card_pb(c) for c in action.cards],
            request_id="pass-once"), metadata=auth(tokens[0]))
        assert unary.sequence == answer.sequence
        # The same id for something else is refused, and the stream goes on.
        other = [c for c in game.hand(0) if c not in action.cards][:3]
        reused = await again.act(pass_cards=copas_pb2.PassCardsRequest(
            cards=[card_pb(c) for c in other], request_id="pass-once"))
        assert reused.error.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
        assert reason_of(reused.error) == "REQUEST_ID_REUSED"
        assert reused.request_id == "pass-once"
        await again.close()


async def test_refusals_are_results_with_the_unary_calls_code_reason_and_message(
        batched: bool) -> None:
    async with serving(allow_seed=True) as (_, stub):
        table = await new_table(stub, seed="42")
        joins = await join_all(stub, table.table_id, 4)
        tokens = {j.seat: j.player_token for j in joins}
        game = Game(rules_of(table), "42")
        stream = PlayStream(stub, table.table_id, tokens[0], is_batched=batched)
        await stream.wait_for(lambda m: True)
        card = game.hand(0)[0]
        refused = await stream.act(play_card=copas_pb2.PlayCardRequest(card=card_pb(card)))
        with pytest.raises(grpc.aio.AioRpcError) as direct:
            await stub.PlayCard(copas_pb2.PlayCardRequest(table_id=table.table_id,
                                                          card=card_pb(card)),
                                metadata=auth(tokens[0]))
        assert refused.error.code == direct.value.code().value[0]
        assert refused.error.message == direct.value.details()
        assert reason_of(refused.error) == "WRONG_PHASE"
        assert refused.sequence == 0
        malformed = await stream.act(play_card=copas_pb2.PlayCardRequest(
            card=cards_pb2.Card(text="1Z")))
        assert reason_of(malformed.error) == "INVALID_CARD"
        # Refusals changed nothing and the stream goes on: the legal pass is accepted.
        done = await stream.act(**request_for(game.auto_action(0)))
        assert not done.HasField("error")
        check_order(stream.messages)
        await stream.close()


async def test_a_flood_of_actions_is_read_no_faster_than_its_quota(batched: bool) -> None:
    """Issue 27, finding 4: over its quota a Play stream is not read (HTTP/2 flow control
    holds the client) instead of answered with a refusal per action. 60 actions sent at
    once, a quota of 5 a second after a burst of 5: the server answers no more than the
    quota allows in the time that passed, none over quota, and the stream stays open."""
    async with serving(allow_seed=True, token_calls_per_second=5.0, token_calls_burst=5.0,
                       play_max_refusals_in_a_row=0) as (running, stub):
        table = await new_table(stub, seed="42")
        joins = await join_all(stub, table.table_id, 4)
        stream = PlayStream(stub, table.table_id, joins[1].player_token, is_batched=batched)
        await stream.wait_for(lambda m: True)
        began = time.monotonic()
        for _ in range(60):  # not seat 1's turn to play: each is refused, never over quota
            await stream.send(play_card=copas_pb2.PlayCardRequest(card=card_pb("2C")))
        await stream.wait_for(lambda m: len(stream.results) >= 12, timeout=30)
        await asyncio.sleep(1.0)
        answered, elapsed = len(stream.results), time.monotonic() - began
        # The bucket's 5, then 5 a second (one more for a refill under way when counted).
        assert answered <= 5 + 5 * elapsed + 1, (answered, elapsed)
        reasons = {reason_of(r.error) for r in stream.results}
        assert reasons == {"WRONG_PHASE"}, reasons  # paced, never refused for the quota
        assert not stream.task.done()  # the stream is open
        sample = running.metrics.registry.get_sample_value
        assert sample("copas_play_streams") == 1
        await stream.close()


WINDOW = 65_535  # HTTP/2's initial window, in bytes of messages


async def test_a_client_over_its_quota_is_held_within_one_window() -> None:
    """Finding 4, as bench/hostile.py's flood 4 found it: a Play stream over its quota is held
    by HTTP/2 flow control only if the server's receive window stays small. With grpc's
    bandwidth-delay probe the server grew it to megabytes, so one stream sent ~20,000 refused
    actions a second into it (44,000 before its 100th refusal), each parsed by the server.
    Now a stream the server does not read is held after about a window of actions."""
    async with serving(allow_seed=True, token_calls_per_second=1.0, token_calls_burst=1.0,
                       play_max_refusals_in_a_row=0) as (_, stub):
        table = await new_table(stub, seed="42")
        joins = await join_all(stub, table.table_id, 4)
        call = stub.Play(metadata=auth(joins[1].player_token))
        await call.write(copas_pb2.PlayRequest(open=copas_pb2.WatchTableRequest(
            table_id=table.table_id)))
        action = copas_pb2.PlayRequest(play_card=copas_pb2.PlayCardRequest(card=card_pb("2C")))
        size = len(action.SerializeToString()) + 5  # and gRPC's message header
        sent = 0
        while sent * size <= 16 * WINDOW:  # a runaway stops somewhere
            try:
                await asyncio.wait_for(call.write(action), 2.0)
            except TimeoutError:
                break  # held: the server takes no more
            sent += 1
        # A window, and the few actions read meanwhile (one a second) handing back theirs.
        assert sent * size <= 2 * WINDOW, sent
        call.cancel()


async def test_a_stream_of_refused_actions_in_a_row_ends_with_its_reason(batched: bool) -> None:
    """Finding 4: --play-max-refusals-in-a-row refused actions in a row end the stream with
    RESOURCE_EXHAUSTED TOO_MANY_REFUSALS, after their results; an accepted action starts the
    count again."""
    async with serving(allow_seed=True, play_max_refusals_in_a_row=5) as (_, stub):
        table = await new_table(stub, seed="42")
        joins = await join_all(stub, table.table_id, 4)
        game = Game(rules_of(table), "42")
        stream = PlayStream(stub, table.table_id, joins[0].player_token, is_batched=batched)
        await stream.wait_for(lambda m: True)
        refused = copas_pb2.PlayCardRequest(card=card_pb("2C"))  # passing, not playing
        for _ in range(4):
            assert reason_of((await stream.act(play_card=refused)).error) == "WRONG_PHASE"
        assert not (await stream.act(**request_for(game.auto_action(0)))).HasField("error")
        for _ in range(4):  # the count starts again after the accepted pass
            assert reason_of((await stream.act(play_card=refused)).error) == "WRONG_PHASE"
        assert not stream.task.done()
        await stream.send(play_card=refused)  # the fifth in a row
        error = await stream.ended()
        assert error is not None and error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert quota_details(error)[0] == "TOO_MANY_REFUSALS"
        assert len(stream.results) == 10  # the fifth refusal's result, then the end


async def test_a_client_that_never_reads_holds_a_bounded_buffer(batched: bool) -> None:
    from server.rpc.play import PENDING_RESULTS

    async with serving(allow_seed=True, watcher_queue=8) as (running, stub):
        table = await new_table(stub, seed="42")
        joins = await join_all(stub, table.table_id, 4)
        tokens = {j.seat: j.player_token for j in joins}
        # A client that does not read: a small HTTP/2 window, so its stream backs up.
        quiet_channel = grpc.aio.insecure_channel(
            f"127.0.0.1:{running.port}",
            options=[("grpc.http2.lookahead_bytes", 1024), ("grpc.http2.bdp_probe", 0)])
        quiet = copas_pb2_grpc.CopasServiceStub(quiet_channel).Play(
            metadata=auth(tokens[3]))  # never read from, until the end
        await quiet.write(copas_pb2.PlayRequest(open=copas_pb2.WatchTableRequest(
            table_id=table.table_id, is_batched=batched)))
        for _ in range(PENDING_RESULTS * 3):  # actions whose results nobody reads
            try:
                await asyncio.wait_for(quiet.write(copas_pb2.PlayRequest(
                    play_card=copas_pb2.PlayCardRequest(card=card_pb("2C")))), 1)
            except TimeoutError:
                break  # held back: the server stopped reading
        sample = running.metrics.registry.get_sample_value
        waiting = sample("copas_play_results_waiting")
        assert waiting is not None and 0 < waiting <= PENDING_RESULTS
        # The others play on; the quiet stream falls behind and gets a snapshot, not a backlog.
        streams = {s: PlayStream(stub, table.table_id, t, is_batched=batched)
                   for s, t in tokens.items() if s != 3}
        game = Game(rules_of(table), "42")
        while not game.is_over:
            seat = game.to_act()[0]
            action = game.auto_action(seat)
            if seat == 3:  # the quiet player's seat plays by the unary call
                if isinstance(action, PassCards):
                    await stub.PassCards(copas_pb2.PassCardsRequest(
                        table_id=table.table_id, cards=[card_pb(c) for c in action.cards]),
                        metadata=auth(tokens[3]))
                else:
                    assert isinstance(action, PlayCard)
                    await stub.PlayCard(copas_pb2.PlayCardRequest(
                        table_id=table.table_id, card=card_pb(action.card)),
                        metadata=auth(tokens[3]))
            else:
                assert not (await streams[seat].act(**request_for(action))).HasField("error")
            game.apply(action)
        assert (sample("copas_watcher_resyncs_total") or 0) >= 1
        assert (sample("copas_play_results_waiting") or 0) <= PENDING_RESULTS
        kinds: list[str] = []
        messages = 0
        while True:  # it reads at last: a snapshot instead of the backlog
            message = await asyncio.wait_for(quiet.read(), 10)
            messages += 1
            found = list(message.batch.events) if batched else \
                [message.event] if message.WhichOneof("kind") == "event" else []
            kinds.extend(event.WhichOneof("kind") or "" for event in found)
            if any(e.view.phase == copas_pb2.PHASE_GAME_OVER for e in found):
                break
        assert "snapshot" in kinds[1:] and len(kinds) < 150  # a game is about 290
        assert messages < 150
        quiet.cancel()
        await quiet_channel.close()
        for stream in streams.values():
            await stream.close()


async def test_malformed_streams_end_with_invalid_argument(batched: bool) -> None:
    async with serving(allow_seed=True) as (_, stub):
        table = await new_table(stub, seed="42")
        other = await new_table(stub, seed="43")
        joins = await join_all(stub, table.table_id, 4)
        token = joins[0].player_token
        # An action for another table.
        stream = PlayStream(stub, table.table_id, token, is_batched=batched)
        await stream.wait_for(lambda m: True)
        await stream.send(play_card=copas_pb2.PlayCardRequest(table_id=other.table_id,
                                                              card=card_pb("2C")))
        error = await stream.ended()
        assert error is not None and error.code() == grpc.StatusCode.INVALID_ARGUMENT
        # A second opening.
        stream = PlayStream(stub, table.table_id, token, is_batched=batched)
        await stream.wait_for(lambda m: True)
        await stream.send(open=copas_pb2.WatchTableRequest(table_id=table.table_id))
        error = await stream.ended()
        assert error is not None and error.code() == grpc.StatusCode.INVALID_ARGUMENT
        # No opening: the first message is an action.
        call = stub.Play(metadata=auth(token))
        await call.write(copas_pb2.PlayRequest(play_card=copas_pb2.PlayCardRequest(
            card=card_pb("2C"))))
        with pytest.raises(grpc.aio.AioRpcError) as first:
            await call.read()
        assert first.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_garbage_bytes_end_a_play_stream_with_invalid_argument() -> None:
    async with serving(allow_seed=True) as (running, _), \
            grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        raw = channel.stream_stream("/copas.v1.CopasService/Play",
                                    request_serializer=lambda b: b,
                                    response_deserializer=lambda b: b)
        call = raw(metadata=auth("x"))
        await call.write(b"\xff\xff\xff\xff")
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await call.read()
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_a_spectator_cannot_open_play_and_a_leaver_cannot_act(batched: bool) -> None:
    async with serving(allow_seed=True) as (_, stub):
        table = await new_table(stub, seed="42", bots=2)
        joins = await join_all(stub, table.table_id, 2)
        spectator = PlayStream(stub, table.table_id, None, is_batched=batched)
        error = await spectator.ended()
        assert error is not None and error.code() == grpc.StatusCode.UNAUTHENTICATED
        stream = PlayStream(stub, table.table_id, joins[0].player_token, is_batched=batched)
        await stream.wait_for(lambda m: True)
        left = await stream.act(leave_table=copas_pb2.LeaveTableRequest())
        assert not left.HasField("error")
        again = await stream.act(play_card=copas_pb2.PlayCardRequest(card=card_pb("2C")))
        assert reason_of(again.error) == "SEAT_HAS_LEFT"
        await stream.close()
        # A seat given up before its game: the result, then the stream ends (token revoked).
        waiting = await new_table(stub, seed="43")
        seat = (await join_all(stub, waiting.table_id, 1))[0]
        giving_up = PlayStream(stub, waiting.table_id, seat.player_token, is_batched=batched)
        await giving_up.wait_for(lambda m: True)
        await giving_up.send(leave_table=copas_pb2.LeaveTableRequest())
        error = await giving_up.ended()
        assert error is not None and error.code() == grpc.StatusCode.UNAUTHENTICATED
        assert len(giving_up.results) == 1 and not giving_up.results[0].HasField("error")


async def test_a_failed_commit_is_a_result_and_ends_the_stream(tmp_path: Path, batched: bool
                                                               ) -> None:
    running = await start(config_for_tests(allow_seed=True, data_dir=str(tmp_path)))
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = copas_pb2_grpc.CopasServiceStub(channel)
            table = await new_table(stub, seed="42")
            joins = await join_all(stub, table.table_id, 4)
            stream = PlayStream(stub, table.table_id, joins[0].player_token, is_batched=batched)
            await stream.wait_for(lambda m: True)

            def disk_full(batch: Any) -> None:
                raise OSError("database or disk is full")

            running.store._commit = disk_full  # type: ignore[method-assign]  # fault injection
            game = Game(rules_of(table), "42")
            await stream.send(**request_for(game.auto_action(0)))
            error = await stream.ended()
            assert error is not None and error.code() == grpc.StatusCode.UNAVAILABLE
            assert [reason_of(r.error) for r in stream.results] == ["STORAGE_FAILED"]
    finally:
        await shutdown(running, 0)

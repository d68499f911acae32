"""A finished game replayed on the page (issue 40): the profile's last game opens the replay,
whose link (#/replay/<record id>) opens it in another browser too; it opens on the hand's deal
(each seat's thirteen cards, the seed replayed: what the record's passes and plays say each
seat held); stepped trick by trick to its end it shows every trick's cards by their seats as
the record has them, and the final score sheet's totals are the record's; stepping back goes
back."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import grpc
from copas.v1 import copas_pb2

from tests.helpers.browser import browser
from tests.helpers.page import NEXT_TURN, against_bots, open_page, take_turn, turn_of
from tests.helpers.servers import free_port, serving

TIMING = {"trick_pause": 0.05, "hand_pause": 0.2, "play_timeout": 120.0,
          "pass_timeout": 120.0, "moon_timeout": 120.0}
STEP = """() => {
  const box = document.getElementById("replay");
  return {
    step: Number(box.dataset.step), steps: Number(box.dataset.steps),
    where: document.getElementById("replay-where").textContent,
    cards: Array.from(document.querySelectorAll("#replay-table li[data-seat]"), (li) =>
        Array.from(li.querySelectorAll("[data-card]"),
                   (c) => [Number(li.dataset.seat), c.dataset.card])).flat(),
    totals: Array.from(document.querySelectorAll("#replay-sheet-table tr.totals td"),
                       (td) => Number(td.dataset.total)),
    next: !document.getElementById("replay-next").disabled,
  };
}"""


async def record_of(stub: Any, record_id: str) -> copas_pb2.GameRecord:
    """The game's record, once the server has written it (a deadline, not a sleep)."""
    async with asyncio.timeout(20):
        while True:
            try:
                answer = await stub.GetGameRecord(
                    copas_pb2.GetGameRecordRequest(record_id=record_id))
                return answer.record
            except grpc.aio.AioRpcError as error:
                if error.code() != grpc.StatusCode.NOT_FOUND:
                    raise
            await asyncio.sleep(0.05)


async def step_to_the_end(page: Any) -> list[dict[str, Any]]:
    seen = [await page.evaluate(STEP)]
    while seen[-1]["next"]:
        await page.click("#replay-next")
        await page.wait_for_function(
            "(n) => Number(document.getElementById('replay').dataset.step) === n",
            arg=seen[-1]["step"] + 1)
        seen.append(await page.evaluate(STEP))
    return seen


async def test_a_finished_game_replayed_to_its_end_is_its_record() -> None:
    port = free_port()
    async with (serving(web_port=port, web_host="127.0.0.1", rule_defaults=TIMING,
                        bot_pace=0.02) as (_, stub), browser() as launched):
        url = f"http://127.0.0.1:{port}/"
        page = await open_page(launched, url, locale="en-GB")
        await page.wait_for_selector("#me[data-account^=a_]")
        table_id = await against_bots(page, "Ana", "quick")
        await page.wait_for_function(NEXT_TURN, arg=-1)
        while (state := await turn_of(page))["phase"] != "GAME_OVER":
            if state["mustAct"]:
                await take_turn(page, state)
            await page.wait_for_function(NEXT_TURN, arg=state["sequence"])
        record = await record_of(stub, table_id)
        actions = json.loads(record.record_json)["actions"]
        plays = [(a["seat"], a["card"]) for a in actions if a["type"] == "play"]
        tricks = [sorted(plays[i:i + 4]) for i in range(0, len(plays), 4)]
        # Each seat's cards at the deal, from the record's actions alone: what it played, less
        # what it received (the first hand passes left: from the seat on its right), plus what
        # it passed.
        passed = {a["seat"]: set(a["cards"]) for a in actions if a["type"] == "pass"}
        dealt = {seat: {c for s, c in plays if s == seat} - passed[(seat - 1) % 4]
                 | passed[seat] for seat in range(4)}
        totals = {s.seat: s.total for s in record.standings}

        # From the profile's last games, the replay of this one.
        await page.click("#to-lobby")
        button = f"#my-games li[data-record='{record.record_id}'] button.replay-open"
        await page.click(button)
        await page.wait_for_selector("#replay[data-loaded=true]")
        assert page.url.endswith(f"/#/replay/{record.record_id}")
        seen = await step_to_the_end(page)
        shown = [sorted(tuple(c) for c in s["cards"]) for s in seen if "trick" in s["where"]]
        assert shown == tricks and len(tricks) == 13
        assert seen[-1]["totals"] == [totals[seat] for seat in range(4)]
        assert seen[0]["where"] == "Hand 1: the deal"
        assert {seat: {c for s, c in seen[0]["cards"] if s == seat} for seat in range(4)} \
            == dealt and all(len(cards) == 13 for cards in dealt.values())
        assert len(seen[0]["cards"]) == 52
        assert seen[1]["where"] == "Hand 1: the pass"  # the first hand passes left
        # Back one trick: the trick before the last.
        await page.click("#replay-prev")
        back = await page.evaluate(STEP)
        assert back["step"] == seen[-1]["step"] - 1
        assert sorted(tuple(c) for c in back["cards"]) == tricks[-2]

        # The link opens the same replay in another browser (no seat, no account of its own).
        other = await open_page(launched, f"{url}#/replay/{record.record_id}", locale="pt-PT")
        await other.wait_for_selector("#replay[data-loaded=true]")
        again = await step_to_the_end(other)
        assert [sorted(tuple(c) for c in s["cards"]) for s in again
                if "vaza" in s["where"]] == tricks
        assert again[-1]["totals"] == seen[-1]["totals"]
        await other.click("#replay-back")
        await other.wait_for_selector("#lobby:not([hidden]) #tables[data-live=true]")
        assert page.errors == [] and other.errors == []


async def test_the_tables_sounds_and_the_lobby_first_after_a_finished_game() -> None:
    """With the sound on, a game has its cues (a card, a trick, hearts broken, the Q♠; off by
    default, remembered); reopening the page after the game's end shows the lobby, not the
    finished game."""
    port = free_port()
    async with (serving(web_port=port, web_host="127.0.0.1", rule_defaults=TIMING,
                        bot_pace=0.02) as _, browser() as launched):
        page = await open_page(launched, f"http://127.0.0.1:{port}/", locale="en-GB")
        await page.wait_for_selector("#me[data-account^=a_]")
        await against_bots(page, "Ana", "quick")
        await page.wait_for_function(NEXT_TURN, arg=-1)
        assert await page.get_attribute("#sound", "aria-pressed") == "false"
        assert await page.get_attribute("#game", "data-cues") is None  # off: no sound
        await page.click("#sound")
        while (state := await turn_of(page))["phase"] != "GAME_OVER":
            if state["mustAct"]:
                await take_turn(page, state)
            await page.wait_for_function(NEXT_TURN, arg=state["sequence"])
        assert await page.get_attribute("#game", "data-cues") == "card hearts queen trick"
        await page.reload()
        await page.wait_for_selector("#lobby:not([hidden]) #tables[data-live=true]")
        assert await page.is_hidden("#game")
        assert await page.get_attribute("#sound", "aria-pressed") == "true"  # remembered
        assert page.errors == []

"""A Bisca championship on the web page, in a real headless Chromium (issue 41): an organizer
makes one with the page's form (a Bisca preset: the server gets `game` "bisca", Bisca's preset
and the card clock only, no Hearts option), the championship's panel says its game in words
(its kind, tables of 2 or one of 3, most points winning, hand, target, clock), axe-clean; the
organizer registers on the page with two accounts of reference bots, so the count is odd: the
one table is Bisca's table of 3, and the page takes its person there by itself, to a Bisca
table (the felt marked, three seats); the page's person plays it by clicks, the first legal
card, until the game ends, and the final standings come back equal to the server's."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import grpc
from copas.v1 import championships_pb2 as pb
from copas.v1 import championships_pb2_grpc

from tests.helpers.browser import AXE, axe_violations, browser
from tests.helpers.calls import auth
from tests.helpers.championships import BotPlayer, sign_in
from tests.helpers.page import AT_TABLE, NEXT, signed_in_as
from tests.helpers.servers import free_port, serving

GAME_WORDS = ("Bisca of 3 (2 players), tables of 2 (one of 3 when the count is odd), the most "
              "game points win, 3 cards, to {target} game points, 60 s a card")


async def play_the_table(page: Any, table: str) -> None:
    """Plays the page's seat by clicks, the first legal card, until its game is over."""
    while True:
        state = await page.evaluate(AT_TABLE)
        if state["table"] != table or state["phase"] == "GAME_OVER":
            return
        if state["mustAct"] and state["legal"]:
            await page.click(f'#hand button[data-card="{state["legal"][0]}"]')
        await page.wait_for_function(NEXT, arg=[table, state["sequence"]])


async def test_an_organizer_makes_a_bisca_championship_on_the_page_and_plays_its_table(
        tmp_path: Path) -> None:
    assert AXE.is_file(), "run `make ts` first (axe-core is a devDependency of clients/ts)"
    port = free_port()
    # No pauses between tricks and hands (the server's defaults under the form's rules): the
    # game is the preset's whole game, to its target.
    async with (serving(web_port=port, web_host="127.0.0.1", championship_interval=0.05,
                        rule_defaults={"trick_pause": 0.0, "hand_pause": 0.0})
                as (running, _),
                grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel,
                browser() as launched):
        address = f"127.0.0.1:{running.port}"
        champs = championships_pb2_grpc.ChampionshipServiceStub(channel)
        context = await launched.new_context(reduced_motion="reduce", bypass_csp=True,
                                             timezone_id="UTC",
                                             viewport={"width": 1280, "height": 900})
        page = await context.new_page()
        page.set_default_timeout(60_000)
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        await signed_in_as(page, f"http://127.0.0.1:{port}/", "Olga")

        # The form, with a Bisca preset (bisca3, to its target): 1 round, 3 players, when full.
        await page.click("#organize-new")
        for selector, value in (("#organize-name", "Taça da Bisca"), ("#organize-rounds", "1"),
                                ("#organize-min", "3"), ("#organize-max", "3")):
            await page.fill(selector, value)
        await page.select_option("#organize-preset", "bisca3")
        await page.select_option("#organize-clock", "relaxed")
        await page.check("#organize-when-full")
        await page.click("#organize-create")
        await page.wait_for_selector("#champ-detail[data-championship^='c_']:not([hidden])")
        cid = str(await page.get_attribute("#champ-detail", "data-championship"))
        assert await page.get_attribute("#champ-detail", "data-game") == "bisca"
        made = (await champs.GetChampionship(pb.GetChampionshipRequest(championship_id=cid))
                ).championship
        assert (made.settings.game, made.settings.preset, made.rules.game,
                made.rules.play_timeout_seconds) == ("bisca", "bisca3", "bisca", 60)
        assert await page.text_content("#champ-settings dd[data-setting=game]") == \
            GAME_WORDS.format(target=made.rules.bisca.target)
        settings_violations = await axe_violations(page)
        # The list says the game beside the rounds.
        row = f'#champ-list tr[data-championship="{cid}"]'
        await page.wait_for_selector(f"{row}[data-game=bisca]", state="attached")
        assert (await page.text_content(f"{row} td[data-label=Rounds]") or "").endswith(
            " · Bisca")

        sessions = await sign_in(address, ["Bot A", "Bot B"])
        for session in sessions:
            await champs.Register(pb.RegisterRequest(championship_id=cid),
                                  metadata=auth(session.access_token))
        bots = [asyncio.ensure_future(BotPlayer(address, s, cid).run()) for s in sessions]
        try:
            await page.click("#champ-register")  # the 3rd: it starts, one table of 3
            await page.wait_for_function(
                """() => { const g = document.getElementById("game");
                    return !g.hidden && g.dataset.table && g.dataset.phase; }""")
            await page.wait_for_selector("#felt[data-game=bisca]")
            table = (await page.evaluate(AT_TABLE))["table"]
            table_violations = await axe_violations(page)
            await play_the_table(page, table)
            await asyncio.wait_for(asyncio.gather(*bots), 240)
        finally:
            for task in bots:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        final = (await champs.GetChampionship(pb.GetChampionshipRequest(championship_id=cid))
                 ).championship
        assert final.state == pb.CHAMPIONSHIP_STATE_FINISHED
        ((only,),) = [list(r.tables) for r in final.rounds]
        assert only.table_id == table and len(only.seats) == 3
        await page.goto(f"http://127.0.0.1:{port}/?championship={cid}")
        await page.wait_for_selector("#champ-detail[data-state=FINISHED]:not([hidden])")
        await page.wait_for_selector("#champ-standings tbody tr[data-you=true]")
        shown = await page.eval_on_selector_all(
            "#champ-standings tbody tr[data-place]",
            "rows => rows.map(r => [Number(r.dataset.place), r.dataset.player])")
        assert shown == [[line.place, line.player_id] for line in final.standings]
        assert errors == []
        found = {"settings": settings_violations, "table": table_violations}
        assert not any(found.values()), found

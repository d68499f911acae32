"""A championship on the web page, in a real headless Chromium: a person signed in as this
browser's guest registers from the page's championship list, with three accounts of reference
bots (the Python client, as tests/test_championships.py plays them) making up the numbers;
the page takes the person to their table each round by itself, the person plays it by clicks,
and the page then shows the final standings with the tie-break that decided each place, the
same as the server's. axe-core finds nothing on the list, a table of the championship, or the
final standings. One-hand games, 2 rounds, bots at once. Screenshots of the list, a table
and the final standings go to tests/screenshots/ (COPAS_SCREENSHOTS names another folder)."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import Any

import grpc
from copas.admin.v1 import admin_pb2, admin_pb2_grpc
from copas.v1 import championships_pb2 as pb
from copas.v1 import championships_pb2_grpc, copas_pb2

from tests.helpers.browser import AXE, axe_violations, browser
from tests.helpers.calls import auth
from tests.helpers.championships import FAST_RULES, BotPlayer, sign_in
from tests.helpers.servers import free_port, serving

ROOT = Path(__file__).resolve().parent.parent
SHOTS = Path(os.environ.get("COPAS_SCREENSHOTS") or ROOT / "tests" / "screenshots")
ADMIN_TOKEN = "operator-token-for-the-web-championship-test"
# A person's clock: long enough for clicks on a busy machine, the bots' games at once.
RULES = copas_pb2.RulesOverrides()
RULES.CopyFrom(FAST_RULES)
RULES.play_timeout_seconds = RULES.pass_timeout_seconds = RULES.moon_timeout_seconds = 60

# Where the page is: which table it shows, its phase, whose turn, the legal cards.
AT_TABLE = """() => {
  const game = document.getElementById("game");
  return {
    table: game.hidden ? "" : game.dataset.table || "",
    phase: game.dataset.phase || "",
    sequence: Number(game.dataset.sequence || 0),
    mustAct: game.dataset.mustAct === "true",
    legal: Array.from(document.querySelectorAll("#hand button[data-legal=true]"),
                      (b) => b.dataset.card),
  };
}"""
# After the move made at ``sequence`` on ``table``: our turn again, the game over, or the page
# went elsewhere.
NEXT = """([table, sequence]) => {
  const game = document.getElementById("game");
  if (game.hidden || game.dataset.table !== table) return true;
  return Number(game.dataset.sequence) > sequence
      && (game.dataset.mustAct === "true" || game.dataset.phase === "GAME_OVER");
}"""





async def screenshot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


async def play_the_table(page: Any, table: str) -> None:
    """Plays the page's seat by clicks, the first legal cards, until its game is over."""
    while True:
        state = await page.evaluate(AT_TABLE)
        if state["table"] != table or state["phase"] == "GAME_OVER":
            return
        if state["mustAct"] and state["legal"]:
            if state["phase"] == "PASSING":
                for card in state["legal"][:3]:
                    await page.click(f'#hand button[data-card="{card}"]')
                await page.click("#pass-button")
            elif state["phase"] == "PLAYING":
                await page.click(f'#hand button[data-card="{state["legal"][0]}"]')
            else:
                await page.click("#moon button")
        await page.wait_for_function(NEXT, arg=[table, state["sequence"]])


async def test_a_person_registers_is_taken_to_each_table_and_sees_the_final_standings(
        tmp_path: Path) -> None:
    assert AXE.is_file(), "run `make ts` first (axe-core is a devDependency of clients/ts)"
    token_file = tmp_path / "admin-token"
    token_file.write_text(ADMIN_TOKEN + "\n")
    port = free_port()
    async with (serving(web_port=port, web_host="127.0.0.1", admin_token_file=str(token_file),
                        championship_interval=0.05) as (running, _),
                grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel,
                browser() as launched):
        address = f"127.0.0.1:{running.port}"
        champs = championships_pb2_grpc.ChampionshipServiceStub(channel)
        made = (await admin_pb2_grpc.AdminServiceStub(channel).CreateChampionship(
            admin_pb2.CreateChampionshipRequest(settings=pb.ChampionshipSettings(
                display_name="Web Cup", rounds=2, preset="online", rules=RULES, max_players=4,
                start_when_full=True), reason="test"),
            metadata=(("authorization", f"Bearer {ADMIN_TOKEN}"),))).championship
        cid = made.championship_id
        sessions = await sign_in(address, ["Bot A", "Bot B", "Bot C"])
        for session in sessions:
            await champs.Register(pb.RegisterRequest(championship_id=cid),
                                  metadata=auth(session.access_token))
        bots = [asyncio.ensure_future(BotPlayer(address, s, cid).run()) for s in sessions]
        try:
            context = await launched.new_context(reduced_motion="reduce", bypass_csp=True,
                                                 viewport={"width": 1280, "height": 860})
            page = await context.new_page()
            page.set_default_timeout(30_000)
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            await page.goto(f"http://127.0.0.1:{port}/")
            await page.wait_for_selector("#me[data-account^='a_']")  # signed in as a guest
            row = f'#champ-list tr[data-championship="{cid}"]'
            await page.wait_for_selector(f"{row}[data-state=REGISTERING]")
            lobby_violations = await axe_violations(page)
            await screenshot(page, "championship-list-1280")
            await page.click(f'{row} button[data-action="register"]')  # the 4th: it starts

            tables = []
            for round_number in (1, 2):  # the page goes to each table by itself
                await page.wait_for_function(
                    """(seen) => { const g = document.getElementById("game");
                        return !g.hidden && g.dataset.table && !seen.includes(g.dataset.table)
                            && g.dataset.phase && g.dataset.phase !== ""; }""", arg=tables)
                table = (await page.evaluate(AT_TABLE))["table"]
                banner = await page.text_content("#champ-banner-text") or ""
                assert f"Web Cup: round {round_number} of 2" in banner, banner
                if round_number == 1:
                    table_violations = await axe_violations(page)
                    await screenshot(page, "championship-table-1280")
                tables.append(table)
                await play_the_table(page, table)

            detail = "#lobby:not([hidden]) #champ-detail[data-state=FINISHED]:not([hidden])"
            await page.wait_for_selector(detail)
            await page.wait_for_selector("#champ-standings tbody tr[data-you=true]")
            shown = await page.evaluate("""() => Array.from(
                document.querySelectorAll("#champ-standings tbody tr"), (tr) => ({
                  place: Number(tr.dataset.place), you: tr.dataset.you === "true",
                  cells: Array.from(tr.children, (c) => c.textContent)}))""")
            final_violations = await axe_violations(page)
            await page.locator("#championships").screenshot(
                path=str(SHOTS / "championship-final-1280.png"))
            await asyncio.wait_for(asyncio.gather(*bots), 60)
        finally:
            for task in bots:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

        final = (await champs.GetChampionship(pb.GetChampionshipRequest(
            championship_id=cid))).championship
        assert final.state == pb.CHAMPIONSHIP_STATE_FINISHED
        # The page sat at the person's own seat each round: the tables of the 4th player.
        names = {s.display_name for s in sessions for s in [s.account]}
        person = [next(t.table_id for t in r.tables for s in t.seats
                       if s.display_name not in names) for r in final.rounds]
        assert tables == person
        # The page's final standings are the server's, each with the tie-break in words.
        words = {pb.TIE_BREAK_POINTS: "championship points", pb.TIE_BREAK_FIRSTS: "first places",
                 pb.TIE_BREAK_RELATIVE_POINTS: "game points against the table's average",
                 pb.TIE_BREAK_HEAD_TO_HEAD: "games between the tied players",
                 pb.TIE_BREAK_DRAW: "a seeded draw"}
        assert [(s["place"], s["cells"][1].removesuffix(" (you)"), s["cells"][2], s["cells"][5],
                 s["cells"][6]) for s in shown] == [
            (line.place, line.display_name, str(line.points), str(line.games),
             words[line.decided_by]) for line in final.standings]
        assert sum(s["you"] for s in shown) == 1
        assert errors == []
        found = {"list": lobby_violations, "table": table_violations,
                 "final standings": final_violations}
        assert not any(found.values()), found

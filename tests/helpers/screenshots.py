"""The page's screenshots for the README (issue 40): the lobby, the pass, a trick, the score
sheet at the game's end and a replay (its deal, and trick 6), in Portuguese and English, on a
laptop (1280x720) and a phone (390x844), from a server of its own and one seeded one-hand game
against bots each (the same cards every time). Redo them with

    .venv/bin/python -m tests.helpers.screenshots [FOLDER]   # docs/screenshots by default

(Debian's chromium, as the browser tests; `make web` first when the page changed)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from tests.helpers.browser import browser
from tests.helpers.calls import new_table
from tests.helpers.page import NEXT_TURN, open_page, take_turn, turn_of
from tests.helpers.servers import ROOT, free_port, serving

DEVICES = {
    "laptop": {"viewport": {"width": 1280, "height": 720}},
    "phone": {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True},
}
LANGUAGES = {"pt": ("pt-PT", "Ana"), "en": ("en-GB", "Ann")}
TIMING = {"trick_pause_seconds": 0.6, "hand_pause_seconds": 6.0, "play_timeout_seconds": 120.0,
          "pass_timeout_seconds": 120.0, "moon_timeout_seconds": 120.0}


async def shoot(page: Any, folder: Path, name: str) -> None:
    await page.wait_for_timeout(400)  # the cards' glide (reduced motion: none) and fonts
    await page.screenshot(path=str(folder / f"{name}.png"))


async def one_game(launched: Any, stub: Any, port: int, folder: Path, lang: str,
                   device: str) -> None:
    locale, player = LANGUAGES[lang]
    prefix = f"{lang}-{device}"
    table = await new_table(stub, preset="quick", bots=3, seed="screenshots", **TIMING)
    page = await open_page(launched, f"http://127.0.0.1:{port}/", DEVICES[device],
                           locale=locale)
    await page.wait_for_selector("#me[data-account^=a_]")
    await page.wait_for_selector("#tables[data-live=true] tbody tr[data-table]")
    await shoot(page, folder, f"{prefix}-lobby")
    await page.goto(f"http://127.0.0.1:{port}/?join={table.table_id}")
    await page.wait_for_selector("#invite-join:not([disabled])")
    await page.fill("#name", f"{player}-{device}")
    await page.click("#invite-join")
    await page.wait_for_function(NEXT_TURN, arg=-1)
    state = await turn_of(page)
    for text in state["legal"][:2]:  # two cards chosen, the third still to choose
        await page.click(f'#hand button[data-card="{text}"]')
    await shoot(page, folder, f"{prefix}-pass")
    await page.click(f'#hand button[data-card="{state["legal"][2]}"]')
    await page.click("#pass-button")
    has_trick = False
    while (state := await turn_of(page))["phase"] != "GAME_OVER":
        if state["mustAct"]:
            cards = await page.eval_on_selector_all("#trick [data-card]", "c => c.length")
            if not has_trick and cards >= 2 and state["phase"] == "PLAYING":
                await shoot(page, folder, f"{prefix}-trick")
                has_trick = True
            await take_turn(page, state)
        await page.wait_for_function(NEXT_TURN, arg=state["sequence"])
    await page.wait_for_selector("#standings:not([hidden]) #final-sheet")
    await shoot(page, folder, f"{prefix}-score-sheet")
    await page.click("#to-lobby")
    await page.click(f"#my-games li[data-record='{table.table_id}'] button.replay-open")
    await page.wait_for_selector("#replay[data-loaded=true]")
    await shoot(page, folder, f"{prefix}-replay-deal")
    for _ in range(7):  # past the deal and the pass, to trick 6
        await page.click("#replay-next")
    await shoot(page, folder, f"{prefix}-replay")
    await page.context.close()


async def main(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    async with (serving(web_port=port, web_host="127.0.0.1", allow_seed=True,
                        bot_pace=0.3) as (_, stub), browser() as launched):
        for lang in LANGUAGES:
            for device in DEVICES:
                await one_game(launched, stub, port, folder, lang, device)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "screenshots"))

"""The page as a person uses it, for the browser tests of issue 40 (languages, one screen,
sign-out, replays): a page in a context of its own, a table opened from the lobby, a turn
taken with the first legal cards. The older tests keep their own copies in
tests/test_web_page.py."""

from __future__ import annotations

from typing import Any

LAPTOP = {"viewport": {"width": 1280, "height": 860}}
PHONE = {"viewport": {"width": 390, "height": 844}, "device_scale_factor": 2,
         "is_mobile": True, "has_touch": True}
# Our turn (the page takes moves), or the game is over, after the event ``s``.
NEXT_TURN = """(s) => {
  const game = document.getElementById("game");
  return Number(game.dataset.sequence) > s
      && (game.dataset.mustAct === "true" || game.dataset.phase === "GAME_OVER");
}"""
TURN = """() => {
  const game = document.getElementById("game");
  return {
    phase: game.dataset.phase,
    sequence: Number(game.dataset.sequence),
    mustAct: game.dataset.mustAct === "true",
    legal: Array.from(document.querySelectorAll("#hand button[data-legal=true]"),
                      (b) => b.dataset.card),
  };
}"""


async def open_page(launched: Any, url: str, device: dict[str, Any] | None = None,
                    **options: Any) -> Any:
    """A page in a context of its own (its own storage, like another person's browser);
    ``page.errors`` collects the page's uncaught errors."""
    context = await launched.new_context(**{"reduced_motion": "reduce", **(device or LAPTOP),
                                            **options})
    page = await context.new_page()
    page.set_default_timeout(20_000)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(f"{error}: {error.stack}"))
    page.errors = errors
    await page.goto(url)
    return page


async def press(page: Any, selector: str, *, tap: bool = False) -> None:
    await (page.tap(selector) if tap else page.click(selector))


async def turn_of(page: Any) -> dict[str, Any]:
    turn: dict[str, Any] = await page.evaluate(TURN)
    return turn


async def take_turn(page: Any, state: dict[str, Any], *, tap: bool = False) -> None:
    """Play as a person would: the first legal cards, the pass button, the moon choice."""
    phase, legal = state["phase"], state["legal"]
    if phase == "PASSING":
        for text in legal[:3]:
            await press(page, f'#hand button[data-card="{text}"]', tap=tap)
        await press(page, "#pass-button", tap=tap)
    elif phase == "PLAYING":
        await press(page, f'#hand button[data-card="{legal[0]}"]', tap=tap)
    else:
        assert phase == "MOON_CHOICE", phase
        await press(page, "#moon button", tap=tap)


async def against_bots(page: Any, name: str, preset: str, *, tap: bool = False) -> str:
    """A table against three bots made with the lobby's form (the relaxed clock); its id."""
    await page.fill("#name", name)
    await page.select_option("#preset", preset)
    await page.select_option("#clock", "relaxed")
    await press(page, "#create", tap=tap)
    await page.wait_for_selector("#game:not([hidden])[data-phase]:not([data-phase=''])")
    return str(await page.get_attribute("#game", "data-table"))


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


async def signed_in_as(page: Any, url: str, name: str) -> str:
    """Opens ``url`` and names this browser's guest account ``name``; its account id."""
    await page.goto(url)
    await page.wait_for_selector("#me[data-account^='a_']")
    await page.fill("#name", name)
    await page.press("#name", "Tab")  # the change renames the account
    await page.wait_for_function("(name) => document.getElementById('me-title')"
                                 ".textContent === name", arg=name)
    return str(await page.get_attribute("#me", "data-account"))

"""Bisca on the page (issue 41): the lobby's card game chosen, a game of 2 against a bot at
1280x800 (by mouse) and one of 4 in partnerships on a 390x844 phone (by keyboard) played whole,
axe-clean; the trump card with the stock's count, the teams marked, each side's points, the
lobby's row naming the game. On every turn of ours the page's DOM holds no card the seat may
not see: only its own hand (exactly the server's), the trick, the last trick and the trump
card (the table waits for us then, so the seat's GetView is the page's view)."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import grpc
from copas.v1 import accounts_pb2, accounts_pb2_grpc, copas_pb2

from tests.helpers.browser import axe_violations, browser
from tests.helpers.page import NEXT_TURN, PHONE, open_page, turn_of
from tests.helpers.servers import free_port, serving

TIMING = {"trick_pause": 0.05, "hand_pause": 0.2, "play_timeout": 120.0}
# The page must act, or the game is over; the page saw events after sequence ``s``.
TURN_OR_END = """() => { const g = document.getElementById("game");
  return g.dataset.mustAct === "true" || g.dataset.phase === "GAME_OVER"; }"""
MOVED = """(s) => Number(document.getElementById("game").dataset.sequence) > s"""
LAPTOP_800 = {"viewport": {"width": 1280, "height": 800}}
# Every card the page's DOM names (data-card, and a card's text form anywhere in the markup),
# and the cards of the hand.
DOM_CARDS = """() => ({
  cards: Array.from(document.querySelectorAll("[data-card]"), (e) => e.dataset.card),
  hand: Array.from(document.querySelectorAll("#hand button[data-card]"), (e) => e.dataset.card),
  html: document.documentElement.outerHTML,
  session: sessionStorage.getItem("copas.session"),
  stock: document.querySelector("#table-state .stock")?.dataset.stock ?? null,
  trump: document.querySelector("#table-state .stock")?.dataset.trump ?? null,
  teams: Array.from(document.querySelectorAll("#seats li"), (e) => e.dataset.team ?? ""),
  partner: document.querySelector("#seats .tag.team")?.textContent ?? "",
  sides: document.querySelector("#table-state .sides")?.textContent ?? "",
  sidePoints: document.querySelector("#table-state .sides")?.dataset.sidePoints ?? null,
  handPoints: Array.from(document.querySelectorAll("#seats [data-hand-points]"),
                         (e) => Number(e.dataset.handPoints)),
  info: document.getElementById("game-info").textContent,
})"""
# Where the page shows the given cards (for a failure's message).
WHERE = """(cards) => cards.map((c) => Array.from(
  document.querySelectorAll(`[data-card="${c}"], [data-taken~="${c}"]`),
  (e) => (e.closest("[id]") || {}).id + ":" + e.className))"""
CARD_TEXT = re.compile(r'data-(?:card|taken|trump)="([^"]*)"')


def texts(cards: Any) -> set[str]:
    return {c.text for c in cards}


async def check_privacy(page: Any, stub: Any) -> dict[str, Any]:
    """The DOM against the seat's own view (GetView with the page's token): its hand exactly,
    and no card beyond the hand, the trick, the last trick and the trump card."""
    dom = await page.evaluate(DOM_CARDS)
    session = json.loads(dom["session"])
    view = (await stub.GetView(copas_pb2.GetViewRequest(table_id=session["tableId"]),
                               metadata=(("authorization", f"Bearer {session['token']}"),))).view
    assert sorted(dom["hand"]) == sorted(texts(view.hand)), (dom["hand"], view.hand)
    visible = texts(view.hand) | {c.card.text for c in view.trick.cards} \
        | {c.card.text for c in view.last_trick.cards} | {view.bisca.trump_card.text}
    named = set(dom["cards"]) | {t for found in CARD_TEXT.findall(dom["html"])
                                 for t in found.split() if t}
    where = await page.evaluate(WHERE, sorted(named - visible))
    assert named <= visible, (named - visible, where)
    # The points as the view says them: each seat's box, each team's in partnerships.
    assert dom["handPoints"] == [p.hand_points for p in view.players]
    if view.bisca.teams:
        assert dom["sidePoints"] == ",".join(str(p) for p in view.bisca.side_points)
    assert dom["stock"] == str(view.bisca.stock_size) and dom["trump"] == \
        view.bisca.trump_card.text
    return {**dom, "view": view}


async def play_whole_game(page: Any, stub: Any, *, keyboard: bool) -> list[dict[str, Any]]:
    """Every turn of ours to the game's end, each checked; axe on a turn mid-hand."""
    seen: list[dict[str, Any]] = []
    await page.wait_for_function(NEXT_TURN, arg=-1)
    while (state := await turn_of(page))["phase"] != "GAME_OVER":
        if state["mustAct"]:
            assert state["phase"] == "PLAYING"
            seen.append(await check_privacy(page, stub))
            if len(seen) == 3:  # a trick on the table, the stock and the points drawn
                assert not await axe_violations(page)
            card = state["legal"][-1]
            if keyboard:  # the hand's one tab stop, arrows to the card, Enter plays it
                await page.focus("#hand button[tabindex='0']")
                for _ in range(10):
                    if await page.evaluate("() => document.activeElement.dataset.card") == card:
                        break
                    await page.keyboard.press("ArrowRight")
                await page.keyboard.press("Enter")
            else:
                await page.click(f'#hand button[data-card="{card}"]')
        await page.wait_for_function(NEXT_TURN, arg=state["sequence"])
    return seen


REPLAY = """() => ({
  step: Number(document.getElementById("replay").dataset.step),
  steps: Number(document.getElementById("replay").dataset.steps),
  trump: document.getElementById("replay").dataset.trump,
  where: document.getElementById("replay-where").textContent,
  line: document.getElementById("replay-line").textContent,
  cards: Array.from(document.querySelectorAll("#replay-table li[data-seat] [data-card]"),
                    (e) => e.dataset.card),
  taken: Array.from(document.querySelectorAll("#replay-table li[data-seat] .took"),
                    (e) => Number(e.dataset.taken)),
})"""


async def check_replay(page: Any, stub: Any, table_id: str, hands: int) -> None:
    """The record replayed on the page: 20 tricks a hand, each hand's trump card, each trick's
    cards as the record's plays, and the card points each seat took adding up to the record's
    per hand (120 between them)."""
    record = (await stub.GetGameRecord(copas_pb2.GetGameRecordRequest(record_id=table_id))).record
    data = json.loads(record.record_json)
    plays = [(a["seat"], a["card"]) for a in data["actions"] if a["type"] == "play"]
    await page.goto(page.url.split("#")[0] + f"#/replay/{table_id}")
    await page.wait_for_selector("#replay[data-loaded=true]")
    shown = await page.evaluate(REPLAY)
    # Each hand: its deal (the server's Bisca module replays the seed), then its 20 tricks.
    assert len(data["deals"]) == hands and shown["steps"] == 21 * hands == hands + len(plays) // 2
    for step in range(shown["steps"]):
        shown = await page.evaluate(REPLAY)
        number, at = divmod(step, 21)
        hand = data["result"]["hands"][number]
        assert shown["trump"] == hand["trump_card"] and "trumps" in shown["where"]
        if at == 0:  # the deal: 3 cards each, the first three of the hand's plays among them
            dealt = data["deals"][number]
            assert [len(d) for d in dealt] == [3, 3] and sorted(shown["cards"]) == sorted(
                dealt[0] + dealt[1])
            first = plays[40 * number:40 * number + 2]
            assert all(card in dealt[seat] for seat, card in first)
        else:
            trick = 20 * number + at - 1
            assert shown["cards"] == [c for _, c in sorted(plays[2 * trick:2 * trick + 2])]
        if at == 20:  # the hand's last trick: what each seat took, as the record says
            assert shown["taken"] == hand["points"] and sum(shown["taken"]) == 120
        if step + 1 < shown["steps"]:
            await page.click("#replay-next")
            await page.wait_for_function(
                "(n) => Number(document.getElementById('replay').dataset.step) === n", arg=step + 1)
    assert not await axe_violations(page)


async def play_between(pages: list[Any]) -> int:
    """A game of people only, each on their page, played to its end; the cards played."""
    turns = 0
    while True:
        states = [await turn_of(p) for p in pages]
        if all(s["phase"] == "GAME_OVER" for s in states):
            return turns
        moving = [(p, s) for p, s in zip(pages, states, strict=True) if s["mustAct"]]
        if not moving:  # either page's turn (or the end) next: await the first
            waits = [asyncio.ensure_future(p.wait_for_function(TURN_OR_END)) for p in pages]
            done, rest = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            for waiting in rest:
                waiting.cancel()
            await asyncio.gather(*rest, return_exceptions=True)
            done.pop().result()
            continue
        page, state = moving[0]
        await page.click(f'#hand button[data-card="{state["legal"][0]}"]')
        await page.wait_for_function(MOVED, arg=state["sequence"])
        turns += 1


async def rated(grpc_port: int, page: Any, timeout: float = 30) -> None:
    """Until the page's account (its access token in localStorage) has a Bisca rating: the
    server takes a finished game into the ratings in the background."""
    tokens = json.loads(await page.evaluate("() => localStorage.getItem('copas.account')"))
    metadata = (("authorization", f"Bearer {tokens['accessToken']}"),)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
        accounts = accounts_pb2_grpc.AccountServiceStub(channel)
        async with asyncio.timeout(timeout):
            while not any(r.game == "bisca" for r in (await accounts.GetProfile(
                    accounts_pb2.GetProfileRequest(), metadata=metadata)).ratings):
                await asyncio.sleep(0.05)


async def open_bisca(page: Any, kind: str, *, keyboard: bool) -> str:
    await page.wait_for_selector("#me[data-account^=a_]")
    await page.fill("#name", "Ana")
    await page.select_option("#game-kind", kind)
    assert await page.is_hidden("#moon-rule") and await page.is_hidden("#preset")
    assert not await axe_violations(page)
    await page.select_option("#clock", "relaxed")
    if keyboard:
        await page.focus("#create")
        await page.keyboard.press("Enter")
    else:
        await page.click("#create")
    await page.wait_for_selector("#game:not([hidden])[data-phase]:not([data-phase=''])")
    return str(await page.get_attribute("#game", "data-table"))


async def test_a_game_of_two_against_a_bot_on_a_laptop() -> None:
    port = free_port()
    async with (serving(web_port=port, web_host="127.0.0.1", rule_defaults=TIMING,
                        bot_pace=0.02) as (_, stub), browser() as launched):
        page = await open_page(launched, f"http://127.0.0.1:{port}/", LAPTOP_800, bypass_csp=True,
                               locale="en-GB")
        table_id = await open_bisca(page, "bisca3", keyboard=False)
        table = (await stub.GetTable(copas_pb2.GetTableRequest(table_id=table_id))).table
        assert table.rules.game == "bisca" and table.rules.players == 2
        seen = await play_whole_game(page, stub, keyboard=False)
        first = seen[0]
        assert "Bisca of 3" in first["info"] and first["partner"] == ""  # alone: no teams
        assert first["sides"] == ""  # alone, each seat's box says its own points
        assert not await axe_violations(page)
        # Every card of ours, one hand after another: 20 a hand of 40 cards.
        hands = {s["view"].hand_number for s in seen}
        assert len(seen) == 20 * len(hands)
        assert [int(s["stock"]) for s in seen[:3]] == [34, 32, 30]
        await page.wait_for_selector("#standings:not([hidden])")
        standings = await page.inner_text("#standings")
        assert "Ana" in standings
        await check_replay(page, stub, table_id, hands=len(hands))
        assert not page.errors, page.errors


async def test_a_game_of_four_in_partnerships_on_a_phone_by_keyboard() -> None:
    port = free_port()
    async with (serving(web_port=port, web_host="127.0.0.1", rule_defaults=TIMING,
                        bot_pace=0.02) as (_, stub), browser() as launched):
        lobby = await open_page(launched, f"http://127.0.0.1:{port}/", locale="en-GB")
        page = await open_page(launched, f"http://127.0.0.1:{port}/", PHONE, locale="en-GB",
                               bypass_csp=True)
        table_id = await open_bisca(page, "pairs", keyboard=True)
        row = lobby.locator(f'#tables tr[data-table="{table_id}"]')
        assert "Bisca, 4 in partnerships" in await row.inner_text()
        seen = await play_whole_game(page, stub, keyboard=True)
        first = seen[0]
        assert first["teams"] == ["0", "1", "0", "1"]  # partners opposite: seats 0 and 2
        assert first["view"].bisca.teams == [0, 1, 0, 1]
        assert await page.get_attribute('#seats li[data-seat="2"]', "data-pos") == "top"
        assert "partner" in await page.inner_text('#seats li[data-seat="2"]')
        assert "team A" in first["partner"]
        assert re.fullmatch(r"A \d+ · B \d+ \(you and \S+: \d+ points, game \d+; .*\)",
                            first["sides"]), first["sides"]
        assert len(seen) == 10 * len({s["view"].hand_number for s in seen})
        # The end: each place says its team, and partners share their team's place.
        await page.wait_for_selector("#standings:not([hidden]) tr[data-team]")
        rows = await page.evaluate("""() => Array.from(
            document.querySelectorAll("#standings tr[data-seat]"),
            (r) => [Number(r.dataset.seat), r.dataset.team, r.dataset.place, r.innerText])""")
        assert sorted((seat, team) for seat, team, _, _ in rows) == [
            (0, "0"), (1, "1"), (2, "0"), (3, "1")]
        place = {seat: p for seat, _, p, _ in rows}
        assert place[0] == place[2] and place[1] == place[3]
        assert all(("team A" if seat % 2 == 0 else "team B") in text for seat, _, _, text in rows)
        assert not await axe_violations(page)
        assert not page.errors, page.errors


async def test_a_quick_match_of_bisca_between_two_pages_rates_only_bisca() -> None:
    """Two people choose Bisca of 3 and quick match: one table of theirs, played whole on both
    pages; then each profile lists a Bisca rating of 2 players (Hearts's line unmoved), the game
    in the list of games says its kind, and the leaderboard's field asks for that kind."""
    port = free_port()
    async with (serving(web_port=port, web_host="127.0.0.1", rule_defaults=TIMING,
                        bot_pace=0.02) as (running, stub), browser() as launched):
        url = f"http://127.0.0.1:{port}/"
        pages = [await open_page(launched, url, locale="en-GB", bypass_csp=True)
                 for _ in range(2)]
        for page, name in zip(pages, ("Ana", "Bea"), strict=True):
            await page.wait_for_selector("#me[data-account^=a_]")
            await page.fill("#name", name)
            await page.select_option("#game-kind", "bisca3")
            await page.click("#quick-match")
            await page.wait_for_selector("#game:not([hidden])[data-table]:not([data-table=''])")
        tables = {await p.get_attribute("#game", "data-table") for p in pages}
        assert len(tables) == 1
        table = (await stub.GetTable(copas_pb2.GetTableRequest(table_id=tables.pop()))).table
        assert (table.rules.game, table.rules.players) == ("bisca", 2)
        turns = await play_between(pages)
        assert turns % 20 == 0 and turns >= 20  # 40 cards a hand, between the two of them
        for page in pages:
            await rated(running.port, page)  # the server took the game in (within seconds)
            await page.goto(url)
            line = page.locator('#me-kinds li[data-game="bisca"][data-players="2"]')
            await line.wait_for()
            assert "Bisca, 2 players" in await line.inner_text()
            assert "1 rated game" in await line.inner_text()
            assert await page.get_attribute("#me-rating", "data-rated-games") == "0"
            assert "Bisca, 2 players: 1st of 2" in await page.inner_text("#my-games") \
                or "Bisca, 2 players: 2nd of 2" in await page.inner_text("#my-games")
            # The board of that kind: the two are provisional (fewer than 10 rated games),
            # so it is still empty, as Hearts's is.
            await page.select_option("#board-kind", "bisca:2")
            await page.wait_for_selector("#leaderboard tbody tr.empty")
            assert await page.inner_text("#board-title") == "Leaderboard (Bisca, 2 players)"
            assert not await axe_violations(page)
            assert not page.errors, page.errors


async def test_a_bisca_table_for_a_friend_through_its_link() -> None:
    """Bisca of 7 for a friend: the lobby's friends' seats follow the kind (one seat, no bot),
    the link seats the friend, and the two play it whole (40 cards a hand)."""
    port = free_port()
    async with (serving(web_port=port, web_host="127.0.0.1", rule_defaults=TIMING,
                        bot_pace=0.02) as (_, stub), browser() as launched):
        url = f"http://127.0.0.1:{port}/"
        ana = await open_page(launched, url, locale="en-GB", bypass_csp=True)
        await ana.wait_for_selector("#me[data-account^=a_]")
        await ana.fill("#name", "Ana")
        await ana.select_option("#game-kind", "bisca7")
        offered = await ana.evaluate("""() => Array.from(
            document.querySelectorAll("#friends option:not([disabled])"), (o) => o.textContent)""")
        assert offered == ["1 friend and 0 bots"]
        assert await ana.input_value("#friends") == "1"
        await ana.click("#create-friends")
        await ana.wait_for_selector("#share:not([hidden])")
        link = await ana.input_value("#share-link")
        bea = await open_page(launched, link, locale="en-GB", bypass_csp=True)
        await bea.wait_for_selector("#invite:not([hidden]) #invite-join:not([disabled])")
        await bea.fill("#name", "Bea")
        await bea.click("#invite-join")
        table = (await stub.GetTable(copas_pb2.GetTableRequest(
            table_id=link.rsplit("=", 1)[1]))).table
        assert (table.rules.game, table.rules.players, table.rules.bisca.hand_size) == (
            "bisca", 2, 7)
        assert not any(seat.is_bot for seat in table.seats)
        turns = await play_between([ana, bea])
        assert turns % 20 == 0 and turns >= 20
        assert not ana.errors and not bea.errors

"""The web page in a real headless Chromium (Debian's `chromium`, driven by Playwright; no
browser of its own): a person creates a table against three bots and plays a whole game to
the final standings while a second page watches it as a spectator. At every step the page's
DOM, and every message either page received (recorded under the page's `fetch`), are checked:
no card of another player ever reaches the page. Without chromium these tests fail."""

from __future__ import annotations

import base64
import contextlib
import json
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from copas.v1 import copas_pb2
from google.protobuf import message_factory
from google.protobuf.message import Message

from engine import PlayCard
from engine.cards import cards_of
from engine.game import Game
from engine.record import replay
from tests.helpers.calls import new_table
from tests.helpers.servers import free_port, serving

ROOT = Path(__file__).resolve().parent.parent
TS_DIR = ROOT / "clients" / "ts"
BUNDLE = ROOT / "server" / "web" / "app.js"
SERVICE = copas_pb2.DESCRIPTOR.services_by_name["CopasService"]
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]
# Short pauses, long enough limits that the countdown shows and never runs out.
TIMING = {"trick_pause": 0.05, "hand_pause": 0.1, "play_timeout": 120.0,
          "pass_timeout": 120.0, "moon_timeout": 120.0}
PRIVATE = ("hand", "pass_choice", "received", "legal_cards")

# Installed before the page's own scripts: keeps a copy of every copas.v1 response body.
RECORD_RESPONSES = """
(() => {
  const wire = [];
  window.__copasWire = wire;
  const fetchFromNetwork = window.fetch.bind(window);
  const base64 = (bytes) => {
    let text = "";
    for (let i = 0; i < bytes.length; i += 0x8000) {
      text += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
    }
    return btoa(text);
  };
  window.fetch = async (input, init) => {
    const response = await fetchFromNetwork(input, init);
    const url = typeof input === "string" ? input : input.url;
    if (!url.includes("/copas.v1.CopasService/") || !response.body) return response;
    const [forPage, forTest] = response.body.tee();
    const entry = { url, type: response.headers.get("content-type") || "", chunks: [] };
    wire.push(entry);
    (async () => {
      const reader = forTest.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        entry.chunks.push(base64(value));
      }
    })();
    return new Response(forPage, { status: response.status, headers: response.headers });
  };
})();
"""

# What a turn needs to know, and the cards the page shows (with where), in one round trip.
PAGE_STATE = """() => {
  const game = document.getElementById("game");
  const countdown = document.getElementById("countdown");
  return {
    phase: game.dataset.phase,
    sequence: Number(game.dataset.sequence),
    legal: Array.from(document.querySelectorAll("#hand button[data-legal=true]"),
                      (b) => b.dataset.card),
    seconds: countdown.dataset.seconds === undefined ? null : Number(countdown.dataset.seconds),
    direction: document.getElementById("pass-direction").dataset.direction,
    error: document.getElementById("error").textContent,
    cards: Array.from(document.querySelectorAll("[data-card]"), (e) => ({
      card: e.dataset.card,
      where: e.closest("#trick, #last-trick") ? "table" : e.closest("#hand") ? "hand"
           : e.closest("#pass-direction") ? "received" : "elsewhere",
    })),
    wire: window.__copasWire,
  };
}"""
# Our turn (the page takes moves) or the game is over, after the event ``s``.
NEXT_TURN = """(s) => {
  const game = document.getElementById("game");
  return Number(game.dataset.sequence) > s
      && (game.dataset.mustAct === "true" || game.dataset.phase === "GAME_OVER");
}"""


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, ("chromium is needed for the web page tests: apt-get install -y chromium "
                   "(.ci/run installs it)")
    return found


@contextlib.asynccontextmanager
async def browser() -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        # Playwright gives each launch a fresh profile (its own --user-data-dir).
        launched = await playwright.chromium.launch(executable_path=chromium(),
                                                    args=CHROMIUM_FLAGS)
        try:
            yield launched
        finally:
            await launched.close()


async def open_page(launched: Any, url: str) -> Any:
    page = await (await launched.new_context(reduced_motion="reduce")).new_page()
    page.set_default_timeout(20_000)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.errors = errors
    await page.add_init_script(RECORD_RESPONSES)
    await page.goto(url)
    return page


# ----------------------------------------------------------------- what the page received

def _envelopes(body: bytes) -> Iterator[bytes]:
    """The messages of a Connect stream (5-byte headers), without the end-of-stream one."""
    at = 0
    while at + 5 <= len(body):
        flags, size = body[at], int.from_bytes(body[at + 1:at + 5], "big")
        payload = body[at + 5:at + 5 + size]
        at += 5 + size
        if flags & 0x02:
            end = json.loads(payload or b"{}")
            assert "error" not in end, end
            continue
        yield payload


def received_messages(wire: list[dict[str, Any]]) -> list[Message]:
    """Every copas.v1 response message the page got, decoded as its method's response."""
    messages: list[Message] = []
    for entry in wire:
        method = SERVICE.methods_by_name[entry["url"].rsplit("/", 1)[1]]
        response = message_factory.GetMessageClass(method.output_type)
        body = b"".join(base64.b64decode(chunk) for chunk in entry["chunks"])
        if entry["type"].startswith("application/connect+proto"):
            messages += [response.FromString(p) for p in _envelopes(body)]
        elif entry["type"].startswith("application/proto"):
            messages.append(response.FromString(body))
        else:  # an error (JSON): nothing of a table in it
            assert entry["type"].startswith("application/json"), entry["type"]
    return messages


def cards_in(message: Message, path: str = "") -> Iterator[tuple[str, str]]:
    """(path, card text) for every Card anywhere in ``message``."""
    for descriptor, value in message.ListFields():
        if descriptor.message_type is None:
            continue
        here = f"{path}.{descriptor.name}" if path else descriptor.name
        items = value if descriptor.is_repeated else [value]
        for item in items:
            if descriptor.message_type.full_name == "copas.v1.Card":
                yield here, item.text
            else:
                yield from cards_in(item, here)


@dataclass
class Truth:
    """From the finished game's record, replayed: the cards one seat held in each hand (dealt
    and received), and every card played per hand, in order."""

    seat: int | None
    held: dict[int, set[str]] = field(default_factory=dict)
    plays: dict[int, list[tuple[int, str]]] = field(default_factory=dict)

    @classmethod
    def of(cls, record_json: str, seat: int | None) -> Truth:
        data = json.loads(record_json)
        truth = cls(seat)
        game = Game(replay(data).rules, data["seed"])
        truth.note(game)
        for action in replay(data).actions:
            if isinstance(action, PlayCard):
                truth.plays.setdefault(game.hand_number, []).append((action.seat, str(action.card)))
            game.apply(action)
            truth.note(game)
        return truth

    def note(self, game: Game) -> None:
        if self.seat is not None and game.hand_number >= 0:
            self.held.setdefault(game.hand_number, set()).update(
                str(c) for c in cards_of(game.hands[self.seat]))


def pairs(trick: copas_pb2.Trick) -> list[tuple[int, str]]:
    return [(c.seat, c.card.text) for c in trick.cards]


def is_slice(part: list[Any], whole: list[Any], step: int = 1) -> bool:
    """``part`` appears in ``whole`` in one piece, starting at a multiple of ``step``."""
    return any(whole[i:i + len(part)] == part for i in range(0, len(whole) - len(part) + 1, step))


def check_messages(messages: list[Message], truth: Truth, players: int = 4) -> int:
    """No message holds a card of another seat: private fields only in this seat's own view
    and only with cards it held; public cards only as the plays they were, trick by trick.
    Returns how many table events were checked."""
    events = [m.event for m in messages if isinstance(m, copas_pb2.WatchTableResponse)]
    hand: int | None = None
    seen: dict[int, list[tuple[int, str]]] = {}
    for event in events:
        view = event.view
        kind = event.WhichOneof("kind")
        if event.HasField("view"):
            assert view.HasField("seat") == (truth.seat is not None)
            assert truth.seat is None or view.seat == truth.seat
        if kind == "snapshot" and hand is None:
            hand = view.hand_number
        elif kind == "hand_started":
            hand = event.hand_started.hand_number
        elif kind == "card_played":
            assert hand is not None
            seen.setdefault(hand, []).append((event.card_played.seat, event.card_played.card.text))
        elif kind == "trick_won":
            assert hand is not None
            assert is_slice(pairs(event.trick_won.trick), truth.plays[hand], players)
        if view.trick.cards:
            assert is_slice(pairs(view.trick), truth.plays[view.hand_number], players)
        if view.last_trick.cards:
            assert any(is_slice(pairs(view.last_trick), truth.plays.get(h, []), players)
                       for h in (view.hand_number, view.hand_number - 1))
        for path, text in cards_in(event):
            if path.rsplit(".", 1)[-1] in PRIVATE:
                assert path.startswith("view."), path  # only in a view, never in an event
                assert truth.seat is not None, f"a spectator got {text} in {path}"
                assert text in truth.held[view.hand_number], f"{text} in {path} is not ours"
            else:
                assert path in {"card_played.card", "trick_won.trick.cards.card",
                                "view.trick.cards.card", "view.last_trick.cards.card"}, path
    for number, made in seen.items():  # every play the page saw, in the order it was made
        assert is_slice(made, truth.plays[number]), number
    return len(events)


# ----------------------------------------------------------------- driving the page

async def wire_of(page: Any) -> list[Message]:
    return received_messages(await page.evaluate("() => window.__copasWire"))


def check_page(state: dict[str, Any]) -> None:
    """The DOM shows what the latest view holds: this seat's hand, its received cards, the
    trick and the last trick; and no other card anywhere."""
    latest = [m.event.view for m in received_messages(state["wire"])
              if isinstance(m, copas_pb2.WatchTableResponse) and m.event.HasField("view")][-1]
    shown = state["cards"]
    assert sorted(c["card"] for c in shown if c["where"] == "hand") == sorted(
        c.text for c in latest.hand)
    assert {c["card"] for c in shown if c["where"] == "received"} <= {
        c.text for c in latest.received}
    assert {c["card"] for c in shown if c["where"] == "table"} <= {
        text for _, text in pairs(latest.trick) + pairs(latest.last_trick)}
    assert not [c for c in shown if c["where"] == "elsewhere"]


async def take_turn(page: Any, state: dict[str, Any]) -> None:
    """Play as a person would: the first legal cards, the pass button, the moon choice; then
    wait until it is our turn again, or the game is over."""
    phase, legal = state["phase"], state["legal"]
    assert not state["error"], state["error"]  # the last move was accepted
    assert legal, "it is our turn, yet no card is marked legal"
    assert state["seconds"] is not None and 0 < state["seconds"] <= 120  # the live countdown
    if phase == "PASSING":
        assert state["direction"] in ("left", "right", "across")
        for text in legal[:3]:
            await page.click(f'#hand button[data-card="{text}"]')
        await page.click("#pass-button")
    elif phase == "PLAYING":
        await page.click(f'#hand button[data-card="{legal[0]}"]')
    else:
        assert phase == "MOON_CHOICE"
        await page.click("#moon button")
    await page.wait_for_function(NEXT_TURN, arg=state["sequence"])


async def test_a_person_plays_a_whole_game_against_bots_and_a_spectator_watches() -> None:
    port = free_port()
    async with (serving(web_port=port, web_host="127.0.0.1", rule_defaults=TIMING)
                as (running, stub), browser() as launched):
        url = f"http://127.0.0.1:{port}/"
        player = await open_page(launched, url)
        await player.fill("#name", "Ana")
        await player.select_option("#preset", "online")
        await player.click("#create")
        await player.wait_for_selector("#hand button")
        table_id = (await player.text_content("#game-title") or "").rsplit(" ", 1)[-1]

        spectator = await open_page(launched, url)
        await spectator.click(f'#tables tr[data-table="{table_id}"] button:text("Watch")')
        await spectator.wait_for_selector("#seats li")

        await player.wait_for_function(NEXT_TURN, arg=-1)
        turns = 0
        while (state := await player.evaluate(PAGE_STATE))["phase"] != "GAME_OVER":
            check_page(state)
            await take_turn(player, state)
            turns += 1
        check_page(state)
        assert turns >= 13 and not state["error"]
        await player.wait_for_selector("#standings:not([hidden]) tr")
        places = await player.eval_on_selector_all("#standings tbody tr", "rows => rows.length")
        assert places == 4 and await player.is_visible("#hand-score")
        await spectator.wait_for_selector("#standings:not([hidden]) tr")
        assert not await spectator.eval_on_selector_all(
            "#hand [data-card], #pass-direction [data-card]", "cards => cards.length")
        assert player.errors == [] and spectator.errors == []

        record = (await stub.GetGameRecord(copas_pb2.GetGameRecordRequest(
            record_id=table_id))).record
        seat = next(s.seat for s in record.seats if s.display_name == "Ana")
        assert check_messages(await wire_of(player), Truth.of(record.record_json, seat)) > 50
        assert check_messages(await wire_of(spectator), Truth.of(record.record_json, None)) > 50
        assert running.page is not None


async def test_a_person_joins_a_waiting_table_from_the_list() -> None:
    port = free_port()
    async with (serving(web_port=port, web_host="127.0.0.1", rule_defaults=TIMING,
                        allow_seed=True) as (_, stub), browser() as launched):
        table = await new_table(stub, bots=3, seed=None)
        page = await open_page(launched, f"http://127.0.0.1:{port}/")
        await page.fill("#name", "Bea")
        await page.click(f'#tables tr[data-table="{table.table_id}"] button:text("Join")')
        await page.wait_for_selector("#hand button[data-legal=true]")
        assert await page.eval_on_selector_all("#hand button", "b => b.length") == 13
        assert "Bea (you)" in (await page.text_content("#seats") or "")
        check_page(await page.evaluate(PAGE_STATE))


def test_the_committed_page_bundle_is_what_clients_ts_builds(tmp_path: Path) -> None:
    node = shutil.which("node")
    assert node is not None, "Node.js is needed to build the page"
    assert (TS_DIR / "node_modules").is_dir(), "run `make ts` first"
    built = tmp_path / "app.js"
    subprocess.run([node, "build-web.mjs", str(built)], cwd=TS_DIR, check=True, timeout=120)
    assert built.read_bytes() == BUNDLE.read_bytes(), (
        "server/web/app.js is stale: run `make web` and commit it")

// The page copas-server serves on --web-port: create or join a table against bots, play from
// your view (the legal cards marked), or watch any table. It speaks copas.v1 over the Connect
// protocol (connect-web) to the same server; everything shown comes from the views the server
// streams, which hold no other player's cards. Plain DOM: every server string goes in as text.

import { create } from "@bufbuild/protobuf";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { type Card, CardSchema, Suit } from "../gen/copas/v1/cards_pb.js";
import {
  CopasService,
  GameEndReason,
  type HandScored,
  MoonChoice,
  PassDirection,
  Phase,
  type TableEvent,
  type TableSummary,
  type TableView,
  type Trick,
} from "../gen/copas/v1/copas_pb.js";
import { isOver, mustAct, pretty, refusal, sameCard } from "../copas.js";

const client = createClient(
  CopasService,
  createConnectTransport({ baseUrl: location.origin, useBinaryFormat: true }),
);

/** Where this tab is: at a table with a seat (token), or watching one. */
interface Session {
  tableId: string;
  token?: string;
  seat?: number;
}

const SESSION_KEY = "copas.session";
const state = {
  session: undefined as Session | undefined,
  view: undefined as TableView | undefined,
  sequence: 0n,
  lastHand: undefined as HandScored | undefined,
  chosen: [] as Card[], // the cards picked for a pass
  deadline: undefined as number | undefined, // performance.now() when the turn runs out
  resumes: undefined as number | undefined, // performance.now() when a pause ends
  isBusy: false, // a move is on its way
  watching: undefined as AbortController | undefined,
};

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;

function element<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  text = "",
  attributes: Record<string, string> = {},
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  node.textContent = text;
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  return node;
}

// ------------------------------------------------------------------ cards and names

const SUIT_NAME: Record<number, string> = {
  [Suit.CLUBS]: "clubs",
  [Suit.DIAMONDS]: "diamonds",
  [Suit.SPADES]: "spades",
  [Suit.HEARTS]: "hearts",
};
const RANK_NAME: Record<string, string> = { J: "jack", Q: "queen", K: "king", A: "ace" };

function cardLabel(card: Card): string {
  const rank = card.text.slice(0, -1);
  return `${RANK_NAME[rank] ?? rank} of ${SUIT_NAME[card.suit] ?? "?"}`;
}

function cardFace(card: Card, tag: "span" | "button" = "span"): HTMLElement {
  const face = element(tag, pretty(card), { "data-card": card.text, "aria-label": cardLabel(card) });
  face.className = card.suit === Suit.HEARTS || card.suit === Suit.DIAMONDS ? "card red" : "card";
  return face;
}

function seatName(view: TableView, seat: number): string {
  const name = view.players[seat]?.displayName || `Seat ${seat + 1}`;
  return seat === view.seat ? `${name} (you)` : name;
}

/** The seat that gets this seat's pass. */
function passTarget(view: TableView, seat: number): number | undefined {
  const n = view.players.length;
  switch (view.passDirection) {
    case PassDirection.LEFT:
      return (seat + 1) % n;
    case PassDirection.RIGHT:
      return (seat + n - 1) % n;
    case PassDirection.ACROSS:
      return (seat + 2) % n;
    default:
      return undefined;
  }
}

const DIRECTION: Record<number, string> = {
  [PassDirection.LEFT]: "left",
  [PassDirection.RIGHT]: "right",
  [PassDirection.ACROSS]: "across",
};
const END_REASON: Record<number, string> = {
  [GameEndReason.HAND_LIMIT]: "the last hand was played",
  [GameEndReason.POINT_LIMIT]: "someone reached the point limit",
  [GameEndReason.LAST_PLAYER]: "everyone else left",
  [GameEndReason.ABANDONED]: "the table was abandoned",
};
const MOON_TEXT: Record<number, string> = {
  [MoonChoice.SUBTRACT_FROM_SELF]: "Take 26 off my total",
  [MoonChoice.ADD_TO_OTHERS]: "Add 26 to everyone else",
};

// ------------------------------------------------------------------ the stream

/** Seconds until the view's deadline, measured on the server's clock (event time). */
function timeLeftMs(event: TableEvent, view: TableView): number | undefined {
  // TableView.time_left (a Duration beside deadline) will say this directly: read it here.
  if (!view.deadline || !event.time) return undefined;
  return timestampMs(view.deadline) - timestampMs(event.time);
}

function onEvent(event: TableEvent): void {
  const kind = event.kind;
  if (kind.case === "handScored") state.lastHand = kind.value;
  if (kind.case === "snapshot") {
    for (const missed of kind.value.missedEvents) {
      if (missed.kind.case === "handScored") state.lastHand = missed.kind.value;
    }
  }
  const view = event.view;
  if (!view) return;
  if (state.view && view.handNumber !== state.view.handNumber) state.chosen = [];
  state.view = view;
  state.sequence = event.sequence;
  const now = performance.now();
  const left = timeLeftMs(event, view);
  state.deadline = left === undefined ? undefined : now + left;
  state.resumes =
    view.pausedUntil && event.time ? now + timestampMs(view.pausedUntil) - timestampMs(event.time) : undefined;
  render();
}

async function watch(session: Session, signal: AbortSignal): Promise<void> {
  const headers: Record<string, string> = session.token ? { authorization: `Bearer ${session.token}` } : {};
  let failures = 0;
  while (!signal.aborted) {
    try {
      const stream = client.watchTable({ tableId: session.tableId, afterSequence: state.sequence }, { headers, signal });
      for await (const { event } of stream) {
        failures = 0;
        if (event) onEvent(event);
      }
      // The server ended the stream: it is restarting, or the finished table has gone.
      if ((state.view && isOver(state.view)) || failures >= 8) return;
      failures += 1;
      await new Promise((resolve) => setTimeout(resolve, Math.min(200 * 2 ** failures, 3000)));
    } catch (error) {
      if (signal.aborted) return;
      const why = refusal(error);
      if (!["UNAVAILABLE", "UNKNOWN", "INTERNAL", "DEADLINE_EXCEEDED"].includes(why.code) || failures >= 8) {
        showError(`The table stream ended: ${why.reason}: ${why.message}`);
        return;
      }
      failures += 1;
      await new Promise((resolve) => setTimeout(resolve, why.retryAfterMs ?? Math.min(200 * 2 ** failures, 3000)));
    }
  }
}

function enterTable(session: Session): void {
  state.watching?.abort();
  Object.assign(state, { session, view: undefined, sequence: 0n, lastHand: undefined, chosen: [] });
  if (session.token) sessionStorage.setItem(SESSION_KEY, JSON.stringify(session));
  $("lobby").hidden = true;
  $("game").hidden = false;
  $("game-title").textContent = `${session.token ? "Table" : "Watching table"} ${session.tableId}`;
  showError("");
  render();
  const watching = new AbortController();
  state.watching = watching;
  void watch(session, watching.signal);
}

function leaveToLobby(): void {
  state.watching?.abort();
  state.session = undefined;
  state.view = undefined;
  sessionStorage.removeItem(SESSION_KEY);
  $("game").hidden = true;
  $("lobby").hidden = false;
  void listTables();
}

// ------------------------------------------------------------------ moves

function showError(text: string): void {
  $("error").textContent = text;
}

async function act(move: (tableId: string, headers: Record<string, string>) => Promise<unknown>): Promise<void> {
  const session = state.session;
  if (!session?.token || state.isBusy) return;
  state.isBusy = true;
  showError("");
  render();
  try {
    await move(session.tableId, { authorization: `Bearer ${session.token}` });
  } catch (error) {
    const why = refusal(error);
    showError(`Refused (${why.reason}): ${why.message}`);
  } finally {
    state.isBusy = false;
    render();
  }
}

/** A fresh request id: 32 random hex digits (randomUUID needs https; this does not). */
function requestId(): string {
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
}

function cardRef(card: Card): Card {
  return create(CardSchema, { suit: card.suit, rank: card.rank });
}

function onCard(card: Card): void {
  const view = state.view;
  if (!view || !mustAct(view)) return;
  if (view.phase === Phase.PASSING) {
    const index = state.chosen.findIndex((c) => sameCard(c, card));
    if (index >= 0) state.chosen.splice(index, 1);
    else if (state.chosen.length < 3) state.chosen.push(card);
    render();
    return;
  }
  void act((tableId, headers) => client.playCard({ tableId, card: cardRef(card), requestId: requestId() }, { headers }));
}

function onPass(): void {
  if (state.chosen.length !== 3) return;
  const cards = state.chosen.map(cardRef);
  void act(async (tableId, headers) => {
    await client.passCards({ tableId, cards, requestId: requestId() }, { headers });
    state.chosen = [];
  });
}

// ------------------------------------------------------------------ drawing

function render(): void {
  const view = state.view;
  const game = $("game");
  game.dataset.sequence = String(state.sequence);
  game.dataset.phase = view ? Phase[view.phase] : "";
  game.dataset.mustAct = String(!!view && mustAct(view) && !state.isBusy);
  if (!view) {
    $("status").textContent = "Connecting…";
    return;
  }
  renderStatus(view);
  renderSeats(view);
  renderTrick($("trick"), "Trick", view.trick, view);
  const last = view.lastTrick;
  const winner = view.lastTrickWinner;
  $("last-trick").hidden = !last || last.cards.length === 0;
  renderTrick($("last-trick"), winner === undefined ? "Last trick" : `Last trick, to ${seatName(view, winner)}`, last, view);
  renderHand(view);
  renderMoon(view);
  renderHandScore(view);
  renderStandings(view);
  const isSeated = !!state.session?.token && !isOver(view);
  $("leave").hidden = !isSeated;
  $("back").hidden = isSeated; // a seated player leaves with "Leave the table"
  tick();
}

function renderStatus(view: TableView): void {
  let text: string;
  const toAct = view.toAct.map((s) => seatName(view, s)).join(", ");
  if (view.phase === Phase.WAITING_FOR_PLAYERS) text = "Waiting for players to join.";
  else if (isOver(view)) text = `Game over: ${END_REASON[view.endReason] ?? "it ended"}.`;
  else if (view.pausedUntil) text = view.toAct.length ? "" : "A short pause…";
  else if (mustAct(view) && view.phase === Phase.PASSING) text = "Your turn: choose three cards to pass.";
  else if (mustAct(view) && view.phase === Phase.MOON_CHOICE) text = "You shot the moon! Choose how it scores.";
  else if (mustAct(view)) text = "Your turn: play a card.";
  else text = view.phase === Phase.PASSING ? `Waiting for ${toAct} to pass.` : `${toAct} to play.`;
  if (state.isBusy) text = "Sending your move…";
  $("status").textContent = text || "A short pause…";

  const direction = DIRECTION[view.passDirection];
  const line = $("pass-direction");
  line.hidden = view.handNumber < 0 || isOver(view);
  if (!direction) {
    line.textContent = `Hand ${view.handNumber + 1}: no passing this hand.`;
  } else if (view.seat !== undefined) {
    const target = passTarget(view, view.seat);
    line.textContent = `Hand ${view.handNumber + 1}: pass ${direction}, to ${target === undefined ? "?" : seatName(view, target)}.`;
    if (view.received.length) line.append(" You received ", ...view.received.map((c) => cardFace(c)), ".");
  } else {
    line.textContent = `Hand ${view.handNumber + 1}: cards pass ${direction}.`;
  }
  line.dataset.direction = direction ?? "hold";
}

function renderSeats(view: TableView): void {
  const list = $("seats");
  list.replaceChildren(
    ...view.players.map((player) => {
      const item = element("li", "", {
        "data-seat": String(player.seat),
        "data-to-act": String(view.toAct.includes(player.seat) && !view.pausedUntil),
        "data-you": String(player.seat === view.seat),
      });
      const flags = [
        player.isBot ? "bot" : "",
        player.hasLeft ? "left the table" : "",
        !player.isBot && !player.isConnected && !player.hasLeft ? "away" : "",
        view.phase === Phase.PASSING && player.hasPassed ? "has passed" : "",
      ].filter(Boolean);
      item.append(
        element("div", seatName(view, player.seat), { class: "name" }),
        element("div", flags.join(", ")),
        element("div", `This hand: ${player.handPoints} · Total: ${player.total}`, {
          "data-hand-points": String(player.handPoints),
          "data-total": String(player.total),
        }),
        element("div", `${player.cardCount} cards`),
      );
      return item;
    }),
  );
}

function renderTrick(box: HTMLElement, caption: string, trick: Trick | undefined, view: TableView): void {
  const cards = trick?.cards ?? [];
  box.replaceChildren(
    element("span", caption, { class: "caption" }),
    ...cards.map((played) => {
      const spot = element("div", "", { class: "played", "data-seat": String(played.seat) });
      if (played.card) spot.append(cardFace(played.card));
      spot.append(element("span", seatName(view, played.seat)));
      return spot;
    }),
  );
}

function renderHand(view: TableView): void {
  const hand = $("hand");
  const canAct = mustAct(view) && !state.isBusy;
  const focused = hand.contains(document.activeElement) ? (document.activeElement as HTMLElement).dataset.card : "";
  hand.hidden = view.seat === undefined;
  hand.replaceChildren(
    ...view.hand.map((card) => {
      const isLegal = canAct && view.legalCards.some((c) => sameCard(c, card));
      const face = cardFace(card, "button") as HTMLButtonElement;
      face.type = "button";
      face.disabled = !isLegal;
      face.dataset.legal = String(isLegal);
      if (isLegal) face.classList.add("legal");
      if (view.phase === Phase.PASSING) {
        face.setAttribute("aria-pressed", String(state.chosen.some((c) => sameCard(c, card))));
      }
      face.addEventListener("click", () => onCard(card));
      return face;
    }),
  );
  if (focused) {
    // Keyboard players keep their place: the same card, or the first one still there.
    const again = hand.querySelector<HTMLButtonElement>(`[data-card="${focused}"]:not(:disabled)`);
    (again ?? hand.querySelector<HTMLButtonElement>("button:not(:disabled)"))?.focus();
  }
  const pass = $<HTMLButtonElement>("pass-button");
  pass.hidden = !(canAct && view.phase === Phase.PASSING);
  pass.disabled = state.chosen.length !== 3;
  pass.textContent =
    state.chosen.length === 3
      ? `Pass ${state.chosen.map(pretty).join(" ")}`
      : `Choose ${3 - state.chosen.length} more card${state.chosen.length === 2 ? "" : "s"} to pass`;
}

function renderMoon(view: TableView): void {
  const box = $("moon");
  const choices = mustAct(view) && view.phase === Phase.MOON_CHOICE ? view.moonChoices : [];
  box.hidden = choices.length === 0;
  box.replaceChildren(
    ...choices.map((choice) => {
      const button = element("button", MOON_TEXT[choice] ?? MoonChoice[choice], {
        type: "button",
        "data-choice": MoonChoice[choice],
      });
      button.addEventListener("click", () =>
        act((tableId, headers) => client.chooseMoon({ tableId, choice, requestId: requestId() }, { headers })),
      );
      return button;
    }),
  );
}

function scoreTable(headings: string[], rows: (string | number)[][]): HTMLTableElement {
  const table = element("table");
  const head = element("tr");
  head.append(...headings.map((h) => element("th", h, { scope: "col" })));
  table.append(element("thead"), element("tbody"));
  table.tHead!.append(head);
  for (const row of rows) {
    const line = element("tr");
    line.append(...row.map((cell) => element("td", String(cell))));
    table.tBodies[0]!.append(line);
  }
  return table;
}

function renderHandScore(view: TableView): void {
  const box = $("hand-score");
  const hand = state.lastHand;
  box.hidden = !hand;
  if (!hand) return;
  const moon = hand.moonShooter === undefined ? "" : ` ${seatName(view, hand.moonShooter)} shot the moon!`;
  box.replaceChildren(
    element("h3", `Hand ${hand.handNumber + 1} scored.${moon}`),
    scoreTable(
      ["Player", "Taken", "Points", "Total"],
      hand.totals.map((total, seat) => [seatName(view, seat), hand.taken[seat] ?? 0, hand.points[seat] ?? 0, total]),
    ),
  );
}

function renderStandings(view: TableView): void {
  const box = $("standings");
  box.hidden = !isOver(view);
  if (!isOver(view)) return;
  box.replaceChildren(
    element("h3", "Final standings"),
    scoreTable(
      ["Place", "Player", "Total"],
      view.standings.map((s) => [s.place, seatName(view, s.seat) + (s.hasLeft ? " (left)" : ""), s.total]),
    ),
  );
}

/** The live countdown: the time left for whoever must act, or until the pause ends. */
function tick(): void {
  const countdown = $("countdown");
  const view = state.view;
  const until = view?.pausedUntil ? state.resumes : state.deadline;
  if (!view || until === undefined || isOver(view)) {
    countdown.textContent = "";
    countdown.removeAttribute("data-seconds");
    return;
  }
  const rules = view.rules;
  const limit = view.pausedUntil
    ? Infinity
    : view.phase === Phase.PASSING
      ? rules?.passTimeoutSeconds
      : view.phase === Phase.MOON_CHOICE
        ? rules?.moonTimeoutSeconds
        : rules?.playTimeoutSeconds;
  // Never more than the table's limit (the deadline and the event's time are a step apart).
  const seconds = Math.max(0, Math.min(Math.ceil((until - performance.now()) / 1000), limit || Infinity));
  countdown.dataset.seconds = String(seconds);
  countdown.classList.toggle("urgent", !view.pausedUntil && seconds <= 5);
  countdown.textContent = view.pausedUntil
    ? `Play resumes in ${seconds} s`
    : `${mustAct(view) ? "You have" : "Time left:"} ${seconds} s`;
}

// ------------------------------------------------------------------ the lobby

const PHASE_TEXT: Record<number, string> = {
  [Phase.WAITING_FOR_PLAYERS]: "waiting for players",
  [Phase.PASSING]: "passing",
  [Phase.PLAYING]: "playing",
  [Phase.MOON_CHOICE]: "moon choice",
  [Phase.GAME_OVER]: "game over",
};

async function listTables(): Promise<void> {
  const body = $<HTMLTableElement>("tables").tBodies[0]!;
  try {
    const { tables } = await client.listTables({ pageSize: 50 });
    body.replaceChildren(...tables.map(tableRow));
    if (tables.length === 0) {
      const empty = element("tr");
      empty.append(element("td", "No tables yet."));
      body.append(empty);
    }
  } catch (error) {
    const why = refusal(error);
    showLobbyError(`Could not list the tables (${why.reason}): ${why.message}`);
  }
}

function tableRow(table: TableSummary): HTMLTableRowElement {
  const row = element("tr", "", { "data-table": table.tableId });
  const players = table.seats.map((s) => (s.isTaken ? s.displayName : "(free)")).join(", ");
  row.append(
    element("td", table.displayName || table.tableId),
    element("td", table.preset),
    element("td", PHASE_TEXT[table.phase] ?? ""),
    element("td", players),
  );
  const actions = element("td");
  const freeSeat = table.seats.some((s) => !s.isTaken);
  if (freeSeat && table.phase === Phase.WAITING_FOR_PLAYERS) {
    const join = element("button", "Join", { type: "button", "aria-label": `Join ${table.displayName || table.tableId}` });
    join.addEventListener("click", () => void joinTable(table.tableId));
    actions.append(join, " ");
  }
  const watchButton = element("button", "Watch", {
    type: "button",
    "aria-label": `Watch ${table.displayName || table.tableId}`,
  });
  watchButton.addEventListener("click", () => enterTable({ tableId: table.tableId }));
  actions.append(watchButton);
  row.append(actions);
  return row;
}

function showLobbyError(text: string): void {
  let line = document.getElementById("lobby-error");
  if (!line) {
    line = element("p", "", { id: "lobby-error", role: "alert" });
    $("lobby").prepend(line);
  }
  line.textContent = text;
}

function playerName(): string {
  return $<HTMLInputElement>("name").value.trim() || "Player";
}

async function joinTable(tableId: string): Promise<void> {
  try {
    const joined = await client.joinTable({ tableId, displayName: playerName(), requestId: requestId() });
    enterTable({ tableId, token: joined.playerToken, seat: joined.seat });
  } catch (error) {
    const why = refusal(error);
    showLobbyError(`Could not join (${why.reason}): ${why.message}`);
  }
}

async function createAndJoin(event: SubmitEvent): Promise<void> {
  event.preventDefault();
  const button = $<HTMLButtonElement>("create");
  button.disabled = true;
  try {
    const preset = $<HTMLSelectElement>("preset").value;
    const { table } = await client.createTable({
      preset,
      botSeats: 3,
      displayName: `${playerName()}'s table`.slice(0, 64),
      requestId: requestId(),
    });
    if (table) await joinTable(table.tableId);
  } catch (error) {
    const why = refusal(error);
    showLobbyError(`Could not create a table (${why.reason}): ${why.message}`);
  } finally {
    button.disabled = false;
  }
}

function start(): void {
  $("create-form").addEventListener("submit", (e) => void createAndJoin(e as SubmitEvent));
  $("watch-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const id = $<HTMLInputElement>("watch-id").value.trim();
    if (id) enterTable({ tableId: id });
  });
  $("refresh").addEventListener("click", () => void listTables());
  $("pass-button").addEventListener("click", onPass);
  $("back").addEventListener("click", leaveToLobby);
  $("leave").addEventListener("click", () => {
    if (!confirm("Leave the table for good? A bot plays your seat from now on.")) return;
    void act(async (tableId, headers) => {
      await client.leaveTable({ tableId, requestId: requestId() }, { headers });
      leaveToLobby();
    });
  });
  setInterval(tick, 250);
  const saved = sessionStorage.getItem(SESSION_KEY);
  const resumed = saved ? (JSON.parse(saved) as Session) : undefined;
  if (resumed?.tableId && resumed.token) enterTable(resumed); // a reload keeps your seat
  else void listTables();
}

start();

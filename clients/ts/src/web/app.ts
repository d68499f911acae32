// The page copas-server serves on --web-port: a live lobby (play against bots, open a table
// for friends with a link to share, quick match, watch any table) and the table drawn as one.
// It speaks copas.v1 over the Connect protocol (connect-web) to the same server; everything
// shown comes from the views and events the server streams, which hold no other player's
// cards. Plain DOM: every server string goes in as text. Each browser is an account: a guest
// of this device at first (signed in without a question), its name, rating, last games and
// the leaderboard shown, a password to keep it and a sign-in to use it elsewhere; every
// JoinTable carries its access token, so the seat is the account's.

import { timestampMs } from "@bufbuild/protobuf/wkt";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { AccountService, type MyGame } from "../gen/copas/v1/accounts_pb.js";
import { type Card, Suit } from "../gen/copas/v1/cards_pb.js";
import {
  CopasService,
  type MoonChoice,
  MoonRule,
  Phase,
  type TableEvent,
  type TableSummary,
  type WatchLobbyResponse,
} from "../gen/copas/v1/copas_pb.js";
import { AccountSession, DEVICE_KEY, isOver, mustAct, refusal, sameCard, tableEvents } from "../copas.js";
import { createTableRequest, quickMatchRequest } from "../bisca.js";
import {
  biscaRatings,
  boardKind,
  chosenKind,
  lobbyGameName,
  myGameKind,
  renderBisca,
  startBiscaLobby,
  titleBoard,
} from "./bisca.js";
import { startChampionships } from "./championships.js";
import { $, element } from "./dom.js";
import { startAttention } from "./attention.js";
import { startDeck } from "./faces.js";
import { openReplay, startReplay } from "./replay.js";
import { cue, startSound } from "./sound.js";
import { clearReactions, decorateSeats, noteReaction, showRow, startReactions } from "./reactions.js";
import { acceptRematch, followLink, isRematchGame, noteView, startRematch, stopRematchWatch } from "./rematch.js";
import { type Actions, type Session, type Setup, state } from "./state.js";
import { finalSummaryEnded, onHandKey, render as drawTable, startLookBack, tick } from "./table.js";
import { ago, currentLang, type Key, LANG_KEY, t, translatePage } from "./i18n.js";
import { CLOCKS, ordinal, PRESET_MOON, presetName, refusalWords } from "./words.js";

const transport = createConnectTransport({ baseUrl: location.origin, useBinaryFormat: true });
const client = createClient(CopasService, transport);
const accounts = createClient(AccountService, transport);
/** This browser's account: a guest of this device until a password signs in another. Its
 * device secret and tokens are kept in localStorage (never in a URL, never logged). */
const account = new AccountSession(accounts, localStorage);

const SESSION_KEY = "copas.session";
const NAME_KEY = "copas.name";
let summary: TableSummary | undefined; // the table's public summary (its name, preset)

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A fresh request id: 32 random hex digits (randomUUID needs https; this does not). */
function requestId(): string {
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
}

function durationMs(d: { seconds: bigint; nanos: number } | undefined): number | undefined {
  return d === undefined ? undefined : Number(d.seconds) * 1000 + d.nanos / 1e6;
}

const actions: Actions = {
  onCard,
  onPass,
  chooseMoon: (choice: MoonChoice) =>
    void act((tableId, headers) => client.chooseMoon({ tableId, choice, requestId: requestId() }, { headers })),
  playAgain: () => void (state.session && isRematchGame(state.view, state.session) ? acceptRematch(state.session) : playAgain()),
  toLobby: () => toLobby(),
};

function render(): void {
  noteView(state.view, state.session);
  drawTable(actions, summary);
  renderBisca(state.view);
  showRow(!!state.session?.token && !!state.view);
  decorateSeats();
}

// ------------------------------------------------------------------ the table's stream

/** Public facts the view does not carry, from the events themselves: the point cards each
 * seat took this hand (TrickWon) and the last hand's score (HandScored). */
function notePublic(event: TableEvent): void {
  const kind = event.kind;
  if (kind.case === "handStarted") {
    state.taken = new Map();
    state.takenHand = kind.value.handNumber;
  } else if (kind.case === "trickWon" && kind.value.trick) {
    const points = kind.value.trick.cards
      .map((c) => c.card)
      .filter((c): c is Card => !!c && (c.suit === Suit.HEARTS || c.text === "QS"));
    if (points.length) state.taken.set(kind.value.winner, [...(state.taken.get(kind.value.winner) ?? []), ...points]);
  } else if (kind.case === "handScored") {
    state.lastHand = kind.value;
    state.hands.set(kind.value.handNumber, kind.value);
  }
}

/** The table's sounds (when the person turned them on): a card, a trick taken, hearts
 * broken, the Q♠ played. Live events only, never a snapshot's history. */
function cueFor(event: TableEvent): void {
  const kind = event.kind;
  if (kind.case === "cardPlayed") {
    const card = kind.value.card;
    cue(card?.text === "QS" ? "queen" : "card");
    if (card?.suit === Suit.HEARTS && state.view && !state.view.heartsBroken) cue("hearts");
  } else if (kind.case === "trickWon") {
    cue("trick");
  }
}

function onEvent(event: TableEvent): void {
  if (event.kind.case === "snapshot") {
    if (event.kind.value.hasGap) state.takenHand = -1;
    for (const missed of event.kind.value.missedEvents) notePublic(missed);
  } else if (event.kind.case === "reactionShown") {
    noteReaction(event.kind.value.seat, event.kind.value.reaction);
  } else {
    notePublic(event);
    cueFor(event);
    // Seen live, the game's end shows the last hand's summary first, for a hand's pause.
    const pause = event.view?.rules?.handPauseSeconds ?? 0;
    if (event.kind.case === "gameOver" && state.lastHand && pause > 0) {
      state.finalSummaryUntil = performance.now() + pause * 1000;
    }
  }
  const view = event.view;
  if (!view) return;
  if (state.view && view.handNumber !== state.view.handNumber) state.chosen = [];
  if (state.takenHand !== view.handNumber) {
    // Not seen from its start: known only while nobody has taken a trick yet.
    state.taken = new Map();
    state.takenHand = view.trickNumber === 0 && !view.lastTrick?.cards.length ? view.handNumber : -1;
  }
  if (state.view && (state.view.trickNumber !== view.trickNumber || state.view.phase !== view.phase)) state.hint = "";
  state.view = view;
  state.sequence = event.sequence;
  const now = performance.now();
  const left = durationMs(view.timeLeft);
  state.deadline = view.deadline && left !== undefined ? now + left : undefined;
  const pause = durationMs(view.pauseLeft);
  state.resumes = view.pausedUntil && pause !== undefined ? now + pause : undefined;
  render();
}

async function watch(session: Session, signal: AbortSignal): Promise<void> {
  const headers: Record<string, string> = session.token ? { authorization: `Bearer ${session.token}` } : {};
  let failures = 0;
  while (!signal.aborted) {
    try {
      // From the first event on when starting (the snapshot then lists the kept history, so
      // the point cards taken so far are known); after a break, from the last one seen.
      const after = state.sequence > 0n ? state.sequence : 1n;
      const stream = tableEvents(client.watchTable({ tableId: session.tableId, afterSequence: after, isBatched: true }, { headers, signal }));
      for await (const { event } of stream) {
        failures = 0;
        if (event) onEvent(event);
      }
      // The server ended the stream: it is restarting, or the finished table has gone.
      if ((state.view && isOver(state.view)) || failures >= 8) return;
      failures += 1;
      await sleep(Math.min(200 * 2 ** failures, 3000));
    } catch (error) {
      if (signal.aborted) return;
      const why = refusal(error);
      if (!["UNAVAILABLE", "UNKNOWN", "INTERNAL", "DEADLINE_EXCEEDED"].includes(why.code) || failures >= 8) {
        showError(t("table.outOfReach", { why: refusalWords(why, state.view) }), why.reason);
        return;
      }
      failures += 1;
      await sleep(why.retryAfterMs ?? Math.min(200 * 2 ** failures, 3000));
    }
  }
}

function enterTable(session: Session, table?: TableSummary): void {
  state.watching?.abort();
  clearReactions();
  stopLobby();
  Object.assign(state, {
    session, view: undefined, sequence: 0n, awaiting: 0n, lastHand: undefined, hands: new Map(), chosen: [],
    taken: new Map(), takenHand: -1, hint: "", error: "", errorReason: "", finalSummaryUntil: undefined,
  });
  summary = table;
  if (session.token) sessionStorage.setItem(SESSION_KEY, JSON.stringify(session));
  if (location.search) history.replaceState(null, "", "/"); // a used invitation link
  scrollTo(0, 0); // the table from its top: the whole of it fits one screen
  $("lobby").hidden = true;
  $("game").hidden = false;
  render();
  if (!table) {
    client.getTable({ tableId: session.tableId }).then(
      (answer) => {
        if (state.session === session) {
          summary = answer.table;
          render();
        }
      },
      () => undefined, // the stream says what is wrong
    );
  }
  const watching = new AbortController();
  state.watching = watching;
  void watch(session, watching.signal);
}

function toLobby(): void {
  // The game just played, if it is over: the profile shows it once the accounts took it in.
  const finished = state.view?.phase === Phase.GAME_OVER ? (state.session?.tableId ?? "") : "";
  state.watching?.abort();
  stopRematchWatch();
  state.session = undefined;
  state.view = undefined;
  sessionStorage.removeItem(SESSION_KEY);
  const dialog = $<HTMLDialogElement>("moon");
  if (dialog.open) dialog.close();
  $("game").hidden = true;
  $("lobby").hidden = false;
  startLobby();
  if (account.account) void showProfileWith(finished).catch(() => undefined);
}

/** The profile; again, a second apart (ten times at most, while the lobby shows), until the
 * game of ``recordId`` is among the last games: the accounts take a game in after its end. */
async function showProfileWith(recordId: string): Promise<void> {
  for (let tries = 1; ; tries++) {
    await showProfile();
    const list = $("my-games");
    const shown = Array.from(list.querySelectorAll("li")).some((li) => li.dataset.record === recordId);
    if (!recordId || shown || tries >= 10) return;
    await new Promise((resolve) => setTimeout(resolve, 1000));
    if ($("lobby").hidden) return; // gone on to another table
  }
}

// ------------------------------------------------------------------ moves

function showError(text: string, reason = ""): void {
  state.error = text;
  state.errorReason = reason;
  $("error").textContent = text;
  $("error").dataset.reason = reason;
}

async function act(
  move: (tableId: string, headers: Record<string, string>) => Promise<{ sequence: bigint }>,
): Promise<void> {
  const session = state.session;
  if (!session?.token || state.isBusy) return;
  state.isBusy = true;
  state.hint = "";
  showError("");
  render();
  try {
    const answer = await move(session.tableId, { authorization: `Bearer ${session.token}` });
    if (state.session === session) state.awaiting = answer.sequence;
  } catch (error) {
    const why = refusal(error);
    showError(refusalWords(why, state.view), why.reason);
  } finally {
    state.isBusy = false;
    render();
  }
}

function cardRef(card: Card): { suit: number; rank: number } {
  return { suit: card.suit, rank: card.rank };
}

function onCard(card: Card): void {
  const view = state.view;
  if (!view || !mustAct(view)) return;
  if (view.phase === Phase.PASSING) {
    const index = state.chosen.findIndex((c) => sameCard(c, card));
    if (index >= 0) state.chosen.splice(index, 1);
    else if (state.chosen.length < 3) state.chosen.push(card);
    else state.hint = t("pass.threeChosen");
    render();
    return;
  }
  void act((tableId, headers) => client.playCard({ tableId, card: cardRef(card), requestId: requestId() }, { headers }));
}

function onPass(): void {
  if (state.chosen.length !== 3) return;
  const cards = state.chosen.map(cardRef);
  void act(async (tableId, headers) => {
    const answer = await client.passCards({ tableId, cards, requestId: requestId() }, { headers });
    state.chosen = [];
    return answer;
  });
}

// ------------------------------------------------------------------ the lobby, live

const PHASE_TEXT: Record<number, Key> = {
  [Phase.PASSING]: "phase.passing",
  [Phase.PLAYING]: "phase.playing",
  [Phase.MOON_CHOICE]: "phase.playing",
  [Phase.GAME_OVER]: "phase.over",
};
const lobbyTables = new Map<string, TableSummary>();
let lobbyWatch: AbortController | undefined;

function setLive(isLive: boolean): void {
  const line = $("lobby-live");
  line.dataset.live = String(isLive);
  line.textContent = t(isLive ? "lobby.live" : "lobby.reconnecting");
  $("tables").dataset.live = String(isLive);
}

function onLobby(response: WatchLobbyResponse): void {
  const event = response.event;
  if (event.case === "snapshot") {
    lobbyTables.clear();
    for (const table of event.value.tables) lobbyTables.set(table.tableId, table);
    setLive(true);
  } else if (event.case === "tableAdded" || event.case === "tableChanged") {
    lobbyTables.set(event.value.tableId, event.value);
  } else if (event.case === "tableRemoved") {
    lobbyTables.delete(event.value);
  }
  renderTables();
}

async function watchLobby(signal: AbortSignal): Promise<void> {
  let failures = 0;
  while (!signal.aborted) {
    try {
      for await (const response of client.watchLobby({}, { signal })) {
        failures = 0;
        onLobby(response);
      }
    } catch (error) {
      if (signal.aborted) return;
      const why = refusal(error);
      if (failures >= 3) showLobbyError(t("lobby.outOfReach", { why: refusalWords(why) }));
      await sleep(why.retryAfterMs ?? 0);
    }
    if (signal.aborted) return;
    setLive(false);
    failures += 1;
    await sleep(Math.min(250 * 2 ** failures, 5000));
  }
}

function startLobby(): void {
  lobbyWatch?.abort();
  setLive(false);
  $("lobby-live").textContent = t("lobby.connecting");
  lobbyWatch = new AbortController();
  void watchLobby(lobbyWatch.signal);
}

function stopLobby(): void {
  lobbyWatch?.abort();
  lobbyWatch = undefined;
}

function freeSeats(table: TableSummary): number {
  return table.seats.filter((s) => !s.isTaken).length;
}

function renderTables(): void {
  const body = $<HTMLTableElement>("tables").tBodies[0]!;
  const tables = [...lobbyTables.values()].sort(
    (a, b) => (b.createTime ? timestampMs(b.createTime) : 0) - (a.createTime ? timestampMs(a.createTime) : 0),
  );
  body.replaceChildren(...tables.map(tableRow));
  if (tables.length === 0) {
    const empty = element("tr", "", { class: "empty" });
    empty.append(element("td", t("lobby.noTables"), { colspan: "5" }));
    body.append(empty);
  }
}

function tableRow(table: TableSummary): HTMLTableRowElement {
  const name = table.displayName || t("lobby.openTable");
  const free = freeSeats(table);
  const isOpen = free > 0 && table.phase === Phase.WAITING_FOR_PLAYERS;
  const row = element("tr", "", { "data-table": table.tableId, "data-phase": Phase[table.phase] });
  const players = table.seats.filter((s) => s.isTaken).map((s) => (s.isBot ? t("lobby.bot", { name: s.displayName }) : s.displayName));
  if (free) players.push(t("lobby.freeSeats", { n: free }));
  const phaseKey = PHASE_TEXT[table.phase];
  const phase = phaseKey ? t(phaseKey) : "";
  const hasHand = table.handNumber >= 0 && table.phase !== Phase.GAME_OVER;
  const status = isOpen ? t("lobby.waiting", { n: free }) : hasHand ? t("lobby.handOf", { phase, n: table.handNumber + 1 }) : phase;
  row.append(
    element("th", name, { scope: "row", "data-label": t("col.table") }),
    element("td", lobbyGameName(table.rules, table.preset) ?? presetName(table.preset), { "data-label": t("col.game") }),
    element("td", players.join(", "), { "data-label": t("col.players") }),
    element("td", status, { class: "status", "data-label": t("col.status") }),
  );
  const cell = element("td", "", { class: "actions" });
  if (isOpen) {
    const join = element("button", t("lobby.join"), { type: "button", class: "primary", "aria-label": t("lobby.joinLabel", { name }) });
    join.addEventListener("click", () => void joinTable(table.tableId, table));
    cell.append(join, " ");
  }
  const watchButton = element("button", t("watch.button"), { type: "button", "aria-label": t("lobby.watchLabel", { name }) });
  watchButton.addEventListener("click", () => enterTable({ tableId: table.tableId }, table));
  cell.append(watchButton);
  row.append(cell);
  return row;
}

function showLobbyError(text: string): void {
  $("lobby-error").textContent = text;
}

/** The name typed, kept for the next visit; empty when none is (the account's then). */
function typedName(): string {
  const name = $<HTMLInputElement>("name").value.trim();
  if (name) localStorage.setItem(NAME_KEY, name);
  return name;
}

/** The name a seat is taken under: the one typed, else the account's, else "Player". */
function playerName(): string {
  return typedName() || account.account?.displayName || t("player.default");
}

async function joinTable(tableId: string, table?: TableSummary): Promise<void> {
  showLobbyError("");
  try {
    const joined = await asAccount((headers, displayName) =>
      client.joinTable({ tableId, displayName, requestId: requestId() }, { headers }),
    );
    enterTable({ tableId, token: joined.playerToken, seat: joined.seat }, joined.table ?? table);
  } catch (error) {
    showLobbyError(t("lobby.couldNotJoin", { why: refusalWords(refusal(error)) }));
  }
}

function setupFromForm(friends: number): Setup {
  return {
    preset: $<HTMLSelectElement>("preset").value,
    clock: $<HTMLSelectElement>("clock").value,
    moon: $<HTMLSelectElement>("moon-rule").value,
    friends,
    game: $<HTMLSelectElement>("game-kind").value,
  };
}

const MOON_VALUE: Record<string, MoonRule> = {
  others: MoonRule.OTHERS_PLUS_26,
  choice: MoonRule.SHOOTER_CHOICE,
  off: MoonRule.DISABLED,
};

/** Opens a table as ``setup`` says (bots in the seats no friend takes) and sits at it, in
 * one request: a name the server refuses leaves no table behind. */
async function openTable(setup: Setup, button?: HTMLButtonElement): Promise<void> {
  if (button) button.disabled = true;
  showLobbyError("");
  try {
    const clock = CLOCKS[setup.clock] ?? CLOCKS.standard!;
    const bisca = chosenKind(setup.game);
    const made = await asAccount((headers, playerDisplayName) =>
      client.createTable(
        bisca
          ? createTableRequest(bisca, {
              botSeats: bisca.players - 1 - setup.friends,
              displayName: t("lobby.tableName", { name: playerName() }).slice(0, 64),
              playerDisplayName,
              requestId: requestId(),
              playTimeoutSeconds: clock.play,
            })
          : {
          preset: setup.preset,
          botSeats: 3 - setup.friends,
          // The server's default rule: rated only when every seat is a signed-in person who
          // plays (a table with bots never is).
          displayName: t("lobby.tableName", { name: playerName() }).slice(0, 64),
          playerDisplayName,
          requestId: requestId(),
          rules: {
            moon: MOON_VALUE[setup.moon] ?? MoonRule.UNSPECIFIED,
            playTimeoutSeconds: clock.play,
            passTimeoutSeconds: clock.pass,
            moonTimeoutSeconds: clock.moon,
          },
        },
        { headers },
      ),
    );
    state.lastSetup = setup;
    if (made.table) enterTable({ tableId: made.table.tableId, token: made.playerToken, seat: made.seat }, made.table);
  } catch (error) {
    showLobbyError(t("lobby.couldNotOpen", { why: refusalWords(refusal(error)) }));
  } finally {
    if (button) button.disabled = false;
  }
}

async function quickMatch(): Promise<void> {
  const button = $<HTMLButtonElement>("quick-match");
  button.disabled = true;
  showLobbyError("");
  try {
    const preset = $<HTMLSelectElement>("preset").value;
    const bisca = chosenKind();
    const joined = await asAccount((headers, displayName) =>
      client.joinTable(
        bisca
          ? { ...quickMatchRequest(bisca, displayName), requestId: requestId() }
          : { preset, players: 4, displayName, requestId: requestId() },
        { headers },
      ),
    );
    if (joined.table) {
      const seated = { tableId: joined.table.tableId, token: joined.playerToken, seat: joined.seat, quickSince: Date.now() };
      enterTable(seated, joined.table);
    }
  } catch (error) {
    showLobbyError(t("lobby.noQuickMatch", { why: refusalWords(refusal(error)) }));
  } finally {
    button.disabled = false;
  }
}

/** The same kind of game again: as this tab made the last one, else this table's rules
 * against bots. */
async function playAgain(): Promise<void> {
  const view = state.view;
  let setup = state.lastSetup;
  if (!setup) {
    const rules = view?.rules;
    const clock = Object.entries(CLOCKS).find(([, c]) => c.play === rules?.playTimeoutSeconds)?.[0] ?? "standard";
    const moon = Object.entries(MOON_VALUE).find(([, m]) => m === rules?.moon)?.[0] ?? "others";
    const game = rules?.game === "bisca" ? summary?.preset || "bisca3" : "hearts";
    setup = { preset: summary?.preset || "online", clock, moon, friends: 0, game };
  }
  toLobby();
  await openTable(setup);
}

/** A shared link (/?join=ID): the table's invitation, with the name field beside it. */
async function showInvite(tableId: string): Promise<void> {
  const box = $("invite");
  box.hidden = false;
  const button = $<HTMLButtonElement>("invite-join");
  button.disabled = true;
  try {
    const { table } = await client.getTable({ tableId });
    if (!table) return;
    const free = freeSeats(table);
    const host = table.seats.find((s) => s.isTaken && !s.isBot)?.displayName;
    const open = free > 0 && table.phase === Phase.WAITING_FOR_PLAYERS;
    $("invite-title").textContent = open ? t("invite.join", { name: table.displayName || t("invite.aTable") }) : t("invite.started");
    const words = { host: host ?? "", game: presetName(table.preset).toLowerCase(), seats: t("lobby.freeSeats", { n: free }) };
    $("invite-text").textContent = open ? t(host ? "invite.byHost" : "invite.open", words) : t("invite.full");
    button.hidden = !open;
    button.disabled = false;
    button.onclick = () => void joinTable(tableId, table);
  } catch (error) {
    $("invite-title").textContent = t("invite.gone");
    $("invite-text").textContent = refusalWords(refusal(error));
    button.hidden = true;
  }
}

// ------------------------------------------------------------------ the account

let signedIn: Promise<boolean> | undefined; // the first sign-in, once
let nameEdited = false; // the person typed a name the profile must not overwrite
let aroundMe = false;

/** The access token's headers and the seat's name: the account's (renamed first when the
 * name field says otherwise), or, without an account, the name typed. */
async function asAccount<T>(join: (headers: Record<string, string>, displayName: string) => Promise<T>): Promise<T> {
  const typed = typedName();
  if (!(await signedIn)) return join({}, typed || t("player.default"));
  // An empty field keeps the account's own name ("Players who come back").
  if (typed && account.account && account.account.displayName !== typed) await rename(typed);
  const joined = await account.call((headers) => join(headers, ""));
  void showProfile();
  return joined;
}

async function rename(displayName: string): Promise<void> {
  const answer = await account.call((headers) => accounts.updateProfile({ displayName }, { headers }));
  account.account = answer.account;
  $("me-title").textContent = answer.account?.displayName || t("me.you");
}

function showMeError(text: string, reason = ""): void {
  $("me-error").textContent = text;
  $("me-error").dataset.reason = reason;
}

async function signInFirst(): Promise<boolean> {
  try {
    await account.accessToken(); // the kept session (refreshed), or this device's guest
    await showProfile();
    return true;
  } catch (error) {
    const why = refusal(error);
    $("me-status").textContent = t("me.notSignedIn");
    showMeError(t("me.outOfReach", { why: refusalWords(why) }), why.reason);
    return false;
  }
}

function gameLine(game: MyGame): HTMLLIElement {
  const when = game.finishTime ? ago(timestampMs(game.finishTime)) : "";
  const change = `${game.ratingChange >= 0 ? "+" : ""}${game.ratingChange}`;
  const rated = game.isRated ? t("myGame.rated", { rating: String(shownRating(game.ratingAfter)), change }) : t("myGame.notRated");
  const line = t("myGame.line", { place: ordinal(game.place), players: game.players, table: game.tableName || t("invite.aTable"), points: game.points });
  const text = myGameKind(game) + [line, rated, when].filter(Boolean).join(", ");
  const item = element("li", text, { "data-record": game.recordId, "data-place": String(game.place) });
  if (game.recordId) {
    const replay = element("button", t("replay.open"), {
      type: "button", class: "replay-open", "aria-label": t("replay.openLabel", { name: game.tableName || t("invite.aTable") }),
    });
    replay.addEventListener("click", () => void openReplay(game.recordId));
    item.append(" ", replay);
  }
  return item;
}

/** Ratings on the scale people know from chess and card sites: the server's number (0 for a new
 * account: openskill's mu - 3 sigma, times 100) plus 1500, so that a new account shows 1500 and
 * a leaderboard reads in positive numbers. Provisional for the first 10 rated games
 * (docs/RULES.md, "Rated games": then it joins the leaderboards). */
const RATING_BASE = 1500;
const PROVISIONAL_GAMES = 10;

function shownRating(serverRating: number): number {
  return RATING_BASE + serverRating;
}

/** The name, rating, last games and the leaderboard, from the server. */
async function showProfile(): Promise<void> {
  const [profile, games] = await Promise.all([
    account.call((headers) => accounts.getProfile({}, { headers })),
    account.call((headers) => accounts.listMyGames({ pageSize: 5 }, { headers })),
  ]);
  const me = profile.account;
  account.account = me;
  const name = me?.displayName ?? "";
  $("me-title").textContent = name || t("me.you");
  const isPassword = account.tokens?.method === "password" || (me?.username ?? "") !== "";
  $("me-status").textContent = isPassword ? t("me.signedInAs", { name: me?.username || name }) : t("me.guest");
  $("me").dataset.account = me?.accountId ?? "";
  $("me").dataset.games = String(profile.games);
  const nameInput = $<HTMLInputElement>("name");
  // Never under the person's cursor: a name they are typing is theirs.
  if (!nameEdited && name && document.activeElement !== nameInput) nameInput.value = name;
  const four = profile.ratings.find((r) => r.players === 4 && (r.game || "hearts") === "hearts");
  const rating = $("me-rating");
  rating.dataset.rating = String(four?.rating ?? 0);
  rating.dataset.ratedGames = String(four?.games ?? 0);
  const rated = four?.games ?? 0;
  rating.dataset.shown = String(shownRating(four?.rating ?? 0));
  rating.dataset.provisional = String(rated < PROVISIONAL_GAMES);
  const shown = t("me.rating", { rating: String(shownRating(four?.rating ?? 0)) }); // no thousands separator
  const standing =
    rated === 0 ? t("me.noRated", { rating: shown }) :
    rated < PROVISIONAL_GAMES ? t("me.provisional", { rating: shown, n: rated, of: PROVISIONAL_GAMES }) :
    t("me.ratingPlace", { rating: shown, place: ordinal(four!.place) });
  rating.textContent = `${standing} · ${t("me.games", { n: profile.games, wins: profile.wins })}`;
  $("me-kinds").replaceChildren(...biscaRatings(profile.ratings, shownRating));
  const list = $("my-games");
  list.replaceChildren(...games.games.map(gameLine));
  if (!games.games.length) list.replaceChildren(element("li", t("me.noGames")));
  $<HTMLFormElement>("password-form").hidden = (me?.username ?? "") !== "";
  // A guest has nothing to sign out of (its account is this device's); a password account does.
  $("sign-out").hidden = (me?.username ?? "") === "";
  $("sign-out-everywhere").hidden = (me?.username ?? "") === "";
  await showBoard();
}

async function showBoard(): Promise<void> {
  const board = await account.call((headers) =>
    accounts.getLeaderboard({ ...boardKind(), pageSize: 10, aroundMe }, { headers }),
  );
  const body = $<HTMLTableElement>("leaderboard").tBodies[0]!;
  body.replaceChildren(
    ...board.entries.map((entry) => {
      const row = element("tr", "", { "data-you": String(entry.isYou) });
      row.append(
        element("td", String(entry.place)),
        element("th", entry.isYou ? t("board.you", { name: entry.displayName }) : entry.displayName, { scope: "row" }),
        element("td", String(shownRating(entry.rating)), { "data-rating": String(entry.rating) }),
        element("td", String(entry.games)),
      );
      return row;
    }),
  );
  if (!board.entries.length) {
    const empty = element("tr", "", { class: "empty" });
    empty.append(element("td", t("board.empty"), { colspan: "4" }));
    body.append(empty);
  }
}

async function onAccountForm(event: Event, work: () => Promise<unknown>, button: string): Promise<void> {
  event.preventDefault();
  const pressed = $<HTMLButtonElement>(button);
  pressed.disabled = true;
  showMeError("");
  $("me-note").textContent = "";
  try {
    await work();
    await showProfile();
  } catch (error) {
    const why = refusal(error);
    showMeError(refusalWords(why), why.reason);
  } finally {
    pressed.disabled = false;
  }
}

function startAccount(): void {
  signedIn = signInFirst();
  const nameField = $<HTMLInputElement>("name");
  nameField.addEventListener("input", () => (nameEdited = true));
  nameField.addEventListener("change", () => {
    const typed = nameField.value.trim();
    if (!typed || !account.account || typed === account.account.displayName) return;
    void signedIn?.then(() =>
      rename(typed).then(
        () => showMeError(""),
        (error: unknown) => {
          const why = refusal(error);
          showMeError(refusalWords(why), why.reason);
        },
      ),
    );
  });
  $("password-form").addEventListener("submit", (e) =>
    void onAccountForm(e, async () => {
      const username = $<HTMLInputElement>("link-username").value.trim();
      const password = $<HTMLInputElement>("link-password").value;
      await account.call((headers) => accounts.linkPassword({ username, password }, { headers }));
      $<HTMLInputElement>("link-password").value = "";
      $("me-note").textContent = t("password.done", { name: username });
    }, "link-button"),
  );
  $("sign-in-form").addEventListener("submit", (e) =>
    void onAccountForm(e, async () => {
      const username = $<HTMLInputElement>("sign-in-username").value.trim();
      await account.signInPassword(username, $<HTMLInputElement>("sign-in-password").value);
      $<HTMLInputElement>("sign-in-password").value = "";
      nameEdited = false; // the account's own name from now on
    }, "sign-in-button"),
  );
  $("sign-out").addEventListener("click", () => void signOut(false));
  $("sign-out-everywhere").addEventListener("click", () => void signOut(true));
  $("board-kind").addEventListener("change", () => {
    titleBoard();
    void showBoard().catch((error: unknown) => showMeError(refusalWords(refusal(error))));
  });
  $("board-around").addEventListener("click", () => {
    aroundMe = !aroundMe;
    $("board-around").setAttribute("aria-pressed", String(aroundMe));
    void showBoard().catch((error: unknown) => showMeError(refusalWords(refusal(error))));
  });
}

/** The page's words in the chosen language; the switch keeps the choice and reloads (the
 * seat, the account and the lobby come back by themselves). */
function startLanguage(): void {
  translatePage();
  const select = $<HTMLSelectElement>("lang");
  select.value = currentLang();
  select.addEventListener("change", () => {
    localStorage.setItem(LANG_KEY, select.value);
    location.reload();
  });
}

/** Ends the session on the server (``everywhere``: every session of the account, on every
 * device) and here, then starts afresh as a new guest: the device's secret goes too (it would
 * sign in to the account just left), and so do the seat, the name typed and the championship
 * followed. The note says how many sessions the server ended. */
async function signOut(everywhere: boolean): Promise<void> {
  const buttons = [$<HTMLButtonElement>("sign-out"), $<HTMLButtonElement>("sign-out-everywhere")];
  for (const button of buttons) button.disabled = true;
  showMeError("");
  $("me-note").textContent = "";
  let ended: number | undefined;
  try {
    ended = await account.signOut(everywhere);
  } catch (error) {
    const why = refusal(error);
    showMeError(t("signOut.failed", { why: refusalWords(why) }), why.reason);
  }
  localStorage.removeItem(DEVICE_KEY);
  localStorage.removeItem(NAME_KEY);
  if (state.session) toLobby();
  sessionStorage.clear();
  nameEdited = false;
  $<HTMLInputElement>("name").value = "";
  $("me-title").textContent = t("me.you");
  $("me-status").textContent = t("me.signingIn");
  signedIn = signInFirst();
  await signedIn;
  if (ended !== undefined) {
    $("me-note").textContent = everywhere ? t("signOut.everywhereDone", { n: ended }) : t("signOut.done");
  }
  for (const button of buttons) button.disabled = false;
}

function start(): void {
  startLanguage();
  const name = localStorage.getItem(NAME_KEY);
  if (name) $<HTMLInputElement>("name").value = name;
  startAccount();
  const preset = $<HTMLSelectElement>("preset");
  const moonRule = $<HTMLSelectElement>("moon-rule");
  const syncMoon = () => {
    const rule = PRESET_MOON[preset.value];
    moonRule.value = Object.entries(MOON_VALUE).find(([, m]) => m === rule)?.[0] ?? "others";
  };
  preset.addEventListener("change", syncMoon);
  syncMoon();
  $("create-form").addEventListener("submit", (e) => {
    e.preventDefault();
    void openTable(setupFromForm(0), $<HTMLButtonElement>("create"));
  });
  $("create-friends").addEventListener("click", () => {
    const form = $<HTMLFormElement>("create-form");
    if (!form.reportValidity()) return;
    const friends = Number($<HTMLSelectElement>("friends").value) || 3;
    void openTable(setupFromForm(friends), $<HTMLButtonElement>("create-friends"));
  });
  $("quick-match").addEventListener("click", () => void quickMatch());
  $("watch-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const id = $<HTMLInputElement>("watch-id").value.trim();
    if (id) enterTable({ tableId: id });
  });
  $("pass-button").addEventListener("click", onPass);
  startLookBack();
  startSound();
  startDeck();
  startBiscaLobby();
  startAttention();
  $("hand").addEventListener("keydown", onHandKey);
  $("back").addEventListener("click", toLobby);
  $("copy-link").addEventListener("click", () => {
    const link = $<HTMLInputElement>("share-link");
    link.select();
    const copied = () => ($("copy-link").textContent = t("game.copied"));
    navigator.clipboard?.writeText(link.value).then(copied, () => document.execCommand("copy") && copied());
  });
  $("moon").addEventListener("cancel", (e) => e.preventDefault()); // the choice must be made
  $("leave").addEventListener("click", () => {
    if (!confirm(t("leave.confirm"))) return;
    void act(async (tableId, headers) => {
      const answer = await client.leaveTable({ tableId, requestId: requestId() }, { headers });
      toLobby();
      return answer;
    });
  });
  setInterval(() => {
    if (finalSummaryEnded()) render(); // the last hand's summary gives way to the standings
    tick();
  }, 250);
  const saved = sessionStorage.getItem(SESSION_KEY);
  const resumed = saved ? (JSON.parse(saved) as Session) : undefined;
  const params = new URLSearchParams(location.search);
  const invited = params.get("join");
  const watched = params.get("watch");
  const lobbyInstead = (): void => {
    sessionStorage.removeItem(SESSION_KEY);
    startLobby();
  };
  const open = (): void => {
    if (resumed?.tableId && resumed.token && (!invited || invited === resumed.tableId)) {
      // A reload keeps your seat; a finished game is not reopened: the lobby comes first.
      void client.getTable({ tableId: resumed.tableId }).then(
        ({ table }) => (table?.phase === Phase.GAME_OVER && !invited ? lobbyInstead() : enterTable(resumed)),
        () => enterTable(resumed), // the stream says what is wrong
      );
    } else if (watched) {
      enterTable({ tableId: watched });
    } else {
      startLobby();
      if (invited) void showInvite(invited);
    }
  };
  startRematch({
    client,
    asAccount: async (call) => {
      if (!(await signedIn)) throw new Error("not signed in");
      return account.call(call);
    },
    enterTable,
    requestId,
    render,
  });
  // A replay's link (#/replay/ID) opens the replay; the lobby comes when it is closed.
  const isReplay = startReplay(client, () => stopLobby(), () => {
    $("lobby").hidden = false;
    startLobby();
  });
  // The link of a finished game with a rematch leads its people to their seats there.
  if (isReplay) return;
  if (invited) void followLink(invited, resumed).then((isSeated) => isSeated || open());
  else open();
}

start();
startReactions((tableId, reaction, headers) => client.react({ tableId, reaction }, { headers }));
startChampionships({
  transport,
  account,
  signedIn: () => signedIn ?? Promise.resolve(false),
  enterTable: (session) => enterTable(session),
  toLobby,
  here: () => ({ session: state.session, isOver: !!state.view && isOver(state.view) }),
});


// The page's championships (championships.proto): a panel in the lobby with the list, a
// Register button for the signed-in account, and the one followed: what its organizer set
// (every setting, in words), registration and check-in with their windows, its live
// standings (every tie-break value: matchpoints and percentages, Buchholz, the final's place),
// each round's pairings as soon as they are announced (your table marked, its start and time
// limit) and its tables with a link to watch or play them, "your next table", whether it is
// paused, and its export (CSV or JSON, as the server writes it for every client). While a
// registered person follows one, the server's `your_table` takes them to their seat each
// round by itself (their player token is used as any seat's), and the final standings are
// shown when it ends; an ended one open is read again every few seconds (an operator may still
// correct its results). `?championship=ID` opens one (its share link). The organizer's tools
// are in ./organizer.ts; the rest of the page is asked only through ``ChampionshipHooks``.
// Plain DOM: every server string goes in as text.

import { timestampMs } from "@bufbuild/protobuf/wkt";
import { createClient, type Transport } from "@connectrpc/connect";
import {
  checkInWindow,
  durationWords,
  followChampionship,
  isEnded,
  isMatchpoints,
  momentsOf,
  nextMomentMs,
  numberWords,
  registrationWindow,
  roundWords,
  standingColumns,
  stateWords,
  timeWords,
} from "../championships.js";
import { isBisca } from "../bisca.js";
import { type AccountSession, refusal } from "../copas.js";
import {
  type Championship,
  type ChampionshipRound,
  ChampionshipService,
  ChampionshipState,
  type ChampionshipTable,
  ExportFormat,
  type YourTable,
} from "../gen/copas/v1/championships_pb.js";
import { Phase } from "../gen/copas/v1/copas_pb.js";
import { settingsLines } from "./director.js";
import { $, element } from "./dom.js";
import { type Key, t } from "./i18n.js";
import { renderDirector, startOrganizer } from "./organizer.js";
import { openReplay } from "./replay.js";
import type { Session } from "./state.js";
import { ordinal, refusalWords, shortEndReason } from "./words.js";

/** What this part may ask of the rest of the page. */
export interface ChampionshipHooks {
  transport: Transport;
  account: AccountSession;
  /** Resolves true once this browser is signed in (false: it could not be). */
  signedIn: () => Promise<boolean>;
  /** Sit at a seat (with its token), or watch a table (without). */
  enterTable: (session: Session) => void;
  toLobby: () => void;
  /** Where this tab is now (undefined: the lobby), and whether its game is over. */
  here: () => { session: Session | undefined; isOver: boolean };
}

const FOLLOWED_KEY = "copas.championship";
/** How long the round's results show before the next round's table (its clock runs). */
export const BETWEEN_ROUNDS_MS = 10_000;
const REFRESH_MS = 15_000;
const LONGEST_WAIT_MS = 2 ** 31 - 1; // setTimeout's

let hooks: ChampionshipHooks;
let client: ReturnType<typeof createClient<typeof ChampionshipService>>;
let listed: Championship[] = [];
let followed: { id: string; stop: AbortController } | undefined;
let current: Championship | undefined;
let yourTable: YourTable | undefined;
let nextMoment: ReturnType<typeof setTimeout> | undefined;

function panel(): HTMLElement {
  const box = element("section", "", { id: "championships", class: "panel", "aria-labelledby": "champ-title" });
  const head = element("div", "", { class: "panel-head" });
  head.append(element("h2", t("champ.title"), { id: "champ-title" }),
    element("p", "", { id: "champ-live", class: "live", "data-live": "false" }));
  const table = element("table", "", { id: "champ-list", "aria-labelledby": "champ-title" });
  const headRow = element("tr");
  for (const name of ["col.championship", "col.rounds", "col.players", "col.status"] as const) {
    headRow.append(element("th", t(name), { scope: "col" }));
  }
  const actions = element("th", "", { scope: "col" });
  actions.append(element("span", t("col.actions"), { class: "visually-hidden" }));
  headRow.append(actions);
  const thead = element("thead");
  thead.append(headRow);
  table.append(thead, element("tbody"));
  const detail = element("section", "", { id: "champ-detail", hidden: "", "aria-labelledby": "champ-name" });
  const share = element("p", "", { class: "champ-share" });
  share.append(
    element("label", t("champ.link"), { for: "champ-link" }),
    element("input", "", { id: "champ-link", readonly: "", type: "text" }),
  );
  const exports = element("p", "", { class: "champ-export" });
  const csv = element("button", t("champ.csv"), { id: "champ-export-csv", type: "button" });
  csv.addEventListener("click", () => void download(ExportFormat.CSV, csv));
  const json = element("button", t("champ.json"), { id: "champ-export-json", type: "button" });
  json.addEventListener("click", () => void download(ExportFormat.JSON, json));
  exports.append(csv, " ", json);
  const settings = element("dl", "", { id: "champ-settings", class: "champ-settings", "aria-labelledby": "champ-settings-title" });
  detail.append(
    element("h3", "", { id: "champ-name" }),
    element("p", "", { id: "champ-state", role: "status" }),
    element("div", "", { id: "champ-next", class: "champ-next" }),
    element("div", "", { id: "champ-entry", class: "champ-entry" }),
    element("h4", t("champ.how"), { id: "champ-settings-title" }),
    settings,
    share,
    element("h4", t("champ.standings"), { id: "champ-standings-title" }),
    exports,
  );
  const standings = element("table", "", { id: "champ-standings", "aria-labelledby": "champ-standings-title" });
  const sHead = element("thead");
  sHead.append(element("tr"));
  standings.append(sHead, element("tbody"));
  const players = element("ul", "", { id: "champ-players", class: "champ-players", "aria-labelledby": "champ-players-title" });
  const scroll = element("div", "", { class: "champ-scroll" });
  scroll.append(standings);
  detail.append(scroll, element("div", "", { id: "champ-rounds" }),
    element("h4", t("col.players"), { id: "champ-players-title" }), players);
  box.append(head, table, element("p", "", { id: "champ-error", class: "error", role: "alert" }), detail);
  return box;
}

function banner(): HTMLElement {
  const box = element("div", "", { id: "champ-banner", class: "champ-banner", hidden: "" });
  const text = element("p", "", { id: "champ-banner-text" });
  const back = element("button", t("champ.bannerBack"), { id: "champ-banner-back", type: "button" });
  back.addEventListener("click", () => showDetail());
  box.append(text, back);
  return box;
}

function showError(text: string, reason = ""): void {
  $("champ-error").textContent = text;
  $("champ-error").dataset.reason = reason;
}

async function headers(): Promise<Record<string, string>> {
  return (await hooks.signedIn()) ? hooks.account.headers() : {};
}

const at = (ms: number) => timeWords(ms, Date.now());

// ------------------------------------------------------------------ the list

async function refreshList(): Promise<void> {
  try {
    const answer = await client.listChampionships({ pageSize: 20, includeFinished: true }, { headers: await headers() });
    listed = answer.championships;
    renderList();
    $("champ-live").dataset.live = "true";
    $("champ-live").textContent = t("champ.updated");
  } catch (error) {
    $("champ-live").dataset.live = "false";
    $("champ-live").textContent = t("champ.outOfReachShort", { why: refusalWords(refusal(error)) });
  }
}

function renderList(): void {
  const body = $<HTMLTableElement>("champ-list").tBodies[0]!;
  body.replaceChildren(...listed.map(listRow));
  if (!listed.length) {
    const empty = element("tr", "", { class: "empty" });
    empty.append(element("td", t("champ.none"), { colspan: "5" }));
    body.append(empty);
  }
}

function listRow(c: Championship): HTMLTableRowElement {
  const name = c.settings?.displayName || t("col.championship");
  const row = element("tr", "", {
    "data-championship": c.championshipId,
    "data-state": ChampionshipState[c.state] ?? String(c.state),
    "data-registered": String(c.isRegistered),
    "data-paused": String(c.isPaused),
    "data-game": c.rules?.game || "hearts",
  });
  const count = c.settings?.maxPlayers ? t("champ.countOf", { n: c.playerCount, max: c.settings.maxPlayers }) : String(c.playerCount);
  const now = Date.now();
  const window = registrationWindow(c, now);
  const opens = momentsOf(c.settings).registrationOpensMs;
  const parts = [stateWords(c)];
  if (window === "not-open" && opens !== undefined) parts.push(t("champ.opensAt", { at: at(opens) }));
  if (c.isRegistered) parts.push(t("champ.youRegistered"));
  const status = parts.join(", ");
  row.append(
    element("th", name, { scope: "row", "data-label": t("col.championship") }),
    // A Bisca championship says so beside its rounds (a Hearts one's cell is as it was).
    element("td", isBisca(c.rules) ? `${roundWords(c)} · ${t("bisca.name")}` : roundWords(c), { "data-label": t("col.rounds") }),
    element("td", count, { "data-label": t("col.players") }),
    element("td", status, { class: "status", "data-label": t("col.status") }),
  );
  const cell = element("td", "", { class: "actions" });
  if (c.isRegistered && c.state === ChampionshipState.REGISTERING) {
    const unregister = element("button", t("champ.unregister"), { type: "button", "aria-label": t("champ.unregisterFrom", { name }), "data-action": "unregister" });
    unregister.addEventListener("click", () => void registration(c.championshipId, false, unregister));
    cell.append(unregister, " ");
  } else if (!c.isRegistered && window === "open") {
    const register = element("button", t("champ.register"), { type: "button", class: "primary", "aria-label": t("champ.registerFor", { name }), "data-action": "register" });
    register.addEventListener("click", () => void registration(c.championshipId, true, register));
    cell.append(register, " ");
  }
  const open = element("button", t("champ.open"), { type: "button", "aria-label": t("champ.openName", { name }), "data-action": "open" });
  open.addEventListener("click", () => {
    follow(c.championshipId);
    showDetail();
  });
  cell.append(open);
  row.append(cell);
  return row;
}

async function registration(id: string, isRegister: boolean, button: HTMLButtonElement): Promise<void> {
  button.disabled = true;
  showError("");
  try {
    if (!(await hooks.signedIn())) throw new Error("not signed in");
    await hooks.account.call(async (h): Promise<unknown> =>
      isRegister ? client.register({ championshipId: id }, { headers: h }) : client.unregister({ championshipId: id }, { headers: h }),
    );
    follow(id, true); // again: the stream now knows this person is registered
  } catch (error) {
    const why = refusal(error);
    showError(t(isRegister ? "champ.couldNotRegister" : "champ.couldNotUnregister", { why: refusalWords(why) }), why.reason);
  } finally {
    button.disabled = false;
    void refreshList();
  }
}

async function checkInNow(id: string, button: HTMLButtonElement): Promise<void> {
  button.disabled = true;
  showError("");
  try {
    if (!(await hooks.signedIn())) throw new Error("not signed in");
    const answer = await hooks.account.call((h) => client.checkIn({ championshipId: id }, { headers: h }));
    // The stream brings it too; the answer shows it at once (this person's own marks included).
    if (answer.championship && current?.championshipId === id && answer.championship.version >= current.version) {
      current = answer.championship;
      renderDetail();
    }
  } catch (error) {
    const why = refusal(error);
    showError(t("champ.couldNotCheckIn", { why: refusalWords(why) }), why.reason);
    button.disabled = false;
  }
}

/** The standings and rounds as the server writes them, saved as a file. */
async function download(format: ExportFormat, button: HTMLButtonElement): Promise<void> {
  const id = current?.championshipId;
  if (!id) return;
  button.disabled = true;
  showError("");
  try {
    const file = await client.exportChampionship({ championshipId: id, format });
    const url = URL.createObjectURL(new Blob([file.content], { type: file.mediaType }));
    const link = element("a", "", { href: url, download: file.fileName, hidden: "" });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
  } catch (error) {
    const why = refusal(error);
    showError(t("champ.couldNotExport", { why: refusalWords(why) }), why.reason);
  } finally {
    button.disabled = false;
  }
}

// ------------------------------------------------------------------ the followed one

/**
 * Reads championship ``id`` again and shows it when it is newer than the one shown: after an
 * operator's call, and while an ended one is open (its stream has ended, and an operator may
 * still correct a finished championship's results).
 */
async function reread(id: string): Promise<void> {
  try {
    const answer = await client.getChampionship({ championshipId: id }, { headers: await headers() });
    const c = answer.championship;
    if (!c || current?.championshipId !== id || c.version <= current.version) return;
    current = c;
    renderDetail();
  } catch {
    // The stream, or the next reading, brings it.
  }
}

/** Follows championship ``id`` (its detail shows it); ``again`` opens its stream anew. */
export function follow(id: string, again = false): void {
  if (followed?.id === id && !again) return;
  followed?.stop.abort();
  const stop = new AbortController();
  followed = { id, stop };
  if (current?.championshipId !== id) {
    current = undefined;
    yourTable = undefined;
  }
  sessionStorage.setItem(FOLLOWED_KEY, id);
  void followChampionship(client, id, {
    headers,
    signal: stop.signal,
    onChange: (c, message) => {
      if (stop.signal.aborted) return;
      current = c;
      yourTable = message.yourTable?.tableId ? message.yourTable : undefined;
      renderDetail();
      noteRoundOver();
      // Its line of the list follows too (the list itself is read every few seconds).
      const at = listed.findIndex((l) => l.championshipId === c.championshipId);
      if (at >= 0) {
        listed[at] = c;
        renderList();
      }
    },
    onYourTable: (table) => {
      if (!stop.signal.aborted) goToTable(table);
    },
    onBreak: () => {
      $("champ-state").dataset.live = "false";
    },
  }).then(
    (last) => {
      if (stop.signal.aborted || !last) return;
      void refreshList();
      if (last.state === ChampionshipState.FINISHED && isAtOneOf(last)) showDetail();
    },
    (error: unknown) => {
      if (stop.signal.aborted) return;
      const why = refusal(error);
      showError(t("champ.outOfReach", { why: refusalWords(why) }), why.reason);
      if (why.reason === "CHAMPIONSHIP_NOT_FOUND") sessionStorage.removeItem(FOLLOWED_KEY);
    },
  );
}

function isAtOneOf(c: Championship): boolean {
  const tableId = hooks.here().session?.tableId;
  return !!tableId && c.rounds.some((r) => r.tables.some((t) => t.tableId === tableId));
}

/** The server seated this person: go there, unless they are playing another game now. From
 * a finished game of the championship's previous round, the round's results and the new
 * pairing show first (``BETWEEN_ROUNDS_MS``, or until "Go now"). */
function goToTable(table: YourTable): void {
  const { session, isOver } = hooks.here();
  if (session?.tableId === table.tableId || between?.table?.tableId === table.tableId) return;
  const isBusyElsewhere = !!session?.token && !isOver && !(current && isAtOneOf(current));
  if (isBusyElsewhere) return; // "your next table" says where, with a button
  const from = current?.rounds.find((r) => r.tables.some((t) => t.tableId === session?.tableId));
  const key = from && current ? `${current.championshipId}:${from.roundNumber}` : "";
  if (current && from && session?.token && isOver && from.roundNumber < table.roundNumber) {
    // What is left of the results' time (all of it when they were not shown yet; none when
    // they were shown long enough during the organizer's pause, or closed after being read).
    const since = between && !between.table ? between.since : seenRound === key ? -Infinity : performance.now();
    if (performance.now() - since < BETWEEN_ROUNDS_MS) {
      showBetween(current, from, table, since);
      return;
    }
    closeBetween();
  }
  moveTo(table);
}

let seenRound = ""; // "championship:round" whose results this tab showed

/** At a finished game of a round now over (every table counted), the championship going on:
 * the round's results at once (the organizer's pause before the next round may be long),
 * and the next pairing as soon as it is announced. */
function noteRoundOver(): void {
  const { session, isOver } = hooks.here();
  const c = current;
  if (!c || isEnded(c) || !isOver || !session?.token || between?.table) return;
  const from = c.rounds.find((r) => r.isFinished && r.tables.some((t) => t.tableId === session.tableId));
  const key = from ? `${c.championshipId}:${from.roundNumber}` : "";
  if (!from || (seenRound === key && !between)) return;
  seenRound = key;
  showBetween(c, from, undefined, between?.since ?? performance.now());
}

function moveTo(table: YourTable): void {
  hooks.enterTable({ tableId: table.tableId, token: table.playerToken, seat: table.seat });
  renderBanner();
}

/** The dialog between rounds: since when it shows, and the table it moves to (none yet: the
 * next round is not seated). */
let between: { table: YourTable | undefined; since: number; timer: ReturnType<typeof setInterval> | undefined } | undefined;

/** The dialog between two rounds: each table of round ``from`` with its places and points,
 * then where this person plays next: counting down to the move (from ``since``), or, not
 * seated yet, the announced pairing or the organizer's pause. */
function showBetween(c: Championship, from: ChampionshipRound, next: YourTable | undefined, since: number): void {
  const dialog = $<HTMLDialogElement>("champ-between");
  const name = from.isFinal ? t("champ.theFinalTitle") : t("champ.roundTitle", { round: from.roundNumber });
  $("champ-between-title").textContent = t("between.title", { name });
  $("champ-between-tables").replaceChildren(
    ...from.tables.map((table) => {
      const byPlace = { ...table, seats: [...table.seats].sort((a, b) => (a.place || 99) - (b.place || 99)) };
      const item = element("li", "", { "data-table": table.tableId, "data-yours": String(table.seats.some((s) => s.isYou)) });
      item.append(element("span", t("champ.tableNumber", { n: table.tableNumber })), ...seatWords(c, byPlace));
      return item;
    }),
  );
  if (between?.timer !== undefined) clearInterval(between.timer);
  const line = $("champ-between-in");
  const go = $("champ-between-go");
  dialog.dataset.mode = next ? "next" : "results";
  dialog.dataset.since = String(Math.round(since)); // the results' time counts from here
  if (!next) {
    $("champ-between-next").textContent = announcedWords(c);
    line.textContent = "";
    delete line.dataset.seconds;
    go.textContent = t("game.close");
    between = { table: undefined, since, timer: undefined };
    dialog.dataset.table = "";
    if (!dialog.open) dialog.showModal();
    return;
  }
  const round = c.rounds.find((r) => r.roundNumber === next.roundNumber);
  const seated = round?.tables.find((t) => t.tableId === next.tableId);
  const where = round?.isFinal ? t("champ.theFinal") : t("champ.round", { round: next.roundNumber });
  $("champ-between-next").textContent = t("between.next", { where, table: seated?.tableNumber ?? "", seat: next.seat + 1 });
  go.textContent = t("between.go");
  const shown = { table: next, since, timer: setInterval(() => countDown(), 250) as ReturnType<typeof setInterval> | undefined };
  between = shown;
  const countDown = (): void => {
    if (between !== shown) return;
    const left = Math.max(0, Math.ceil((shown.since + BETWEEN_ROUNDS_MS - performance.now()) / 1000));
    line.textContent = t("between.in", { n: left });
    line.dataset.seconds = String(left);
    if (left <= 0) endBetween();
  };
  countDown();
  dialog.dataset.table = next.tableId;
  if (!dialog.open) dialog.showModal();
}

/** Where this person plays next, while the round is not seated: the announced pairing, or
 * the organizer's pause. */
function announcedWords(c: Championship): string {
  const announced = c.rounds.find((r) => r.isAnnounced && r.tables.some((t) => t.seats.some((s) => s.isYou)));
  const table = announced?.tables.find((t) => t.seats.some((s) => s.isYou));
  const seat = table?.seats.find((s) => s.isYou);
  if (!announced || !table || !seat) return t("between.waiting");
  const where = announced.isFinal ? t("champ.theFinal") : t("champ.round", { round: announced.roundNumber });
  const start = announced.startTime ? at(timestampMs(announced.startTime)) : "";
  return t(start ? "between.announcedAt" : "between.next", { where, table: table.tableNumber, seat: seat.seat + 1, at: start });
}

/** The move the dialog waited for: now (its time ran out, "Go now", or Escape); none when
 * the championship ended meanwhile (its standings show instead). */
function endBetween(): void {
  const shown = closeBetween();
  if (shown?.table && !(current && isEnded(current))) moveTo(shown.table);
}

/** The dialog between rounds closed, its move not made; what it was waiting for. */
function closeBetween(): typeof between {
  const shown = between;
  between = undefined;
  if (shown?.timer !== undefined) clearInterval(shown.timer);
  const dialog = $<HTMLDialogElement>("champ-between");
  if (dialog.open) dialog.close();
  return shown;
}

/** The lobby with the followed championship's standings in view. */
export function showDetail(): void {
  closeBetween(); // the standings say it all
  if (hooks.here().session) hooks.toLobby();
  renderDetail();
  const detail = $("champ-detail");
  detail.scrollIntoView({ block: "start" });
  $("champ-name").setAttribute("tabindex", "-1");
  $("champ-name").focus();
}

function renderDetail(): void {
  const c = current;
  renderBanner();
  renderDirector(c);
  if (!c) return;
  const now = Date.now();
  const detail = $("champ-detail");
  detail.hidden = false;
  detail.dataset.championship = c.championshipId;
  detail.dataset.state = ChampionshipState[c.state] ?? String(c.state);
  detail.dataset.round = String(c.currentRound);
  detail.dataset.paused = String(c.isPaused);
  detail.dataset.version = String(c.version);
  detail.dataset.game = c.rules?.game || "hearts";
  $("champ-name").textContent = c.settings?.displayName || t("col.championship");
  const state = $("champ-state");
  state.dataset.live = "true";
  const when = c.endTime ? at(timestampMs(c.endTime)) : "";
  const registered = { n: c.playerCount, state: stateWords(c), round: roundWords(c), when };
  state.textContent =
    c.state === ChampionshipState.FINISHED ? t(when ? "champ.finishedAt" : "champ.finished", registered) :
    c.state === ChampionshipState.CANCELLED ? t(when ? "champ.cancelledAt" : "champ.cancelled", registered) :
    c.state === ChampionshipState.RUNNING ? t(c.isPaused ? "champ.runningPaused" : "champ.running", registered) :
    c.state === ChampionshipState.REGISTERING ? t(c.isRegistered ? "champ.registeringYou" : "champ.registering", registered) :
    t("champ.stateCount", registered);
  $<HTMLInputElement>("champ-link").value = `${location.origin}/?championship=${encodeURIComponent(c.championshipId)}`;
  renderNext(c);
  renderEntry(c, now);
  renderSettings(c, now);
  renderStandings(c);
  renderRounds(c);
  renderPlayers(c);
  // Again when a window opens or closes (registration, check-in, the start).
  if (nextMoment !== undefined) clearTimeout(nextMoment);
  const next = nextMomentMs(c, now);
  nextMoment = next === undefined ? undefined : setTimeout(renderDetail, Math.min(next - now + 50, LONGEST_WAIT_MS));
}

function renderBanner(): void {
  const c = current;
  const box = $("champ-banner");
  const here = hooks.here().session?.tableId;
  const round = c?.rounds.find((r) => r.tables.some((t) => t.tableId === here));
  box.hidden = !c || !round;
  if (c && round) {
    const name = round.isFinal ? t("champ.theFinal") : t("champ.roundOf", { round: round.roundNumber, n: c.settings?.rounds ?? 0 });
    const title = c.settings?.displayName || t("col.championship");
    $("champ-banner-text").textContent =
      isEnded(c) ? t("champ.bannerEnded", { title, name, state: stateWords(c) }) :
      t(c.isPaused ? "champ.bannerPaused" : "champ.banner", { title, name });
    box.dataset.paused = String(c.isPaused);
  }
}

function renderNext(c: Championship): void {
  const box = $("champ-next");
  box.replaceChildren();
  box.dataset.table = yourTable?.tableId ?? "";
  const announced = c.rounds.find((r) => r.isAnnounced && r.tables.some((t) => t.seats.some((s) => s.isYou)));
  if (yourTable) {
    const round = c.rounds.find((r) => r.roundNumber === yourTable?.roundNumber);
    const table = round?.tables.find((t) => t.tableId === yourTable?.tableId);
    const where = round?.isFinal ? t("champ.theFinal") : t("champ.round", { round: yourTable.roundNumber });
    box.append(element("p", t("champ.yourTable", { where, table: table?.tableNumber ?? "", seat: yourTable.seat + 1 })));
    const go = element("button", t("champ.go"), { id: "champ-go", type: "button", class: "primary" });
    const mine = yourTable;
    go.addEventListener("click", () => hooks.enterTable({ tableId: mine.tableId, token: mine.playerToken, seat: mine.seat }));
    box.append(go);
  } else if (announced) {
    const table = announced.tables.find((t) => t.seats.some((s) => s.isYou))!;
    const seat = table.seats.find((s) => s.isYou)!;
    const where = announced.isFinal ? t("champ.theFinalTitle") : t("champ.roundTitle", { round: announced.roundNumber });
    const words = { where, table: table.tableNumber, seat: seat.seat + 1, at: announced.startTime ? at(timestampMs(announced.startTime)) : "" };
    box.append(element("p", t(announced.startTime ? "champ.pairingAt" : "champ.pairing", words), { id: "champ-next-pairing" }));
  } else if (c.isRegistered && c.state === ChampionshipState.RUNNING) {
    box.append(element("p", t("champ.nextTable")));
  } else if (c.isRegistered && c.state === ChampionshipState.REGISTERING) {
    box.append(element("p", t("champ.registeredNote")));
  }
}

/** Registration and check-in for this person: their windows and the buttons that fit now. */
function renderEntry(c: Championship, now: number): void {
  const box = $("champ-entry");
  box.replaceChildren();
  const m = momentsOf(c.settings);
  const window = registrationWindow(c, now);
  const isLate = c.state === ChampionshipState.RUNNING && (c.settings?.lateEntryRounds ?? 0) > 0;
  if (c.state === ChampionshipState.REGISTERING || isLate) {
    const until = m.registrationClosesMs !== undefined ? t("champ.untilAt", { at: at(m.registrationClosesMs) })
      : isLate ? t("champ.untilRound", { round: c.settings?.lateEntryRounds ?? 0 }) : t("champ.untilStart");
    const text =
      window === "not-open" && m.registrationOpensMs !== undefined ? t("champ.registrationOpens", { at: at(m.registrationOpensMs), until }) :
      window === "open" ? t("champ.registrationOpen", { until }) :
      t("champ.registrationClosed");
    box.append(element("p", text, { id: "champ-registration", "data-window": window }));
    if (c.isRegistered && c.state === ChampionshipState.REGISTERING) {
      const button = element("button", t("champ.unregister"), { id: "champ-unregister", type: "button", "data-action": "unregister" });
      button.addEventListener("click", () => void registration(c.championshipId, false, button));
      box.append(button);
    } else if (!c.isRegistered && window === "open") {
      const button = element("button", t("champ.register"), { id: "champ-register", type: "button", class: "primary", "data-action": "register" });
      button.addEventListener("click", () => void registration(c.championshipId, true, button));
      box.append(button);
    }
  }
  const checkIn = checkInWindow(c, now);
  if (checkIn === "none" || checkIn === "closed" || m.checkInOpensMs === undefined || m.startMs === undefined) return;
  box.append(element("p", t("champ.checkInWindow", { from: at(m.checkInOpensMs), to: at(m.startMs) }),
    { id: "champ-check-in-window", "data-window": checkIn }));
  if (!c.isRegistered) return;
  const you = c.players.find((p) => p.isYou);
  if (you?.isCheckedIn) {
    box.append(element("p", t("champ.checkedIn"), { id: "champ-checked-in", class: "done" }));
  } else if (checkIn === "open") {
    const button = element("button", t("champ.checkIn"), { id: "champ-check-in", type: "button", class: "primary" });
    button.addEventListener("click", () => void checkInNow(c.championshipId, button));
    box.append(button);
  } else {
    box.append(element("p", t("champ.checkInLater", { at: at(m.checkInOpensMs) }), { id: "champ-check-in-later" }));
  }
}

function renderSettings(c: Championship, now: number): void {
  const list = $("champ-settings");
  list.replaceChildren(
    ...settingsLines(c, now).flatMap((line) => [
      element("dt", line.label),
      element("dd", line.text, { "data-setting": line.key }),
    ]),
  );
}

function renderStandings(c: Championship): void {
  const table = $<HTMLTableElement>("champ-standings");
  const columns = standingColumns(c);
  const head = table.tHead!.rows[0]!;
  head.replaceChildren(...columns.map((column) => element("th", column.title, { scope: "col", "data-column": column.key })));
  const body = table.tBodies[0]!;
  body.replaceChildren(
    ...c.standings.map((line) => {
      const row = element("tr", "", {
        "data-you": String(line.isYou), "data-place": String(line.place), "data-decided-by": String(line.decidedBy),
        "data-player": line.playerId,
      });
      row.append(...columns.map((column) => column.key === "player"
        ? element("th", column.cell(line), { scope: "row", "data-column": column.key })
        : element("td", column.cell(line), { "data-column": column.key, ...(column.key === "decided-by" ? { class: "decided" } : {}) })));
      return row;
    }),
  );
  if (!c.standings.length) {
    const empty = element("tr", "", { class: "empty" });
    empty.append(element("td", t("champ.standingsBegin"), { colspan: String(columns.length) }));
    body.append(empty);
  }
}

function seatWords(c: Championship, table: ChampionshipTable): HTMLElement[] {
  const duplicate = isMatchpoints(c.settings) || !!c.settings?.duplicateDeals;
  return table.seats.flatMap((s, i) => {
    const numbers = { place: ordinal(s.place), total: s.total, points: s.points, percentage: numberWords(s.percentage) };
    const result = s.place ? t(duplicate && table.isFinished ? "champ.seatResultPercent" : "champ.seatResult", numbers) : "";
    const marks: Key[] = [];
    if (s.isYou) marks.push("mark.you");
    if (s.hasLeft) marks.push("mark.left");
    if (s.isNoShow) marks.push("mark.noShow");
    const text = s.displayName + marks.map((m) => ` (${t(m)})`).join("") + (result ? ` (${result})` : "");
    const seat = element("span", text, { class: "seat", "data-seat": String(s.seat), "data-player": s.playerId, "data-you": String(s.isYou) });
    return i ? [element("span", ", "), seat] : [seat];
  });
}

function tableLine(c: Championship, round: ChampionshipRound, table: ChampionshipTable): HTMLLIElement {
  const yours = table.seats.some((s) => s.isYou);
  const item = element("li", "", {
    "data-table": table.tableId, "data-number": String(table.tableNumber), "data-finished": String(table.isFinished),
    "data-yours": String(yours), "data-corrected": String(table.isCorrected),
    "data-end-reason": String(table.endReason),
    ...(yours ? { class: "yours" } : {}),
  });
  const live = table.live;
  const end = shortEndReason(table.endReason);
  const over = [t("champ.over"), end, table.isCorrected ? t("champ.corrected") : ""].filter(Boolean).join(", ");
  const how = round.isAnnounced ? "" :
    table.isFinished ? over :
    live && live.phase !== Phase.GAME_OVER && live.handNumber >= 0 ? t("table.hand", { n: live.handNumber + 1 }).toLowerCase() : t("phase.playing");
  if (yours) item.append(element("strong", t("champ.yourTableBadge"), { class: "badge" }));
  item.append(element("span", t(how ? "champ.tableHow" : "champ.tableNumber", { n: table.tableNumber, how })), ...seatWords(c, table), " ");
  const name = round.isFinal ? t("champ.theFinal") : t("champ.round", { round: round.roundNumber });
  if (round.isAnnounced) {
    if (yours) item.append(element("span", t("champ.takesYou"), { class: "note" }));
    return item;
  }
  const mine = yours && yourTable?.tableId === table.tableId ? yourTable : undefined;
  if (mine) {
    const play = element("button", t("champ.play"), { type: "button", class: "primary", "data-action": "play",
      "aria-label": t("champ.playLabel", { n: table.tableNumber, name }) });
    play.addEventListener("click", () => hooks.enterTable({ tableId: mine.tableId, token: mine.playerToken, seat: mine.seat }));
    item.append(play);
    return item;
  }
  const link = element("a", t("watch.button"), { href: `/?watch=${encodeURIComponent(table.tableId)}`, "data-action": "watch",
    "aria-label": t("champ.watchLabel", { n: table.tableNumber, name }) });
  link.addEventListener("click", (event) => {
    event.preventDefault();
    hooks.enterTable({ tableId: table.tableId });
  });
  item.append(link);
  if (table.isFinished && round.isFinished) {
    // Its record is published once the round is over: the game, replayed (replay.ts).
    const replay = element("a", t("replay.open"), { href: `/#/replay/${encodeURIComponent(table.tableId)}`, "data-action": "replay",
      "aria-label": t("champ.replayLabel", { n: table.tableNumber, name }) });
    replay.addEventListener("click", (event) => {
      event.preventDefault();
      void openReplay(table.tableId);
    });
    item.append(" · ", replay);
  }
  return item;
}

/** When a round starts and ends: its start, and its time limit (a length until its tables
 * are made, then the moment its games still running end). */
function roundTimes(c: Championship, round: ChampionshipRound): string {
  const parts: string[] = [];
  const start = round.startTime ?? round.seatTime;
  if (start) parts.push(t(round.isAnnounced ? "champ.startsAt" : "champ.startedAt", { at: at(timestampMs(start)) }));
  const limit = c.settings?.roundTimeLimitSeconds ?? 0;
  if (round.timeLimit && !round.isFinished) parts.push(t("champ.limitAt", { at: at(timestampMs(round.timeLimit)) }));
  else if (limit > 0) parts.push(t("champ.limit", { length: durationWords(limit) }));
  return parts.join(" · ");
}

function renderRounds(c: Championship): void {
  const box = $("champ-rounds");
  box.replaceChildren(
    ...[...c.rounds].reverse().map((round) => {
      const id = `champ-round-${round.roundNumber}`;
      const name = round.isFinal ? t("champ.finalTable") : t("champ.roundTitle", { round: round.roundNumber });
      const state = t(round.isAnnounced ? "champ.pairings" : round.isFinished ? "champ.over" : "phase.playing");
      const block = element("section", "", {
        class: "champ-round", "data-round": String(round.roundNumber), "data-announced": String(round.isAnnounced),
        "data-finished": String(round.isFinished), "aria-labelledby": id,
      });
      const list = element("ul", "", { class: "champ-tables", "aria-labelledby": id });
      list.append(...round.tables.map((t) => tableLine(c, round, t)));
      block.append(element("h4", `${name} (${state})`, { id }), element("p", roundTimes(c, round), { class: "champ-round-times" }), list);
      return block;
    }),
  );
}

function renderPlayers(c: Championship): void {
  const list = $("champ-players");
  const checkIn = (c.settings?.checkInSeconds ?? 0) > 0;
  list.replaceChildren(
    ...c.players.map((p) => {
      const marks = [
        p.isYou ? t("mark.you") : "",
        checkIn && c.state === ChampionshipState.REGISTERING ? t(p.isCheckedIn ? "mark.checkedIn" : "mark.notCheckedIn") : "",
        p.firstRound > 1 ? t("mark.fromRound", { round: p.firstRound }) : "",
        p.hasWithdrawn ? t("mark.withdrew") : "",
        p.isDropped ? t("mark.dropped") : "",
        p.isDisqualified ? t("mark.disqualified") : "",
      ].filter(Boolean);
      return element("li", p.displayName + (marks.length ? ` (${marks.join(", ")})` : ""), {
        "data-player": p.playerId, "data-checked-in": String(p.isCheckedIn), "data-you": String(p.isYou),
      });
    }),
  );
  if (!c.players.length) list.append(element("li", t("champ.nobody")));
}

/** Builds the panel (after the account's, in the lobby), the organizer's (after it) and the
 * banner over the table, lists the championships, and follows the one the link names
 * (`?championship=ID`) or this tab followed before a reload. */
export function startChampionships(given: ChampionshipHooks): void {
  hooks = given;
  client = createClient(ChampionshipService, hooks.transport);
  const box = panel();
  $("me").after(box);
  $("game").prepend(banner());
  startOrganizer({
    transport: hooks.transport,
    account: hooks.account,
    signedIn: hooks.signedIn,
    after: box,
    open: (id) => {
      follow(id, true);
      showDetail();
      void refreshList();
    },
    current: () => current,
    changed: (id) => void reread(id),
  });
  $("champ-between-go").addEventListener("click", endBetween);
  $("champ-between").addEventListener("close", endBetween); // Escape: go now too
  renderList();
  void refreshList();
  setInterval(() => {
    if (!$("lobby").hidden) void refreshList();
    const shown = current;
    if (shown && isEnded(shown) && !$("lobby").hidden) void reread(shown.championshipId);
    renderBanner();
  }, REFRESH_MS);
  const linked = new URLSearchParams(location.search).get("championship");
  const resumed = linked || sessionStorage.getItem(FOLLOWED_KEY);
  if (resumed) follow(resumed);
  if (linked) {
    showDetail();
    history.replaceState(null, "", "/");
  }
}

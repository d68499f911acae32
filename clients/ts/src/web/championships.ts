// The page's championships (championships.proto): a panel in the lobby with the list, a
// Register button for the signed-in account, and the one followed: its live standings, each
// round's tables with links to watch them, "your next table", and the final standings with
// the tie-break that decided each place. While a registered person follows one, the server's
// `your_table` takes them to their seat each round by itself (their player token is used as
// any seat's), and the final standings are shown when it ends. The rest of the page is asked
// only through ``ChampionshipHooks``. Plain DOM: every server string goes in as text.

import { timestampMs } from "@bufbuild/protobuf/wkt";
import { createClient, type Transport } from "@connectrpc/connect";
import { followChampionship, isEnded, roundWords, STATE_WORDS, TIE_BREAK_WORDS } from "../championships.js";
import { type AccountSession, refusal } from "../copas.js";
import {
  type Championship,
  ChampionshipService,
  ChampionshipState,
  type ChampionshipTable,
  type YourTable,
} from "../gen/copas/v1/championships_pb.js";
import { Phase } from "../gen/copas/v1/copas_pb.js";
import { $, element } from "./dom.js";
import type { Session } from "./state.js";
import { ordinal, refusalWords } from "./words.js";

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
const REFRESH_MS = 15_000;

let hooks: ChampionshipHooks;
let client: ReturnType<typeof createClient<typeof ChampionshipService>>;
let listed: Championship[] = [];
let followed: { id: string; stop: AbortController } | undefined;
let current: Championship | undefined;
let yourTable: YourTable | undefined;

function panel(): HTMLElement {
  const box = element("section", "", { id: "championships", class: "panel", "aria-labelledby": "champ-title" });
  const head = element("div", "", { class: "panel-head" });
  head.append(element("h2", "Championships", { id: "champ-title" }),
    element("p", "", { id: "champ-live", class: "live", "data-live": "false" }));
  const table = element("table", "", { id: "champ-list", "aria-labelledby": "champ-title" });
  const headRow = element("tr");
  for (const name of ["Championship", "Rounds", "Players", "Status"]) {
    headRow.append(element("th", name, { scope: "col" }));
  }
  const actions = element("th", "", { scope: "col" });
  actions.append(element("span", "Actions", { class: "visually-hidden" }));
  headRow.append(actions);
  const thead = element("thead");
  thead.append(headRow);
  table.append(thead, element("tbody"));
  const detail = element("section", "", { id: "champ-detail", hidden: "", "aria-labelledby": "champ-name" });
  detail.append(
    element("h3", "", { id: "champ-name" }),
    element("p", "", { id: "champ-state", role: "status" }),
    element("div", "", { id: "champ-next", class: "champ-next" }),
    element("h4", "Standings", { id: "champ-standings-title" }),
  );
  const standings = element("table", "", { id: "champ-standings", "aria-labelledby": "champ-standings-title" });
  const sRow = element("tr");
  for (const name of ["Place", "Player", "Points", "Firsts", "Against the tables", "Games", "Decided by"]) {
    sRow.append(element("th", name, { scope: "col" }));
  }
  const sHead = element("thead");
  sHead.append(sRow);
  standings.append(sHead, element("tbody"));
  detail.append(standings, element("div", "", { id: "champ-rounds" }));
  box.append(head, table, element("p", "", { id: "champ-error", class: "error", role: "alert" }), detail);
  return box;
}

function banner(): HTMLElement {
  const box = element("div", "", { id: "champ-banner", class: "champ-banner", hidden: "" });
  const text = element("p", "", { id: "champ-banner-text" });
  const back = element("button", "Championship standings", { id: "champ-banner-back", type: "button" });
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

// ------------------------------------------------------------------ the list

async function refreshList(): Promise<void> {
  try {
    const answer = await client.listChampionships({ pageSize: 20, includeFinished: true }, { headers: await headers() });
    listed = answer.championships;
    renderList();
    $("champ-live").dataset.live = "true";
    $("champ-live").textContent = "Updated every few seconds";
  } catch (error) {
    $("champ-live").dataset.live = "false";
    $("champ-live").textContent = `Out of reach: ${refusalWords(refusal(error))}`;
  }
}

function renderList(): void {
  const body = $<HTMLTableElement>("champ-list").tBodies[0]!;
  body.replaceChildren(...listed.map(listRow));
  if (!listed.length) {
    const empty = element("tr", "", { class: "empty" });
    empty.append(element("td", "No championships yet.", { colspan: "5" }));
    body.append(empty);
  }
}

function listRow(c: Championship): HTMLTableRowElement {
  const name = c.settings?.displayName || "Championship";
  const row = element("tr", "", {
    "data-championship": c.championshipId,
    "data-state": ChampionshipState[c.state] ?? "",
    "data-registered": String(c.isRegistered),
  });
  const max = c.settings?.maxPlayers ? ` of ${c.settings.maxPlayers}` : "";
  const status = (STATE_WORDS[c.state] ?? "") + (c.isRegistered ? ", you are registered" : "");
  row.append(
    element("th", name, { scope: "row", "data-label": "Championship" }),
    element("td", roundWords(c), { "data-label": "Rounds" }),
    element("td", `${c.playerCount}${max}`, { "data-label": "Players" }),
    element("td", status, { class: "status", "data-label": "Status" }),
  );
  const cell = element("td", "", { class: "actions" });
  if (c.state === ChampionshipState.REGISTERING) {
    const register = c.isRegistered
      ? element("button", "Unregister", { type: "button", "aria-label": `Unregister from ${name}`, "data-action": "unregister" })
      : element("button", "Register", { type: "button", class: "primary", "aria-label": `Register for ${name}`, "data-action": "register" });
    register.addEventListener("click", () => void registration(c.championshipId, !c.isRegistered, register));
    cell.append(register, " ");
  }
  const open = element("button", "Open", { type: "button", "aria-label": `Open ${name}`, "data-action": "open" });
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
    showError(`${isRegister ? "Could not register" : "Could not unregister"}. ${refusalWords(why)}`, why.reason);
  } finally {
    button.disabled = false;
    void refreshList();
  }
}

// ------------------------------------------------------------------ the followed one

function follow(id: string, again = false): void {
  if (followed?.id === id && !again) return;
  followed?.stop.abort();
  const stop = new AbortController();
  followed = { id, stop };
  current = undefined;
  yourTable = undefined;
  sessionStorage.setItem(FOLLOWED_KEY, id);
  void followChampionship(client, id, {
    headers,
    signal: stop.signal,
    onChange: (c, message) => {
      if (stop.signal.aborted) return;
      current = c;
      yourTable = message.yourTable?.tableId ? message.yourTable : undefined;
      renderDetail();
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
      showError(`The championship is out of reach. ${refusalWords(why)}`, why.reason);
      if (why.reason === "CHAMPIONSHIP_NOT_FOUND") sessionStorage.removeItem(FOLLOWED_KEY);
    },
  );
}

function isAtOneOf(c: Championship): boolean {
  const tableId = hooks.here().session?.tableId;
  return !!tableId && c.rounds.some((r) => r.tables.some((t) => t.tableId === tableId));
}

/** The server seated this person: go there, unless they are playing another game now. */
function goToTable(table: YourTable): void {
  const { session, isOver } = hooks.here();
  if (session?.tableId === table.tableId) return;
  const isBusyElsewhere = !!session?.token && !isOver && !(current && isAtOneOf(current));
  if (isBusyElsewhere) return; // "your next table" says where, with a button
  hooks.enterTable({ tableId: table.tableId, token: table.playerToken, seat: table.seat });
  renderBanner();
}

/** The lobby with the followed championship's standings in view. */
function showDetail(): void {
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
  if (!c) return;
  const detail = $("champ-detail");
  detail.hidden = false;
  detail.dataset.championship = c.championshipId;
  detail.dataset.state = ChampionshipState[c.state] ?? "";
  detail.dataset.round = String(c.currentRound);
  $("champ-name").textContent = c.settings?.displayName || "Championship";
  const state = $("champ-state");
  state.dataset.live = "true";
  const when = c.endTime ? `, ${new Date(timestampMs(c.endTime)).toLocaleString()}` : "";
  state.textContent =
    c.state === ChampionshipState.FINISHED ? `Finished${when}: the final standings` :
    c.state === ChampionshipState.CANCELLED ? `Cancelled${when}: the standings as they were` :
    c.state === ChampionshipState.RUNNING ? `${roundWords(c)}: the standings live` :
    `Registration open: ${c.playerCount} registered${c.isRegistered ? ", you among them" : ""}`;
  renderNext(c);
  renderStandings(c);
  renderRounds(c);
}

function renderBanner(): void {
  const c = current;
  const box = $("champ-banner");
  const at = hooks.here().session?.tableId;
  const round = c?.rounds.find((r) => r.tables.some((t) => t.tableId === at));
  box.hidden = !c || !round;
  if (c && round) {
    $("champ-banner-text").textContent =
      `${c.settings?.displayName || "Championship"}: round ${round.roundNumber} of ${c.settings?.rounds ?? 0}` +
      (isEnded(c) ? ` (${STATE_WORDS[c.state]})` : "");
  }
}

function renderNext(c: Championship): void {
  const box = $("champ-next");
  box.replaceChildren();
  box.dataset.table = yourTable?.tableId ?? "";
  if (yourTable) {
    const round = c.rounds.find((r) => r.roundNumber === yourTable?.roundNumber);
    const table = round?.tables.find((t) => t.tableId === yourTable?.tableId);
    box.append(element("p", `Your table in round ${yourTable.roundNumber}: table ${table?.tableNumber ?? ""}, seat ${yourTable.seat + 1}.`));
    const go = element("button", "Go to your table", { id: "champ-go", type: "button", class: "primary" });
    const mine = yourTable;
    go.addEventListener("click", () => hooks.enterTable({ tableId: mine.tableId, token: mine.playerToken, seat: mine.seat }));
    box.append(go);
  } else if (c.isRegistered && c.state === ChampionshipState.RUNNING) {
    box.append(element("p", `Your next table comes when round ${Math.min(c.currentRound + 1, c.settings?.rounds ?? 0)} is seated; this page takes you there.`));
  } else if (c.isRegistered && c.state === ChampionshipState.REGISTERING) {
    box.append(element("p", "You are registered: when it starts, this page takes you to your table each round."));
  }
}

function renderStandings(c: Championship): void {
  const body = $<HTMLTableElement>("champ-standings").tBodies[0]!;
  body.replaceChildren(
    ...c.standings.map((line) => {
      const row = element("tr", "", { "data-you": String(line.isYou), "data-place": String(line.place), "data-decided-by": String(line.decidedBy) });
      const marks = (line.isYou ? " (you)" : "") + (line.hasWithdrawn ? " (withdrew)" : "");
      const firsts = Number.isInteger(line.firsts) ? String(line.firsts) : line.firsts.toFixed(2);
      row.append(
        element("td", String(line.place)),
        element("th", line.displayName + marks, { scope: "row" }),
        element("td", String(line.points)),
        element("td", firsts),
        element("td", `${line.relativePoints >= 0 ? "+" : ""}${line.relativePoints.toFixed(1)}`),
        element("td", String(line.games)),
        element("td", TIE_BREAK_WORDS[line.decidedBy] ?? "", { class: "decided" }),
      );
      return row;
    }),
  );
  if (!c.standings.length) {
    const empty = element("tr", "", { class: "empty" });
    empty.append(element("td", "The standings begin with the first round.", { colspan: "7" }));
    body.append(empty);
  }
}

function tableLine(roundNumber: number, table: ChampionshipTable): HTMLLIElement {
  const item = element("li", "", { "data-table": table.tableId, "data-finished": String(table.isFinished) });
  const seats = table.seats
    .map((s) => s.displayName + (s.isYou ? " (you)" : "") + (s.hasLeft ? " (left)" : "") + (s.place ? ` (${ordinal(s.place)}, ${s.points} points)` : ""))
    .join(", ");
  const live = table.live;
  const how = table.isFinished ? "over" : live && live.phase !== Phase.GAME_OVER ? `hand ${live.handNumber + 1}` : "playing";
  item.append(element("span", `Table ${table.tableNumber} (${how}): ${seats} `));
  const link = element("a", "Watch", { href: `/?watch=${encodeURIComponent(table.tableId)}`,
    "aria-label": `Watch table ${table.tableNumber} of round ${roundNumber}` });
  link.addEventListener("click", (event) => {
    event.preventDefault();
    hooks.enterTable({ tableId: table.tableId });
  });
  item.append(link);
  return item;
}

function renderRounds(c: Championship): void {
  const box = $("champ-rounds");
  box.replaceChildren(
    ...[...c.rounds].reverse().flatMap((round) => {
      const id = `champ-round-${round.roundNumber}`;
      const title = element("h4", `Round ${round.roundNumber}${round.isFinished ? " (over)" : ""}`, { id });
      const list = element("ul", "", { class: "champ-tables", "aria-labelledby": id });
      list.append(...round.tables.map((t) => tableLine(round.roundNumber, t)));
      return [title, list];
    }),
  );
}

/** Builds the panel (after the account's, in the lobby) and the banner over the table, lists
 * the championships, and follows again the one this tab followed before a reload. */
export function startChampionships(given: ChampionshipHooks): void {
  hooks = given;
  client = createClient(ChampionshipService, hooks.transport);
  const me = $("me");
  me.after(panel());
  $("game").prepend(banner());
  renderList();
  void refreshList();
  setInterval(() => {
    if (!$("lobby").hidden) void refreshList();
    renderBanner();
  }, REFRESH_MS);
  const resumed = sessionStorage.getItem(FOLLOWED_KEY);
  if (resumed) follow(resumed);
}

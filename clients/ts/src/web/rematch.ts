// A rematch (issue 30): at the end of a game with other people, "Play again" becomes
// "Rematch": the same people at the same seats of a new table (the server's Rematch call).
// The others see the offer and accept it; the link shared for the first game keeps working:
// opening it after the game leads a person who sat there to their old seat at the rematch.
// Who may take a seat is the server's to say: the old seat's token, or the account.

import type { Client } from "@connectrpc/connect";
import { type CopasService, Phase, type TableSummary, type TableView } from "../gen/copas/v1/copas_pb.js";
import { isOver, refusal } from "../copas.js";
import type { Session } from "./state.js";
import { t } from "./i18n.js";
import { listNames, refusalWords } from "./words.js";

export interface RematchPorts {
  client: Client<typeof CopasService>;
  /** Runs a call with the account's access token (signed in first), or rejects. */
  asAccount<T>(call: (headers: Record<string, string>) => Promise<T>): Promise<T>;
  enterTable(session: Session, table?: TableSummary): void;
  requestId(): string;
  render(): void;
}

// The offer comes on the finished table's stream (a rematch_offered event, then every view
// names the rematch table); who else took their seat back is read from the rematch table's
// summary, and only while the tab is seen (a tab in the background asks nothing until shown).
const POLL_MS = 1500; // once offered, how often the page reads who took their seat back
const POLL_MAX = 400; // at most this many reads per rematch (10 minutes of a shown tab)

/** What the page knows of the rematch of the finished game it shows. */
export const rematch = {
  tableId: "", // the finished game's table
  rematchId: "", // its rematch table, once someone asked
  offeredBy: [] as string[], // the people seated at the rematch table already
  isBusy: false,
  error: "",
};
/** The first game's table of each rematch table this tab sat at: the link to share. */
const firstTable = new Map<string, string>();
let ports: RematchPorts | undefined;
let polling: AbortController | undefined;

export function startRematch(given: RematchPorts): void {
  ports = given;
}

/** A game over, seated, with another person at the table: a rematch, not "Play again". */
export function isRematchGame(view: TableView | undefined, session: Session | undefined): boolean {
  if (!view || !isOver(view) || !session?.token || view.seat === undefined) return false;
  return view.players.some((p) => !p.isBot && p.seat !== view.seat);
}

/** The button's words at the end of a game. */
export function againLabel(view: TableView | undefined, session: Session | undefined): string {
  if (!isRematchGame(view, session)) return t("again.play");
  return t(rematch.tableId === view?.tableId && rematch.rematchId ? "again.accept" : "again.rematch");
}

/** The offer's line under the standings ("" when none). */
export function offerText(view: TableView | undefined): string {
  if (!view || rematch.tableId !== view.tableId || !rematch.rematchId) return "";
  const who = rematch.offeredBy.filter((name) => name);
  const names = who.length ? listNames(who) : t("rematch.someone");
  return t("rematch.offer", { names, n: Math.max(who.length, 1) });
}

/** What the standings must redraw on. */
export function rematchKey(): string {
  return `${rematch.tableId}:${rematch.rematchId}:${rematch.offeredBy.join("/")}:${rematch.error}:${rematch.isBusy}`;
}

/** The link to share for ``tableId``: the first game's, when it is a rematch. */
export function linkTable(tableId: string): string {
  return firstTable.get(tableId) ?? tableId;
}

/** Each view drawn: at the end of a game with other people, the rematch once offered. The
 * offer comes on the table's stream (a rematch_offered event, and every view after it names
 * the rematch table); then the page reads who took their seat back there (while the tab is
 * shown), until it starts. */
export function noteView(view: TableView | undefined, session: Session | undefined): void {
  if (!isRematchGame(view, session) || !view) {
    if (view && view.tableId !== rematch.tableId) {
      stopRematchWatch();
      rematch.tableId = "";
    }
    return;
  }
  if (rematch.tableId !== view.tableId) {
    stopRematchWatch();
    Object.assign(rematch, { tableId: view.tableId, rematchId: "", offeredBy: [], isBusy: false, error: "" });
  }
  if (!view.rematchTableId || rematch.rematchId === view.rematchTableId) return;
  stopRematchWatch();
  rematch.rematchId = view.rematchTableId;
  ports?.render();
  polling = new AbortController();
  void poll(view.tableId, view.rematchTableId, polling.signal);
}

export function stopRematchWatch(): void {
  polling?.abort();
  polling = undefined;
}

/** Resolves once the tab is shown (at once when it is), or the poll is given up. */
function shown(signal: AbortSignal): Promise<void> {
  if (document.visibilityState !== "hidden") return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      if (document.visibilityState === "hidden" && !signal.aborted) return;
      document.removeEventListener("visibilitychange", done);
      signal.removeEventListener("abort", done);
      resolve();
    };
    document.addEventListener("visibilitychange", done);
    signal.addEventListener("abort", done);
  });
}

async function poll(tableId: string, rematchId: string, signal: AbortSignal): Promise<void> {
  for (let i = 0; i < POLL_MAX && !signal.aborted && ports; i += 1) {
    await shown(signal);
    if (signal.aborted || !ports) return;
    try {
      const { table: next } = await ports.client.getTable({ tableId: rematchId }, { signal });
      const names = next?.seats.filter((s) => s.isTaken && !s.isBot).map((s) => s.displayName) ?? [];
      if (rematch.tableId === tableId && names.join("/") !== rematch.offeredBy.join("/")) {
        rematch.offeredBy = names;
        ports.render();
      }
      if (next && next.phase !== Phase.WAITING_FOR_PLAYERS) return; // it started
    } catch {
      if (signal.aborted) return; // the table went: the offer with it
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

/** The button: offer or accept the rematch with this seat's token; seated at the new table. */
export async function acceptRematch(session: Session): Promise<void> {
  if (!ports || !session.token || rematch.isBusy) return;
  const given = ports;
  rematch.isBusy = true;
  rematch.error = "";
  given.render();
  try {
    const headers = { authorization: `Bearer ${session.token}` };
    const requestId = rematchRequestId(session.tableId, given);
    const answer = await given.client.rematch({ tableId: session.tableId, requestId }, { headers });
    seated(session.tableId, answer.table, answer.playerToken, answer.seat);
  } catch (error) {
    rematch.error = t("rematch.refused", { why: refusalWords(refusal(error)) });
    rematch.isBusy = false;
    given.render();
  }
}

/** A shared link (/?join=ID) of a finished game with a rematch: a person who sat at it (this
 * tab's seat there, else the account) takes their old seat at the rematch. False when the
 * link is not that (the ordinary invitation then). */
export async function followLink(tableId: string, resumed: Session | undefined): Promise<boolean> {
  if (!ports) return false;
  const given = ports;
  try {
    const { table } = await given.client.getTable({ tableId });
    if (!table || table.phase !== Phase.GAME_OVER || !table.rematchTableId) return false;
    if (resumed?.token && resumed.tableId === table.rematchTableId) {
      firstTable.set(resumed.tableId, tableId);
      given.enterTable(resumed); // already back at the rematch: a reload
      return true;
    }
    const request = { tableId, requestId: rematchRequestId(tableId, given) };
    const answer = resumed?.tableId === tableId && resumed.token
      ? await given.client.rematch(request, { headers: { authorization: `Bearer ${resumed.token}` } })
      : await given.asAccount((headers) => given.client.rematch(request, { headers }));
    seated(tableId, answer.table, answer.playerToken, answer.seat);
    return true;
  } catch {
    return false; // not one of its people, or it went: the invitation says what there is
  }
}

/** One request id per finished table until an answer comes: a retry after a lost answer
 * gets the seat and token the first call took (a new id would be REMATCH_ALREADY_ACCEPTED). */
function rematchRequestId(oldId: string, given: { requestId(): string }): string {
  const key = `copas.rematch-request.${oldId}`;
  const kept = sessionStorage.getItem(key);
  if (kept) return kept;
  const made = given.requestId();
  sessionStorage.setItem(key, made);
  return made;
}

function seated(oldId: string, table: TableSummary | undefined, token: string, seat: number): void {
  if (!ports || !table) return;
  sessionStorage.removeItem(`copas.rematch-request.${oldId}`);
  stopRematchWatch();
  firstTable.set(table.tableId, firstTable.get(oldId) ?? oldId);
  Object.assign(rematch, { tableId: "", rematchId: "", offeredBy: [], isBusy: false, error: "" });
  ports.enterTable({ tableId: table.tableId, token, seat }, table);
}

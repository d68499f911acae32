// Championships for every TypeScript client (championships.proto): their states, tie-breaks,
// standings, times and windows in words (an enum value newer than this client still reads as
// something), and a follower that keeps WatchChampionship open for a signed-in person (opened
// again after a break) and says once per round "your table is t_...", so a client goes to the
// table the server seated them at by itself. Imports only the generated code, Connect,
// @bufbuild/protobuf's well-known types, ./copas.ts and the words' catalogue ./i18n.ts.

import { timestampMs } from "@bufbuild/protobuf/wkt";
import type { Client } from "@connectrpc/connect";
import {
  type Championship,
  ChampionshipScoring,
  type ChampionshipService,
  type ChampionshipSettings,
  ChampionshipState,
  type StandingLine,
  TieBreak,
  type WatchChampionshipResponse,
  type YourTable,
} from "./gen/copas/v1/championships_pb.js";
import { refusal } from "./copas.js";
import { type Key, t } from "./i18n.js";

/** Each state's message in the catalogue (i18n.ts). */
export const STATE_WORDS: Record<number, Key> = {
  [ChampionshipState.REGISTERING]: "champState.REGISTERING",
  [ChampionshipState.RUNNING]: "champState.RUNNING",
  [ChampionshipState.FINISHED]: "champState.FINISHED",
  [ChampionshipState.CANCELLED]: "champState.CANCELLED",
};

/** What decided a place, its message (RULES.md, "Standings and tie-breaks"). */
export const TIE_BREAK_WORDS: Record<number, Key> = {
  [TieBreak.POINTS]: "tieBreak.POINTS",
  [TieBreak.FIRSTS]: "tieBreak.FIRSTS",
  [TieBreak.RELATIVE_POINTS]: "tieBreak.RELATIVE_POINTS",
  [TieBreak.HEAD_TO_HEAD]: "tieBreak.HEAD_TO_HEAD",
  [TieBreak.DRAW]: "tieBreak.DRAW",
  [TieBreak.BUCHHOLZ]: "tieBreak.BUCHHOLZ",
  [TieBreak.FINAL]: "tieBreak.FINAL",
};

/**
 * An enum's value in words: ``words``'s, else its name as the generated code knows it
 * ("TIME_LIMIT" -> "time limit"), else ``what`` and its number ("criterion 9"): a value a
 * newer server sends is shown as something, never as nothing.
 */
export function enumWords(words: Record<number, Key>, names: object, value: number, what: Key): string {
  const known = words[value];
  if (known !== undefined) return t(known);
  const name = (names as Record<number, unknown>)[value];
  if (typeof name === "string" && value !== 0) return name.toLowerCase().replaceAll("_", " ");
  return t(what, { n: String(value) });
}

/** What decided a place ("" when nothing had to: the line is alone); with ``matchpoints``
 * scoring the main score is the percentages summed, not championship points. */
export function tieBreakWords(value: TieBreak, matchpoints = false): string {
  if (value === TieBreak.UNSPECIFIED) return "";
  if (value === TieBreak.POINTS && matchpoints) return t("tieBreak.matchpoints");
  return enumWords(TIE_BREAK_WORDS, TieBreak, value, "tieBreak.other");
}

/** "playing", "playing, paused by the organizer", "finished"... */
export function stateWords(championship: Championship): string {
  const words = enumWords(STATE_WORDS, ChampionshipState, championship.state, "champState.other");
  return championship.isPaused ? t("champState.paused", { state: words }) : words;
}

export function isEnded(championship: Championship | undefined): boolean {
  const state = championship?.state;
  return state === ChampionshipState.FINISHED || state === ChampionshipState.CANCELLED;
}

/** "Round 2 of 3", "3 rounds" before the start; the final after the rounds. */
export function roundWords(championship: Championship): string {
  const rounds = championship.settings?.rounds ?? 0;
  if (championship.state === ChampionshipState.RUNNING) {
    return championship.currentRound > rounds ? t("round.finalAfter", { n: rounds }) : t("round.of", { round: championship.currentRound, n: rounds });
  }
  return t("round.count", { n: rounds });
}

/** 12 -> "12", 12.3456 -> "12.35": a whole number without decimals, else two. */
export function numberWords(value: number): string {
  return Number.isInteger(value) ? String(value) : value.toFixed(2);
}

/** A sum of game points against the tables' averages: "+3.5", "-1.0". */
export function relativeWords(value: number): string {
  return `${value >= 0 ? "+" : ""}${value.toFixed(1)}`;
}

/** A standing's numbers in words, and the tie-break that decided its place. */
export function standingWords(line: StandingLine): string {
  const firsts = numberWords(line.firsts);
  const decided = tieBreakWords(line.decidedBy);
  const words = t("standing.words", { points: line.points, firsts, n: line.firsts, relative: relativeWords(line.relativePoints) });
  return decided ? t("standing.decided", { words, decided }) : words;
}

/** A length of time: 45 -> "45 s", 90 -> "1 min 30 s", 3600 -> "1 h", 0 -> "none". */
export function durationWords(seconds: number): string {
  const whole = Math.round(seconds);
  if (whole <= 0) return t("duration.none");
  const parts = [
    [Math.floor(whole / 3600), "h"],
    [Math.floor((whole % 3600) / 60), "min"],
    [whole % 60, "s"],
  ] as const;
  return parts.filter(([n]) => n > 0).map(([n, unit]) => `${n} ${unit}`).join(" ");
}

const two = (n: number) => String(n).padStart(2, "0");

/** A moment in this browser's time zone: "14:05:09" on ``nowMs``'s day, else with its date
 * ("2025-06-03 14:05:09"). */
export function timeWords(ms: number, nowMs: number): string {
  const at = new Date(ms);
  const clock = `${two(at.getHours())}:${two(at.getMinutes())}:${two(at.getSeconds())}`;
  if (at.toDateString() === new Date(nowMs).toDateString()) return clock;
  return `${at.getFullYear()}-${two(at.getMonth() + 1)}-${two(at.getDate())} ${clock}`;
}

/** The moments a championship's settings name, in milliseconds (undefined: not set). */
export interface Moments {
  startMs?: number;
  registrationOpensMs?: number;
  registrationClosesMs?: number;
  /** With check-in: when it opens (it closes at the start). */
  checkInOpensMs?: number;
}

export function momentsOf(settings: ChampionshipSettings | undefined): Moments {
  const ms = (t: Parameters<typeof timestampMs>[0] | undefined) => (t ? timestampMs(t) : undefined);
  const startMs = ms(settings?.startTime);
  const checkIn = settings?.checkInSeconds ?? 0;
  return {
    startMs,
    registrationOpensMs: ms(settings?.registrationOpenTime),
    registrationClosesMs: ms(settings?.registrationCloseTime),
    checkInOpensMs: checkIn > 0 && startMs !== undefined ? startMs - checkIn * 1000 : undefined,
  };
}

/** Whether registering is possible now (the server stays the judge): before its window, in
 * it, or after (started without late entry, or late entry over). */
export type Window = "not-open" | "open" | "closed";

export function registrationWindow(championship: Championship, nowMs: number): Window {
  const { registrationOpensMs, registrationClosesMs } = momentsOf(championship.settings);
  if (registrationClosesMs !== undefined && nowMs >= registrationClosesMs) return "closed";
  if (championship.state === ChampionshipState.REGISTERING) {
    return registrationOpensMs !== undefined && nowMs < registrationOpensMs ? "not-open" : "open";
  }
  if (championship.state !== ChampionshipState.RUNNING) return "closed";
  // Late entry: until round N's pairings are made (a round listed is paired).
  const late = championship.settings?.lateEntryRounds ?? 0;
  const paired = championship.rounds.filter((r) => !r.isFinal).length;
  return paired < late ? "open" : "closed";
}

/** Check-in: none (the championship has none), before its window, in it, or over. */
export function checkInWindow(championship: Championship, nowMs: number): Window | "none" {
  const { checkInOpensMs } = momentsOf(championship.settings);
  if (checkInOpensMs === undefined) return "none";
  if (championship.state !== ChampionshipState.REGISTERING) return "closed";
  return nowMs < checkInOpensMs ? "not-open" : "open";
}

/** The next moment after ``nowMs`` at which a window opens or closes (when a page shows them
 * again), or undefined. */
export function nextMomentMs(championship: Championship, nowMs: number): number | undefined {
  const m = momentsOf(championship.settings);
  const ahead = [m.registrationOpensMs, m.registrationClosesMs, m.checkInOpensMs, m.startMs]
    .filter((t): t is number => t !== undefined && t > nowMs);
  return ahead.length ? Math.min(...ahead) : undefined;
}

export function isMatchpoints(settings: ChampionshipSettings | undefined): boolean {
  return settings?.scoring === ChampionshipScoring.MATCHPOINTS;
}

/** A column of the standings: its key, heading, and each line's cell. */
export interface StandingColumn {
  key: string;
  title: string;
  cell: (line: StandingLine) => string;
}

/** "Ana (you) (disqualified)": a standing's name and its marks. */
export function standingName(line: StandingLine): string {
  const marks: Key[] = [];
  if (line.isYou) marks.push("mark.you");
  if (line.hasWithdrawn) marks.push("mark.withdrew");
  if (line.isDropped) marks.push("mark.dropped");
  if (line.isDisqualified) marks.push("mark.disqualified");
  return line.displayName + marks.map((m) => ` (${t(m)})`).join("");
}

/**
 * The standings' columns for this championship: the main score first (the percentages summed
 * with matchpoints scoring, else championship points), matchpoints and percentages with
 * duplicate deals, Buchholz when it is a tie-break, the final's place when there is a final,
 * then first places, game points against the tables, head to head, games and what decided
 * each place.
 */
export function standingColumns(championship: Championship): StandingColumn[] {
  const settings = championship.settings;
  const matchpoints = isMatchpoints(settings);
  const duplicate = matchpoints || !!settings?.duplicateDeals;
  const final = (settings?.finalTable ?? 0) > 0 || championship.standings.some((l) => l.finalPlace > 0);
  const columns: (StandingColumn | false)[] = [
    { key: "place", title: t("col.place"), cell: (l) => String(l.place) },
    { key: "player", title: t("col.player"), cell: standingName },
    matchpoints && { key: "percentage", title: t("col.percentages"), cell: (l) => numberWords(l.percentage) },
    matchpoints && { key: "matchpoints", title: t("col.matchpoints"), cell: (l) => numberWords(l.matchpoints) },
    { key: "points", title: t("col.points"), cell: (l) => String(l.points) },
    duplicate && !matchpoints && { key: "matchpoints", title: t("col.matchpoints"), cell: (l) => numberWords(l.matchpoints) },
    duplicate && !matchpoints && { key: "percentage", title: t("col.percentages"), cell: (l) => numberWords(l.percentage) },
    !!settings?.buchholz && { key: "buchholz", title: t("col.buchholz"), cell: (l) => numberWords(l.buchholz) },
    final && { key: "final", title: t("col.final"), cell: (l) => (l.finalPlace ? String(l.finalPlace) : "") },
    { key: "firsts", title: t("col.firsts"), cell: (l) => numberWords(l.firsts) },
    { key: "relative", title: t("col.relative"), cell: (l) => relativeWords(l.relativePoints) },
    { key: "head-to-head", title: t("col.headToHead"), cell: (l) => (l.headToHead > 0 ? "+" : "") + String(l.headToHead) },
    { key: "games", title: t("col.games"), cell: (l) => String(l.games) },
    { key: "decided-by", title: t("col.decidedBy"), cell: (l) => tieBreakWords(l.decidedBy, matchpoints) },
  ];
  return columns.filter((c): c is StandingColumn => c !== false);
}

/** The calls a follower needs (a Connect client of ChampionshipService has them). */
export type WatchCalls = Pick<Client<typeof ChampionshipService>, "watchChampionship">;

export interface FollowOptions {
  /** `authorization` for the signed-in person (their table comes only with it). */
  headers?: () => Promise<Record<string, string>>;
  /** Each message: the championship as it is now. */
  onChange?: (championship: Championship, message: WatchChampionshipResponse) => void;
  /** Once per table the server seats the person at (a new round's). */
  onYourTable?: (table: YourTable, championship: Championship) => void;
  /** The stream broke and will be opened again (``reason``: the refusal's). */
  onBreak?: (reason: string) => void;
  signal?: AbortSignal;
  sleep?: (ms: number) => Promise<void>;
  /** Breaks in a row before giving up (then the last error is thrown). */
  maxFailures?: number;
}

const BREAKS = new Set(["UNAVAILABLE", "UNKNOWN", "INTERNAL", "DEADLINE_EXCEEDED", "CANCELED", "CANCELLED"]);
const wait = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Follows one championship until its final message (FINISHED or CANCELLED), which it
 * returns; a stream that breaks (a restart, a node gone) is opened again, and a table
 * already announced is not announced twice (the server sends it again after a reopen).
 */
/** A WatchChampionship message's championship as ``yourPlayerId`` sees it: the server sends
 * every watcher the same message (no `isYou`, no `isRegistered`), and each finds its own
 * lines by its player id. */
export function personalized(c: Championship, yourPlayerId: string): Championship {
  if (!yourPlayerId) return c;
  c.isRegistered = true;
  for (const p of c.players) p.isYou = p.playerId === yourPlayerId;
  for (const line of c.standings) line.isYou = line.playerId === yourPlayerId;
  for (const round of c.rounds) {
    for (const table of round.tables) for (const seat of table.seats) seat.isYou = seat.playerId === yourPlayerId;
  }
  return c;
}

export async function followChampionship(
  calls: WatchCalls,
  championshipId: string,
  options: FollowOptions = {},
): Promise<Championship | undefined> {
  const announced = new Set<string>();
  const sleep = options.sleep ?? wait;
  const maxFailures = options.maxFailures ?? 20;
  let failures = 0;
  let last: Championship | undefined;
  while (!options.signal?.aborted) {
    try {
      const headers = options.headers ? await options.headers() : {};
      const stream = calls.watchChampionship({ championshipId }, { headers, signal: options.signal });
      for await (const message of stream) {
        failures = 0;
        const championship = message.championship && personalized(message.championship, message.yourPlayerId);
        if (!championship) continue;
        last = championship;
        options.onChange?.(championship, message);
        const mine = message.yourTable;
        if (mine?.tableId && !announced.has(mine.tableId)) {
          announced.add(mine.tableId);
          options.onYourTable?.(mine, championship);
        }
        if (isEnded(championship)) return championship;
      }
      failures += 1; // ended without its final message: the server is restarting
      options.onBreak?.("UNAVAILABLE");
    } catch (error) {
      if (options.signal?.aborted) return last;
      const why = refusal(error);
      if (!BREAKS.has(why.code) || failures >= maxFailures) throw error;
      failures += 1;
      options.onBreak?.(why.reason);
      await sleep(why.retryAfterMs ?? Math.min(200 * 2 ** failures, 3000));
      continue;
    }
    if (failures > maxFailures) return last;
    await sleep(Math.min(200 * 2 ** failures, 3000));
  }
  return last;
}

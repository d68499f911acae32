// Championships for every TypeScript client (championships.proto): their states and
// tie-breaks in words, and a follower that keeps WatchChampionship open for a signed-in
// person (opened again after a break) and says once per round "your table is t_...", so a
// client goes to the table the server seated them at by itself. Imports only the generated
// code, Connect and ./copas.ts.

import type { Client } from "@connectrpc/connect";
import {
  type Championship,
  type ChampionshipService,
  ChampionshipState,
  type StandingLine,
  TieBreak,
  type WatchChampionshipResponse,
  type YourTable,
} from "./gen/copas/v1/championships_pb.js";
import { refusal } from "./copas.js";

export const STATE_WORDS: Record<number, string> = {
  [ChampionshipState.REGISTERING]: "registration open",
  [ChampionshipState.RUNNING]: "playing",
  [ChampionshipState.FINISHED]: "finished",
  [ChampionshipState.CANCELLED]: "cancelled",
};

/** What decided a place, in words (RULES.md, "Standings and tie-breaks"). */
export const TIE_BREAK_WORDS: Record<number, string> = {
  [TieBreak.POINTS]: "championship points",
  [TieBreak.FIRSTS]: "first places",
  [TieBreak.RELATIVE_POINTS]: "game points against the table's average",
  [TieBreak.HEAD_TO_HEAD]: "games between the tied players",
  [TieBreak.DRAW]: "a seeded draw",
};

export function isEnded(championship: Championship | undefined): boolean {
  const state = championship?.state;
  return state === ChampionshipState.FINISHED || state === ChampionshipState.CANCELLED;
}

/** "Round 2 of 3", "3 rounds" before the start. */
export function roundWords(championship: Championship): string {
  const rounds = championship.settings?.rounds ?? 0;
  if (championship.state === ChampionshipState.RUNNING) return `Round ${championship.currentRound} of ${rounds}`;
  return `${rounds} round${rounds === 1 ? "" : "s"}`;
}

/** A standing's numbers in words, and the tie-break that decided its place. */
export function standingWords(line: StandingLine): string {
  const firsts = Number.isInteger(line.firsts) ? String(line.firsts) : line.firsts.toFixed(2);
  const relative = `${line.relativePoints >= 0 ? "+" : ""}${line.relativePoints.toFixed(1)}`;
  const decided = TIE_BREAK_WORDS[line.decidedBy] ?? "";
  return `${line.points} points, ${firsts} first place${line.firsts === 1 ? "" : "s"}, ${relative} against the tables` +
    (decided ? `; decided by ${decided}` : "");
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

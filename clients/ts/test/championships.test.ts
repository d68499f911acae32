// src/championships.ts: a follower of WatchChampionship announces each table the server seats
// the person at once (also after the stream broke and was opened again), returns the final
// message, gives up on a refusal that is not a break; states and tie-breaks in words.

import { t } from "../src/i18n.js";
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import {
  checkInWindow,
  durationWords,
  enumWords,
  followChampionship,
  momentsOf,
  nextMomentMs,
  numberWords,
  registrationWindow,
  relativeWords,
  roundWords,
  STATE_WORDS,
  standingColumns,
  standingWords,
  stateWords,
  TIE_BREAK_WORDS,
  tieBreakWords,
  timeWords,
  type WatchCalls,
} from "../src/championships.js";
import {
  ChampionshipRoundSchema,
  ChampionshipSchema,
  ChampionshipScoring,
  ChampionshipState,
  StandingLineSchema,
  TieBreak,
  type WatchChampionshipResponse,
  WatchChampionshipResponseSchema,
} from "../src/gen/copas/v1/championships_pb.js";
import { ErrorInfoSchema } from "../src/gen/google/rpc/error_details_pb.js";

function message(state: ChampionshipState, round: number, tableId = ""): WatchChampionshipResponse {
  return create(WatchChampionshipResponseSchema, {
    championship: { championshipId: "c_1", state, currentRound: round, settings: { rounds: 2 } },
    yourTable: tableId ? { roundNumber: round, tableId, seat: 1, playerToken: `token-${tableId}` } : undefined,
  });
}

/** A stream per call, from ``scripts``: each a list of messages, then an error or the end. */
function fakeWatch(scripts: { messages: WatchChampionshipResponse[]; error?: Error }[]) {
  const headersSeen: (Record<string, string> | undefined)[] = [];
  const calls = {
    watchChampionship(request: { championshipId: string }, options?: { headers?: unknown }) {
      expect(request.championshipId).toBe("c_1");
      headersSeen.push(options?.headers as Record<string, string> | undefined);
      const script = scripts.shift();
      if (!script) throw new Error("no more streams");
      return (async function* () {
        for (const m of script.messages) yield m;
        if (script.error) throw script.error;
      })();
    },
  } as unknown as WatchCalls;
  return { calls, headersSeen };
}

const noSleep = async () => undefined;

describe("following a championship", () => {
  it("announces each round's table once, across a broken stream, and returns the end", async () => {
    const R = ChampionshipState.RUNNING;
    const { calls, headersSeen } = fakeWatch([
      { messages: [message(ChampionshipState.REGISTERING, 0), message(R, 1, "t_a"), message(R, 1, "t_a")],
        error: new ConnectError("gone", Code.Unavailable) },
      { messages: [message(R, 1, "t_a"), message(R, 1), message(R, 2, "t_b"),
                   message(ChampionshipState.FINISHED, 2)] },
    ]);
    const tables: string[] = [];
    const states: number[] = [];
    const breaks: string[] = [];
    const last = await followChampionship(calls, "c_1", {
      headers: async () => ({ authorization: "Bearer access" }),
      onYourTable: (table) => tables.push(`${table.roundNumber}:${table.tableId}:${table.playerToken}`),
      onChange: (c) => states.push(c.state),
      onBreak: (reason) => breaks.push(reason),
      sleep: noSleep,
    });
    expect(tables).toEqual(["1:t_a:token-t_a", "2:t_b:token-t_b"]);
    expect(last?.state).toBe(ChampionshipState.FINISHED);
    expect(states.length).toBe(7);
    expect(breaks).toEqual(["UNAVAILABLE"]);
    expect(headersSeen).toEqual([{ authorization: "Bearer access" }, { authorization: "Bearer access" }]);
  });

  it("throws a refusal that is not a break (no such championship)", async () => {
    const notFound = new ConnectError("no championship c_1", Code.NotFound, undefined, [
      { desc: ErrorInfoSchema, value: { reason: "CHAMPIONSHIP_NOT_FOUND", domain: "copas.v1" } },
    ]);
    const { calls } = fakeWatch([{ messages: [], error: notFound }]);
    await expect(followChampionship(calls, "c_1", { sleep: noSleep })).rejects.toBe(notFound);
  });

  it("stops when its signal is aborted", async () => {
    const stop = new AbortController();
    stop.abort();
    const { calls, headersSeen } = fakeWatch([]);
    expect(await followChampionship(calls, "c_1", { signal: stop.signal })).toBeUndefined();
    expect(headersSeen).toEqual([]);
  });
});

describe("championships in words", () => {
  it("names every state and tie-break", () => {
    for (const state of [ChampionshipState.REGISTERING, ChampionshipState.RUNNING,
                         ChampionshipState.FINISHED, ChampionshipState.CANCELLED]) {
      expect(STATE_WORDS[state]).toBeTruthy();
    }
    for (const tie of [TieBreak.POINTS, TieBreak.FIRSTS, TieBreak.RELATIVE_POINTS, TieBreak.HEAD_TO_HEAD,
                       TieBreak.DRAW, TieBreak.BUCHHOLZ, TieBreak.FINAL]) {
      expect(TIE_BREAK_WORDS[tie]).toBeTruthy();
      expect(tieBreakWords(tie)).toBe(t(TIE_BREAK_WORDS[tie]!));
    }
    expect(tieBreakWords(TieBreak.BUCHHOLZ)).toBe("the opponents' scores (Buchholz)");
    expect(tieBreakWords(TieBreak.FINAL)).toBe("the final table");
    // With matchpoints scoring the main score is the percentages summed.
    expect(tieBreakWords(TieBreak.POINTS, true)).toBe("the percentages (matchpoints)");
    expect(tieBreakWords(TieBreak.FIRSTS, true)).toBe("first places");
  });

  it("shows a value newer than this client as something, never as nothing", () => {
    expect(tieBreakWords(9 as TieBreak)).toBe("criterion 9");
    expect(tieBreakWords(TieBreak.UNSPECIFIED)).toBe(""); // nothing had to decide
    const newer = create(ChampionshipSchema, { state: 7 as ChampionshipState });
    expect(stateWords(newer)).toBe("state 7");
    // A value the generated code knows and the words do not: its name.
    expect(enumWords({}, TieBreak, TieBreak.HEAD_TO_HEAD, "tieBreak.other")).toBe("head to head");
  });

  it("says a paused championship is paused", () => {
    const paused = create(ChampionshipSchema, { state: ChampionshipState.RUNNING, isPaused: true });
    expect(stateWords(paused)).toBe("playing, paused by the organizer");
    expect(stateWords(create(ChampionshipSchema, { state: ChampionshipState.RUNNING }))).toBe("playing");
  });

  it("says numbers, lengths and moments", () => {
    expect(numberWords(12)).toBe("12");
    expect(numberWords(200 / 3)).toBe("66.67");
    expect(numberWords(0.5)).toBe("0.50");
    expect(relativeWords(3.25)).toBe("+3.3");
    expect(relativeWords(-1)).toBe("-1.0");
    expect(durationWords(45)).toBe("45 s");
    expect(durationWords(90)).toBe("1 min 30 s");
    expect(durationWords(600)).toBe("10 min");
    expect(durationWords(3600 + 60)).toBe("1 h 1 min");
    expect(durationWords(0)).toBe("none");
    const at = new Date(2031, 5, 3, 20, 5, 9).getTime(); // this machine's time zone, as the page's
    expect(timeWords(at, new Date(2031, 5, 3, 8, 0, 0).getTime())).toBe("20:05:09");
    expect(timeWords(at, new Date(2031, 5, 2, 23, 0, 0).getTime())).toBe("2031-06-03 20:05:09");
  });

  it("finds the registration and check-in windows", () => {
    const t = (ms: number) => timestampFromMs(ms);
    const c = create(ChampionshipSchema, {
      state: ChampionshipState.REGISTERING,
      settings: {
        rounds: 2, registrationOpenTime: t(1_000_000), registrationCloseTime: t(2_000_000),
        startTime: t(3_000_000), checkInSeconds: 600,
      },
    });
    expect(momentsOf(c.settings)).toEqual({
      startMs: 3_000_000, registrationOpensMs: 1_000_000, registrationClosesMs: 2_000_000, checkInOpensMs: 2_400_000,
    });
    expect(registrationWindow(c, 999_999)).toBe("not-open");
    expect(registrationWindow(c, 1_000_000)).toBe("open");
    expect(registrationWindow(c, 2_000_000)).toBe("closed");
    expect(checkInWindow(c, 2_399_999)).toBe("not-open");
    expect(checkInWindow(c, 2_400_000)).toBe("open");
    expect(nextMomentMs(c, 0)).toBe(1_000_000);
    expect(nextMomentMs(c, 2_000_000)).toBe(2_400_000);
    expect(nextMomentMs(c, 3_000_000)).toBeUndefined();
    c.state = ChampionshipState.RUNNING;
    expect(checkInWindow(c, 2_500_000)).toBe("closed");
    expect(checkInWindow(create(ChampionshipSchema, { state: ChampionshipState.REGISTERING }), 0)).toBe("none");
    // Late entry: open after the start until round N is paired.
    const late = create(ChampionshipSchema, {
      state: ChampionshipState.RUNNING, settings: { rounds: 3, lateEntryRounds: 2 }, rounds: [{ roundNumber: 1 }],
    });
    expect(registrationWindow(late, 0)).toBe("open");
    late.rounds.push(create(ChampionshipRoundSchema, { roundNumber: 2, isAnnounced: true }));
    expect(registrationWindow(late, 0)).toBe("closed");
  });

  it("shows every tie-break value the championship has, in the columns its settings give", () => {
    const line = create(StandingLineSchema, {
      place: 2, displayName: "Ana", isYou: true, isDisqualified: true, points: 80, matchpoints: 2.5,
      percentage: 200 / 3, buchholz: 150, finalPlace: 3, firsts: 0.5, relativePoints: -6.5, headToHead: 1, games: 2,
      decidedBy: TieBreak.BUCHHOLZ,
    });
    const cells = (c: ReturnType<typeof create<typeof ChampionshipSchema>>) =>
      Object.fromEntries(standingColumns(c).map((column) => [column.key, column.cell(line)]));
    const matchpoints = create(ChampionshipSchema, {
      settings: { scoring: ChampionshipScoring.MATCHPOINTS, duplicateDeals: true, buchholz: true, finalTable: 4 },
      standings: [line],
    });
    expect(standingColumns(matchpoints).map((c) => c.key)).toEqual([
      "place", "player", "percentage", "matchpoints", "points", "buchholz", "final", "firsts", "relative",
      "head-to-head", "games", "decided-by",
    ]);
    expect(cells(matchpoints)).toEqual({
      place: "2", player: "Ana (you) (disqualified)", percentage: "66.67", matchpoints: "2.50", points: "80",
      buchholz: "150", final: "3", firsts: "0.50", relative: "-6.5", "head-to-head": "+1", games: "2",
      "decided-by": "the opponents' scores (Buchholz)",
    });
    const places = create(ChampionshipSchema, { settings: { scoring: ChampionshipScoring.PLACES } });
    expect(standingColumns(places).map((c) => c.key)).toEqual([
      "place", "player", "points", "firsts", "relative", "head-to-head", "games", "decided-by",
    ]);
    const duplicate = create(ChampionshipSchema, { settings: { duplicateDeals: true } });
    expect(standingColumns(duplicate).map((c) => c.key).slice(2, 5)).toEqual(["points", "matchpoints", "percentage"]);
    // The main score decided it: the percentages with matchpoints scoring, else the points.
    const byScore = create(StandingLineSchema, { ...line, decidedBy: TieBreak.POINTS });
    const decided = (c: ReturnType<typeof create<typeof ChampionshipSchema>>) =>
      standingColumns(c).find((column) => column.key === "decided-by")?.cell(byScore);
    expect(decided(matchpoints)).toBe("the percentages (matchpoints)");
    expect(decided(duplicate)).toBe("championship points");
  });

  it("says the round and what decided a place", () => {
    const running = create(ChampionshipSchema, { state: ChampionshipState.RUNNING, currentRound: 2, settings: { rounds: 3 } });
    expect(roundWords(running)).toBe("Round 2 of 3");
    const line = create(StandingLineSchema, { points: 12, firsts: 1.5, relativePoints: -3.25, decidedBy: TieBreak.FIRSTS });
    expect(standingWords(line)).toBe("12 points, 1.50 first places, -3.3 against the tables; decided by first places");
  });
});

// src/championships.ts: a follower of WatchChampionship announces each table the server seats
// the person at once (also after the stream broke and was opened again), returns the final
// message, gives up on a refusal that is not a break; states and tie-breaks in words.

import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import {
  followChampionship,
  roundWords,
  STATE_WORDS,
  standingWords,
  TIE_BREAK_WORDS,
  type WatchCalls,
} from "../src/championships.js";
import {
  ChampionshipSchema,
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
                       TieBreak.DRAW]) {
      expect(TIE_BREAK_WORDS[tie]).toBeTruthy();
    }
  });

  it("says the round and what decided a place", () => {
    const running = create(ChampionshipSchema, { state: ChampionshipState.RUNNING, currentRound: 2, settings: { rounds: 3 } });
    expect(roundWords(running)).toBe("Round 2 of 3");
    const line = create(StandingLineSchema, { points: 12, firsts: 1.5, relativePoints: -3.25, decidedBy: TieBreak.FIRSTS });
    expect(standingWords(line)).toBe("12 points, 1.50 first places, -3.3 against the tables; decided by first places");
  });
});

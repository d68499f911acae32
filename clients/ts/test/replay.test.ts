// src/web/replay.ts: a record's actions read into the replay's steps.

import { describe, expect, it } from "vitest";
import { stepsOf, trickWinner } from "../src/web/replay.js";

describe("the replay's steps", () => {
  it("gives each trick to the highest card of the suit led", () => {
    const trick = [{ seat: 2, card: "5C" }, { seat: 3, card: "AH" }, { seat: 0, card: "10C" }, { seat: 1, card: "9C" }];
    expect(trickWinner(trick)).toBe(0);
    expect(trickWinner([])).toBeUndefined();
  });

  it("makes a hand's pass and its tricks, and a trick cut short", () => {
    const passes = [0, 1, 2, 3].map((seat) => ({ type: "pass", seat, cards: ["2H", "3H", "4H"].map((c) => c.replace("H", "CDSH"[seat]!)) }));
    const plays = ["2C", "3C", "4C", "QS"].map((card, seat) => ({ type: "play", seat, card }));
    const steps = stepsOf([...passes, ...plays, { type: "play", seat: 2, card: "AH" }, { type: "time_limit", seat: -1 }], 4);
    expect(steps.map((s) => [s.hand, s.kind, s.trick])).toEqual([[0, "pass", -1], [0, "trick", 0], [0, "trick", 1]]);
    expect(steps[0]!.passes).toHaveLength(4);
    expect([steps[1]!.winner, steps[1]!.points]).toEqual([2, 13]);
    expect([steps[2]!.winner, steps[2]!.points, steps[2]!.cards]).toEqual([undefined, 1, [{ seat: 2, card: "AH" }]]);
  });

  it("opens each hand with its deal when the record has the deals", () => {
    const plays = Array.from({ length: 56 }, (_, i) => ({ type: "play", seat: i % 4, card: "2C" }));
    const deals = [0, 1].map((hand) => [0, 1, 2, 3].map((seat) => [`${hand + 2}${"CDSH"[seat]}`]));
    const steps = stepsOf(plays, 4, deals);
    expect(steps.map((s) => [s.hand, s.kind])).toEqual([
      [0, "deal"], ...Array(13).fill([0, "trick"]), [1, "deal"], [1, "trick"],
    ]);
    expect(steps[0]!.dealt).toEqual([["2C"], ["2D"], ["2S"], ["2H"]]);
    expect(steps[14]!.dealt).toEqual([["3C"], ["3D"], ["3S"], ["3H"]]);
    expect(stepsOf(plays, 4, deals.slice(0, 1)).filter((s) => s.kind === "deal")).toHaveLength(1);
  });

  it("starts a new hand after 13 tricks of four", () => {
    const plays = Array.from({ length: 56 }, (_, i) => ({ type: "play", seat: i % 4, card: "2C" }));
    const steps = stepsOf(plays, 4);
    expect(steps.map((s) => s.hand)).toEqual([...Array(13).fill(0), 1]);
  });
});

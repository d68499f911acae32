import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import {
  BISCA_KINDS,
  biscaPoints,
  biscaPointsOf,
  biscaTrickWinner,
  createTableRequest,
  kindOf,
  quickMatchRequest,
  sideOf,
  sides,
  sortBiscaHand,
} from "../src/bisca.js";
import { Suit } from "../src/gen/copas/v1/cards_pb.js";
import { TableViewSchema } from "../src/gen/copas/v1/copas_pb.js";
import { stepsOf } from "../src/web/replay.js";
import { card, cards } from "./cards.js";

describe("kinds of Bisca table", () => {
  it("knows each preset's seats and partners, Bisca de 3 first", () => {
    expect(kindOf("bisca")).toEqual({ game: "bisca", preset: "bisca3", players: 2, partnerships: false });
    expect(kindOf("bisca", "pairs")).toMatchObject({ players: 4, partnerships: true });
    expect(kindOf("bisca", "six")).toMatchObject({ players: 6, partnerships: true });
    expect(kindOf("hearts")).toMatchObject({ game: "hearts", preset: "online", players: 4 });
    expect(BISCA_KINDS.map((k) => k.preset)).toEqual(["bisca3", "bisca7", "bisca9", "pairs", "four", "three", "six"]);
  });

  it("gives a copy: changing it changes no kind", () => {
    const kind = kindOf("bisca", "pairs");
    kind.players = 6;
    expect(kindOf("bisca", "pairs").players).toBe(4);
    kindOf("hearts").players = 5;
    expect(kindOf("hearts").players).toBe(4);
  });

  it("makes a table of the kind with bots in every other seat and no Hearts option", () => {
    const request = createTableRequest(kindOf("bisca", "pairs"), { immediate: true, displayName: "x" });
    expect(request).toMatchObject({ game: "bisca", preset: "pairs", botSeats: 3, rules: { players: 4 } });
    expect(request.rules).not.toHaveProperty("passTimeoutSeconds");
    expect(request.rules).not.toHaveProperty("moonTimeoutSeconds");
    // Hearts's table is asked for as it always was: no game, no players, its clocks zeroed.
    const hearts = createTableRequest(kindOf("hearts"), { immediate: true });
    expect(hearts).toMatchObject({ game: "", preset: "online", botSeats: 3, rules: { passTimeoutSeconds: 0 } });
    expect(hearts.rules).not.toHaveProperty("players");
  });

  it("asks a quick match for the game and its kind (Hearts's as before)", () => {
    expect(quickMatchRequest(kindOf("bisca", "pairs"), "Ana")).toEqual({
      game: "bisca",
      preset: "pairs",
      players: 4,
      partnerships: true,
      displayName: "Ana",
    });
    expect(quickMatchRequest(kindOf("hearts"), "Ana")).toEqual({ preset: "online", displayName: "Ana" });
  });
});

describe("a Bisca hand and its points", () => {
  it("sorts by suit, trumps last, then A 7 K J Q 6 .. 2", () => {
    const sorted = sortBiscaHand(cards("2S", "AH", "QS", "7S", "KC", "AS", "JS"), Suit.SPADES);
    expect(sorted.map((c) => c.text)).toEqual(["KC", "AH", "AS", "7S", "JS", "QS", "2S"]);
  });

  it("counts A 11, 7 10, K 4, J 3, Q 2: 120 in the pack", () => {
    expect(["AS", "7S", "KS", "JS", "QS", "6S", "2S"].map((t) => biscaPoints(card(t)))).toEqual([11, 10, 4, 3, 2, 0, 0]);
  });

  it("reads each side's seats and points, by team in partnerships", () => {
    const view = create(TableViewSchema, {
      players: [0, 1, 2, 3].map((seat) => ({ seat })),
      bisca: { teams: [0, 1, 0, 1], sidePoints: [50, 30], sideTotals: [2, 1] },
    });
    expect(sides(view)).toEqual([
      { side: 0, seats: [0, 2], points: 50, total: 2 },
      { side: 1, seats: [1, 3], points: 30, total: 1 },
    ]);
    expect([0, 1, 2, 3].map((s) => sideOf(view, s))).toEqual([0, 1, 0, 1]);
    const alone = create(TableViewSchema, {
      players: [0, 1].map((seat) => ({ seat })),
      bisca: { sidePoints: [7, 0], sideTotals: [0, 0] },
    });
    expect(sides(alone).map((s) => s.seats)).toEqual([[0], [1]]);
    expect(sideOf(alone, 1)).toBe(1);
  });
});

describe("a Bisca record, trick by trick", () => {
  const play = (seat: number, card: string) => ({ type: "play", seat, card });

  it("gives a trick to the highest trump, else to the highest of the suit led in A 7 K J Q order", () => {
    expect(biscaTrickWinner([{ seat: 0, card: "KH" }, { seat: 1, card: "7H" }], "S")).toBe(1);
    expect(biscaTrickWinner([{ seat: 0, card: "AH" }, { seat: 1, card: "2S" }], "S")).toBe(1);
    expect(biscaTrickWinner([{ seat: 0, card: "2H" }, { seat: 1, card: "AC" }], "S")).toBe(0); // not the suit led
    expect(biscaTrickWinner([{ seat: 0, card: "QD" }, { seat: 1, card: "JD" }, { seat: 2, card: "6D" }, { seat: 3, card: "KD" }], "C")).toBe(3);
    expect(biscaPointsOf("AS") + biscaPointsOf("7S") + biscaPointsOf("6S")).toBe(21);
  });

  it("steps through 40 cards a hand, each hand with its own trumps, with Bisca's points", () => {
    const actions = [];
    const suits = ["C", "D", "S", "H"];
    const ranks = ["A", "7", "K", "J", "Q", "6", "5", "4", "3", "2"];
    for (let hand = 0; hand < 2; hand++) {
      for (let trick = 0; trick < 20; trick++) {
        const [a, b] = [trick * 2, trick * 2 + 1].map((i) => `${ranks[i % 10]}${suits[Math.floor(i / 10)]}`);
        actions.push(play(0, a!), play(1, b!));
      }
    }
    const steps = stepsOf(actions, 2, [], { trumps: ["7H", "2C"] });
    expect(steps.map((s) => s.hand)).toEqual([...Array(20).fill(0), ...Array(20).fill(1)]);
    // AC then 7C: the ace takes it at both hands, 21 points.
    expect([steps[0]!.winner, steps[0]!.points]).toEqual([0, 21]);
    expect(steps.slice(0, 20).reduce((sum, s) => sum + s.points, 0)).toBe(120);
    expect(steps[20]!.trick).toBe(0);
  });
});

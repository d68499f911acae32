import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import {
  BISCA_KINDS,
  biscaPoints,
  createTableRequest,
  kindOf,
  quickMatchRequest,
  sideOf,
  sides,
  sortBiscaHand,
} from "../src/bisca.js";
import { Suit } from "../src/gen/copas/v1/cards_pb.js";
import { TableViewSchema } from "../src/gen/copas/v1/copas_pb.js";
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

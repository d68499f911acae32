// Cards and views for the tests, built as the server sends them.

import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { type Card, CardSchema, Rank, Suit } from "../src/gen/copas/v1/cards_pb.js";
import { Phase, type TableView, TableViewSchema } from "../src/gen/copas/v1/copas_pb.js";

const SUITS: Record<string, Suit> = { C: Suit.CLUBS, D: Suit.DIAMONDS, S: Suit.SPADES, H: Suit.HEARTS };
const RANKS: Record<string, Rank> = { J: Rank.JACK, Q: Rank.QUEEN, K: Rank.KING, A: Rank.ACE };

/** "QS" as the server sends it: text, suit and rank. */
export function card(text: string): Card {
  const rank = text.slice(0, -1);
  return create(CardSchema, {
    text,
    suit: SUITS[text.slice(-1)] ?? Suit.UNSPECIFIED,
    rank: RANKS[rank] ?? (Number(rank) as Rank),
  });
}

export function cards(...texts: string[]): Card[] {
  return texts.map(card);
}

/** Seat 0's view while it must play: ``hand``, of which ``legal`` may be played. */
export function playing(hand: string[], legal: string[], extra: MessageInitShape<typeof TableViewSchema> = {}): TableView {
  return create(TableViewSchema, {
    tableId: "t1",
    seat: 0,
    phase: Phase.PLAYING,
    toAct: [0],
    trickNumber: 1,
    hand: cards(...hand),
    legalCards: cards(...legal),
    ...extra,
  });
}

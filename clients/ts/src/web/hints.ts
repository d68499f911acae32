// Why a card of your hand cannot be played now: a hint the page works out from public facts
// of your view (the suit led, hearts broken, the first-trick rule in view.rules) and your own
// hand. It only explains the view's legal_cards; the server alone decides.

import { type Card, Suit } from "../gen/copas/v1/cards_pb.js";
import { Phase, type TableView } from "../gen/copas/v1/copas_pb.js";
import { mustAct, sameCard } from "../copas.js";
import { t } from "./i18n.js";
import { cardPoints, SUIT_SYMBOL } from "./words.js";

/** A dim card's reason: the ErrorReason the server would give, and the words for it. */
export interface Hint {
  reason: string;
  text: string;
}

export function isLegal(view: TableView, card: Card): boolean {
  return view.legalCards.some((c) => sameCard(c, card));
}

/** Why ``card`` is not among the legal cards while you must play; undefined when it is
 * playable (or when it is not your turn to play at all). */
export function whyNot(view: TableView, card: Card): Hint | undefined {
  if (view.phase !== Phase.PLAYING || !mustAct(view) || isLegal(view, card)) return undefined;
  const led = view.trick?.cards[0]?.card;
  if (!led) {
    if (view.trickNumber === 0) {
      const opening = view.rules?.players === 5 ? "3♣" : "2♣";
      return { reason: "MUST_LEAD_OPENING_CARD", text: t("hint.opening", { card: opening }) };
    }
    if (card.suit === Suit.HEARTS && !view.heartsBroken) {
      return { reason: "HEARTS_NOT_BROKEN", text: t("hint.heartsNotBroken") };
    }
  } else if (card.suit !== led.suit && view.hand.some((c) => c.suit === led.suit)) {
    return { reason: "MUST_FOLLOW_SUIT", text: t("hint.follow", { suit: SUIT_SYMBOL[led.suit] ?? "?" }) };
  } else if (view.trickNumber === 0 && !view.rules?.pointsOnFirstTrick && cardPoints(card) > 0) {
    return { reason: "NO_POINTS_ON_FIRST_TRICK", text: t("hint.noPoints") };
  }
  return { reason: "", text: t("why.notPlayable") };
}

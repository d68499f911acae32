// Passed cards that move (issue 30): when the pass is exchanged, the three cards you passed
// leave the pass's place for the seat that gets them (copies that fly and fade, marked
// data-pass-leaving, gone once they land); the three you received arrive in your hand from
// their giver's seat (table.ts's moveCards marks them data-pass-arriving while they move).
// Nothing moves for whoever asked for reduced motion (the caller checks).

export interface Leaving {
  node: HTMLElement; // the card as the pass's place showed it
  rect: DOMRect; // and where
}

/** Before a redraw: each card the pass's place shows, else the hand, by its text, and where. */
export function passedCards(): Map<string, Leaving> {
  const found = new Map<string, Leaving>();
  for (const node of document.querySelectorAll<HTMLElement>("#pass-direction [data-card], #hand button[data-card]")) {
    const rect = node.getBoundingClientRect();
    const text = node.dataset.card ?? "";
    if (rect.width > 0 && !found.has(text)) found.set(text, { node, rect });
  }
  return found;
}

/** The passed cards fly from where they were to ``to`` (the receiving seat). */
export function sendAway(cards: Leaving[], to: DOMRect | undefined, ms = 520): void {
  if (!to) return;
  for (const { node, rect } of cards) {
    const flying = node.cloneNode(true) as HTMLElement;
    flying.dataset.passLeaving = flying.dataset.card ?? "";
    delete flying.dataset.card; // a picture of a card already gone, not a card of the page
    flying.setAttribute("aria-hidden", "true");
    Object.assign(flying.style, {
      position: "fixed",
      left: `${rect.left}px`,
      top: `${rect.top}px`,
      width: `${rect.width}px`,
      height: `${rect.height}px`,
      margin: "0",
      pointerEvents: "none",
      zIndex: "30",
    });
    document.getElementById("game")?.append(flying);
    const dx = to.left + to.width / 2 - (rect.left + rect.width / 2);
    const dy = to.top + to.height / 2 - (rect.top + rect.height / 2);
    const flight = flying.animate(
      [
        { transform: "none", opacity: 1 },
        { transform: `translate(${dx.toFixed(1)}px, ${dy.toFixed(1)}px) scale(0.6)`, opacity: 0.2 },
      ],
      { duration: ms, easing: "cubic-bezier(0.4, 0, 0.6, 1)" },
    );
    const land = () => flying.remove();
    flight.addEventListener("finish", land);
    flight.addEventListener("cancel", land);
  }
}

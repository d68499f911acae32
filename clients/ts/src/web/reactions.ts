// Quick reactions (issue 30): a row of a few fixed reactions (no free text) for a seated
// person, and each reaction the table's stream shows (ReactionShown, not numbered: nothing
// the game remembers) drawn by its seat for a couple of seconds. The server limits each seat;
// over its limit the row rests for as long as RetryInfo says.

import { Reaction } from "../gen/copas/v1/copas_pb.js";
import { refusal } from "../copas.js";
import { $, element } from "./dom.js";
import { reactionIcon } from "./faces.js";
import { type Key, t } from "./i18n.js";
import { state } from "./state.js";

const SHOWN_MS = 4500; // long enough to be noticed between two cards

/** Each reaction and its words (its icon, an SVG of faces.ts, is decoration). */
export const REACTIONS: ReadonlyArray<[Reaction, Key]> = [
  [Reaction.GOOD_GAME, "reaction.GOOD_GAME"],
  [Reaction.NICE, "reaction.NICE"],
  [Reaction.OOPS, "reaction.OOPS"],
  [Reaction.THANKS, "reaction.THANKS"],
  [Reaction.WOW, "reaction.WOW"],
];

const shown = new Map<number, { reaction: Reaction; until: number }>(); // seat -> its reaction
let timer: ReturnType<typeof setTimeout> | undefined;

/** Sends one reaction of the seated person (the server shows it to everyone at the table). */
export type Send = (tableId: string, reaction: Reaction, headers: Record<string, string>) => Promise<unknown>;

/** Builds the row of buttons once; ``send`` is the React call. */
export function startReactions(send: Send): void {
  const row = $("reactions");
  row.replaceChildren(
    ...REACTIONS.map(([reaction, words]) => {
      const button = element("button", "", {
        type: "button",
        class: "reaction-button",
        "data-reaction": Reaction[reaction],
        "aria-label": t("reaction.label", { words: t(words) }),
      });
      button.append(reactionIcon(reaction), " ", element("span", t(words)));
      button.addEventListener("click", () => void react(send, reaction));
      return button;
    }),
  );
}

async function react(send: Send, reaction: Reaction): Promise<void> {
  const session = state.session;
  if (!session?.token) return;
  const row = $("reactions");
  try {
    await send(session.tableId, reaction, { authorization: `Bearer ${session.token}` });
  } catch (error) {
    const why = refusal(error);
    row.dataset.refused = why.reason;
    if (why.reason === "TOO_MANY_REACTIONS") {
      // The row rests until the seat may react again; the buttons keep their place.
      for (const button of row.querySelectorAll("button")) button.disabled = true;
      setTimeout(() => {
        for (const button of row.querySelectorAll("button")) button.disabled = false;
      }, why.retryAfterMs ?? 2000);
    }
  }
}

/** The row shows for a seated person at the table (a spectator has none). */
export function showRow(isSeated: boolean): void {
  $("reactions").hidden = !isSeated;
}

/** A reaction the stream showed: by its seat, for a few seconds. */
export function noteReaction(seat: number, reaction: Reaction): void {
  shown.set(seat, { reaction, until: performance.now() + SHOWN_MS });
  decorateSeats();
}

/** After each redraw of the seats (and when a reaction's time is up): each seat's reaction. */
export function decorateSeats(): void {
  const now = performance.now();
  for (const [seat, { until }] of shown) if (until <= now) shown.delete(seat);
  for (const item of document.querySelectorAll<HTMLElement>("#seats li[data-seat]")) {
    item.querySelector(".reaction")?.remove();
    const found = shown.get(Number(item.dataset.seat));
    const about = found && REACTIONS.find(([r]) => r === found.reaction);
    if (!about) continue;
    const bubble = element("span", "", { class: "reaction", "data-reaction": Reaction[about[0]] });
    bubble.append(reactionIcon(about[0]), " ", t(about[1]));
    item.append(bubble);
  }
  if (timer !== undefined) clearTimeout(timer);
  timer = undefined;
  const next = Math.min(...Array.from(shown.values(), (s) => s.until));
  if (Number.isFinite(next)) timer = setTimeout(decorateSeats, Math.max(next - now, 0) + 10);
}

/** Leaving a table forgets its reactions. */
export function clearReactions(): void {
  shown.clear();
  decorateSeats();
}

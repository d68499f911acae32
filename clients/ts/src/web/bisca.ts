// Bisca on the page (issue 41): the lobby's choice of game and kind, and what a Bisca table
// adds to the table the page draws for Hearts (table.ts): the trump card under the stock and
// its count, the trick's card points, the teams marked, each side's points. Everything drawn
// here is public or this seat's own (the view holds no other hand and no stock order).
// A Hearts table is drawn exactly as before: nothing here touches it.

import {
  BISCA,
  BISCA_KINDS,
  biscaPoints,
  type GameKind,
  isBisca,
  kindOf,
  sideOf,
  sides,
} from "../bisca.js";
import type { MyGame, Rating } from "../gen/copas/v1/accounts_pb.js";
import { type Rules, type TableView, Phase } from "../gen/copas/v1/copas_pb.js";
import { isOver } from "../copas.js";
import { $, element } from "./dom.js";
import { t, type Key } from "./i18n.js";
import { cardFace } from "./table.js";
import { clockName, listNames, seatName, SUIT_SYMBOL } from "./words.js";

// ------------------------------------------------------------------ the lobby

/** The kind chosen in the lobby's "Card game" field; undefined for Hearts. */
export function chosenKind(value = $<HTMLSelectElement>("game-kind")?.value ?? "hearts"): GameKind | undefined {
  const kind = BISCA_KINDS.find((k) => k.preset === value);
  return kind ? kindOf(BISCA, kind.preset) : undefined;
}

/** Hearts's own fields (its lengths and the moon) step aside for Bisca; the friends' seats
 * follow the kind's (at most one less than its players). */
function applyKind(): void {
  const kind = chosenKind();
  for (const id of ["preset", "moon-rule"]) {
    const field = $(id).closest<HTMLElement>(".field");
    if (field) field.hidden = !!kind;
  }
  const friends = $<HTMLSelectElement>("friends");
  const most = kind ? kind.players - 1 : 3;
  for (const option of friends.options) {
    const isPossible = Number(option.value) <= most;
    option.hidden = !isPossible;
    option.disabled = !isPossible;
  }
  if (Number(friends.value) > most) friends.value = String(most);
  // The words that count seats: the kind's (Hearts's own, as translatePage wrote them, back).
  for (const option of friends.options) {
    const n = Number(option.value);
    option.textContent = kind
      ? t("play.friendsAndBots", { n, bots: kind.players - 1 - n })
      : t(`play.friends${n}` as Key);
  }
  const note = $("create").nextElementSibling;
  if (note) note.textContent = kind ? t("play.botsNoteBisca", { n: kind.players - 1 }) : t("play.botsNote");
  $("create-form").dataset.game = kind ? BISCA : "hearts";
}

export function startBiscaLobby(): void {
  $("game-kind").addEventListener("change", applyKind);
  applyKind();
}

/** "Bisca of 3 (2 players)" for a Bisca table's rules and preset. */
export function biscaKindName(rules: Rules | undefined, preset: string): string {
  const key = `kind.${preset}`;
  const named = BISCA_KINDS.some((k) => k.preset === preset);
  const name = named ? t(key as Key) : t("bisca.name");
  const players = rules?.players ?? 2;
  const teams = rules?.bisca?.partnerships;
  return named ? name : `${name} · ${t(teams ? "bisca.teamsOf" : "bisca.playersOf", { n: players })}`;
}

/** The lobby's Game column: Bisca's kind, or undefined for Hearts (drawn as it was). */
export function lobbyGameName(rules: Rules | undefined, preset: string): string | undefined {
  return isBisca(rules) ? biscaKindName(rules, preset) : undefined;
}

// ------------------------------------------------------------------ ratings, per kind

/** The kind of game the leaderboard's field chooses ("bisca:4:teams"): Hearts's four by
 * default, as before. */
export function boardKind(): { game?: string; players: number; partnerships?: boolean } {
  const [game, players, teams] = ($<HTMLSelectElement>("board-kind")?.value ?? "hearts:4").split(":");
  if (game !== BISCA) return { players: 4 };
  return { game, players: Number(players), partnerships: teams === "teams" };
}

/** The leaderboard's title says the kind chosen (Hearts's own title for Hearts's four). */
export function titleBoard(): void {
  const kind = boardKind();
  $("board-title").textContent = kind.game === BISCA ? t("board.titleOf", { kind: kindWords(kind.players, !!kind.partnerships) }) : t("board.title");
}

/** A Bisca kind's name by its seats ("Bisca, 4 in partnerships"). */
function kindWords(players: number, partnerships: boolean): string {
  if (partnerships) return t(players === 6 ? "kind.six" : "kind.pairs");
  return t(players === 2 ? "kind.bisca2" : players === 3 ? "kind.three" : "kind.four");
}

/** One line for each Bisca kind the account has a rating at ("Bisca, 2 players: 1512, 3
 * games"); Hearts's stays in the line above, as before. */
export function biscaRatings(ratings: Rating[], shown: (rating: number) => number): HTMLLIElement[] {
  return ratings
    .filter((r) => r.game === BISCA)
    .map((r) =>
      element("li", t("me.kindRating", { kind: kindWords(r.players, r.partnerships), rating: String(shown(r.rating)), n: r.games }), {
        "data-game": r.game,
        "data-players": String(r.players),
        "data-partnerships": String(r.partnerships),
        "data-rating": String(r.rating),
      }),
    );
}

/** "Bisca, 4 in partnerships: " before a game of Bisca in the list of your games; "" for Hearts. */
export function myGameKind(game: MyGame): string {
  return game.game === BISCA ? `${kindWords(game.players, game.partnerships)}: ` : "";
}

// ------------------------------------------------------------------ the table

const TEAM = ["A", "B"];

/** A mark on a seat: its team, and "partner" on your partner's (and no Hearts's taken line). */
function markSeats(view: TableView): void {
  const teams = view.bisca?.teams ?? [];
  for (const item of $("seats").querySelectorAll<HTMLElement>("li[data-seat]")) {
    const seat = Number(item.dataset.seat);
    item.querySelector(".tag.team")?.remove();
    item.querySelector(".took")?.replaceChildren(); // Hearts's point cards: none at Bisca
    if (!teams.length) continue;
    const team = teams[seat] ?? 0;
    item.dataset.team = String(team);
    const isPartner = view.seat !== undefined && seat !== view.seat && teams[view.seat] === team;
    // The team's letter (its name spoken in full), and "partner" on your partner's seat.
    const tag = element("span", "", { class: "tag team", "data-team": String(team), title: t("bisca.team", { team: TEAM[team] ?? "" }) });
    tag.append(element("span", t("bisca.teamWord"), { class: "visually-hidden" }), TEAM[team] ?? "");
    if (isPartner) tag.append(` · ${t("bisca.partner")}`);
    item.querySelector(".name")?.append(tag);
  }
}

/** In partnerships, each place at the game's end says its team (partners share it). */
function markStandings(view: TableView): void {
  const teams = view.bisca?.teams ?? [];
  if (!teams.length) return;
  for (const row of $("standings").querySelectorAll<HTMLTableRowElement>("tr[data-seat]")) {
    if (row.dataset.team !== undefined) continue; // drawn once per standings table
    const team = teams[Number(row.dataset.seat)] ?? 0;
    row.dataset.team = String(team);
    row.cells[1]?.append(" ", element("span", t("bisca.team", { team: TEAM[team] ?? "" }), { class: "tag team" }));
  }
}

/** "Ana and Cid" for a team, the seat's name (or "you") alone. */
function sideName(view: TableView, seats: number[]): string {
  return listNames(seats.map((s) => (s === view.seat ? t("seat.you") : seatName(view, s))));
}

/** The trump card under the stock, with how many cards the stock holds (or who drew it). */
function stockFact(view: TableView): HTMLElement {
  const bisca = view.bisca!;
  const drawn = bisca.trumpDrawnBy;
  const stock = element("span", "", {
    class: "fact stock",
    "data-stock": String(bisca.stockSize),
    "data-trump": bisca.trumpCard?.text ?? "",
  });
  const pile = element("span", "", { class: "pile", "aria-hidden": "true" });
  if (bisca.trumpCard) {
    const trump = cardFace(bisca.trumpCard);
    trump.classList.add("mini", "trump");
    pile.append(trump);
  }
  if (drawn === undefined && bisca.stockSize > 1) pile.append(element("span", String(bisca.stockSize - 1), { class: "back" }));
  const suit = bisca.trumpCard ? (SUIT_SYMBOL[bisca.trumpCard.suit] ?? "") : "";
  const card = bisca.trumpCard ? (bisca.trumpCard.text.slice(0, -1) + suit) : "";
  const words =
    drawn === undefined
      ? t("bisca.stock", { n: bisca.stockSize, card })
      : t("bisca.trumpDrawn", { card, name: drawn === view.seat ? t("seat.you") : seatName(view, drawn) });
  stock.append(pile, element("span", words));
  return stock;
}

/** The card points each team took this hand ("team A 34 · team B 20"), named in full for a
 * screen reader and a pointer; alone, each seat's own box says its points. */
function pointsFact(view: TableView): HTMLElement {
  const all = sides(view);
  const full = all.map((s) => t("bisca.sidePoints", { name: sideName(view, s.seats), n: s.points, total: s.total }));
  const short = all.map((s) => t("bisca.teamPoints", { team: TEAM[s.side] ?? "", n: s.points }));
  const fact = element("span", short.join(" · "), {
    class: "fact sides",
    "data-side-points": all.map((s) => s.points).join(","),
    title: full.join("; "),
  });
  fact.append(element("span", ` (${full.join("; ")})`, { class: "visually-hidden" }));
  return fact;
}

/** Adds Bisca's part to the table table.ts drew (call it after table.ts's render). */
export function renderBisca(view: TableView | undefined): void {
  const felt = $("felt");
  if (!view || !isBisca(view.rules) || !view.bisca) {
    delete felt.dataset.game;
    return;
  }
  felt.dataset.game = BISCA;
  markSeats(view);
  markStandings(view);
  const rules = view.rules;
  const kindName = biscaKindName(rules, rules?.bisca ? presetOf(rules) : "");
  const parts = [kindName, clockName(rules)];
  if (view.handNumber >= 0) parts.unshift(t("table.hand", { n: view.handNumber + 1 }));
  $("game-info").textContent = parts.join(" · ");
  const isPlaying = view.phase === Phase.PLAYING;
  const facts = $("table-state");
  if (isPlaying || isOver(view)) {
    facts.hidden = false;
    const tricks = Math.floor(40 / Math.max(1, view.players.length));
    const trick = element("span", t("bisca.trick", { n: Math.min(view.trickNumber + 1, tricks), of: tricks }), { class: "fact" });
    facts.replaceChildren(stockFact(view), ...(view.bisca.teams.length ? [pointsFact(view)] : []), trick);
  }
  // The trick's card points (table.ts counts Hearts's) when it is collected.
  const last = view.lastTrick?.cards ?? [];
  const winner = view.lastTrickWinner;
  if (!view.trick?.cards.length && view.pausedUntil && last.length && winner !== undefined) {
    const points = last.reduce((sum, c) => sum + (c.card ? biscaPoints(c.card) : 0), 0);
    const mine = view.seat !== undefined && sideOf(view, winner) === sideOf(view, view.seat);
    $("trick-note").textContent =
      winner === view.seat
        ? t("trick.youTake", { n: points })
        : t(mine ? "bisca.partnerTakes" : "trick.takes", { n: points, name: seatName(view, winner) });
  }
}

/** The preset a Bisca table's rules come from, as the lobby names its kinds. */
function presetOf(rules: Rules): string {
  const b = rules.bisca!;
  const kind = BISCA_KINDS.find(
    (k) => k.players === rules.players && k.partnerships === b.partnerships && (k.players !== 2 || handSizeOf(k.preset) === b.handSize),
  );
  return kind?.preset ?? "";
}

function handSizeOf(preset: string): number {
  return preset === "bisca7" ? 7 : preset === "bisca9" ? 9 : 3;
}

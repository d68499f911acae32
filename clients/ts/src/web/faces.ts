// The cards' faces and the reactions' icons, drawn here as SVG (the page's own drawings: no
// font, no emoji, no image file): a card is its rank in the corner over its suit, and the
// suit large in the middle; the suits' shapes are paths in a 100x100 box. The four-colour
// deck (clubs green, diamonds blue) tells the suits apart without telling red from black;
// the choice is kept in localStorage.

import { Suit } from "../gen/copas/v1/cards_pb.js";
import { Reaction } from "../gen/copas/v1/copas_pb.js";
import { $ } from "./dom.js";
import { isKey, t } from "./i18n.js";

const SVG = "http://www.w3.org/2000/svg";
const DECK_KEY = "copas.deck";

function svg<K extends keyof SVGElementTagNameMap>(tag: K, attributes: Record<string, string | number> = {}): SVGElementTagNameMap[K] {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
  return node;
}

/** Each suit's shape in a 100x100 box (clubs: three leaves and a stem). */
const SUIT_SHAPES: Record<number, () => SVGElement[]> = {
  [Suit.HEARTS]: () => [svg("path", { d: "M50 90C22 68 4 50 4 31 4 16 15 6 29 6c10 0 17 6 21 14 4-8 11-14 21-14 14 0 25 10 25 25 0 19-18 37-46 59z" })],
  [Suit.DIAMONDS]: () => [svg("path", { d: "M50 3 87 50 50 97 13 50z" })],
  [Suit.SPADES]: () => [
    svg("path", { d: "M50 5C78 29 96 44 96 63c0 13-10 22-22 22-9 0-16-5-20-11 1 10 5 17 13 22H33c8-5 12-12 13-22-4 6-11 11-20 11C14 85 4 76 4 63 4 44 22 29 50 5z" }),
  ],
  [Suit.CLUBS]: () => [
    svg("circle", { cx: 50, cy: 27, r: 21 }),
    svg("circle", { cx: 26, cy: 58, r: 21 }),
    svg("circle", { cx: 74, cy: 58, r: 21 }),
    svg("path", { d: "M44 50h12c0 22 4 36 14 46H30c10-10 14-24 14-46z" }),
  ],
};

const SUIT_LETTER: Record<number, string> = { [Suit.CLUBS]: "C", [Suit.DIAMONDS]: "D", [Suit.SPADES]: "S", [Suit.HEARTS]: "H" };

/** A suit's shape at (x, y), ``size`` wide. */
function pip(suit: number, x: number, y: number, size: number): SVGGElement {
  const group = svg("g", { transform: `translate(${x} ${y}) scale(${size / 100})` });
  group.append(...(SUIT_SHAPES[suit]?.() ?? []));
  return group;
}

/** The rank as a card's corner shows it in the page's language: the face cards' letters (V,
 * D, R, A in Portuguese: Valete, Dama, Rei, Ás; J, Q, K, A in English), numbers as they are. */
export function cardIndex(rank: string): string {
  const key = `index.${rank}`;
  return isKey(key) ? t(key) : rank;
}

/** A card's face: rank and suit in the top corner, the suit large in the middle (50x70). */
export function faceSvg(rank: string, suit: number): SVGSVGElement {
  const face = svg("svg", { viewBox: "0 0 50 70", class: "face", "aria-hidden": "true", focusable: "false" });
  const index = svg("text", { x: rank.length > 1 ? 2 : 5, y: 17, class: "index" });
  if (rank.length > 1) {
    index.setAttribute("textLength", "17"); // "10" in the width of one letter and a half
    index.setAttribute("lengthAdjust", "spacingAndGlyphs");
  }
  index.textContent = cardIndex(rank);
  face.append(index, pip(suit, 4, 21, 13), pip(suit, 17, 31, 29));
  return face;
}

/** The suit's letter (C, D, S, H) for the page's data attributes and the deck's colours. */
export function suitLetter(suit: number): string {
  return SUIT_LETTER[suit] ?? "";
}

// ------------------------------------------------------------------ reactions' icons

const FACE = (mouth: string, extra: SVGElement[] = []) => [
  svg("circle", { cx: 50, cy: 50, r: 44, class: "skin" }),
  svg("circle", { cx: 35, cy: 40, r: 6, class: "ink" }),
  svg("circle", { cx: 65, cy: 40, r: 6, class: "ink" }),
  svg("path", { d: mouth, class: "line" }),
  ...extra,
];

const ICONS: Record<number, () => SVGElement[]> = {
  // a star: a good game
  [Reaction.GOOD_GAME]: () => [svg("path", { class: "gold", d: "M50 6l13 28 30 3-23 20 7 30-27-16-27 16 7-30L7 37l30-3z" })],
  // a thumb up
  [Reaction.NICE]: () => [
    svg("path", { class: "skin", d: "M30 44h10l14-28c8 0 12 6 10 14l-4 12h22c7 0 11 6 9 12l-8 28c-2 5-6 8-11 8H40z" }),
    svg("rect", { class: "ink", x: 8, y: 44, width: 20, height: 48, rx: 4 }),
  ],
  // a grimace
  [Reaction.OOPS]: () => FACE("M30 66h40M30 66q0-8 8-8h24q8 0 8 8q0 8-8 8H38q-8 0-8-8M43 58v16M57 58v16"),
  // a heart: thanks
  [Reaction.THANKS]: () => [svg("path", { class: "red", d: "M50 90C22 68 4 50 4 31 4 16 15 6 29 6c10 0 17 6 21 14 4-8 11-14 21-14 14 0 25 10 25 25 0 19-18 37-46 59z" })],
  // an open mouth
  [Reaction.WOW]: () => FACE("M50 60a9 11 0 1 0 .1 0z"),
};

/** A reaction's icon (decorative: its words say what it is). */
export function reactionIcon(reaction: Reaction): SVGSVGElement {
  const icon = svg("svg", { viewBox: "0 0 100 100", class: "icon", "aria-hidden": "true", focusable: "false" });
  icon.append(...(ICONS[reaction]?.() ?? []));
  return icon;
}

// ------------------------------------------------------------------ the four-colour deck

export function isFourColour(): boolean {
  return localStorage.getItem(DECK_KEY) === "four";
}

function showDeck(): void {
  const isFour = isFourColour();
  document.documentElement.dataset.deck = isFour ? "four" : "two";
  $("deck").setAttribute("aria-pressed", String(isFour));
  $("deck").textContent = t("deck.four");
}

/** The button that switches the four-colour deck on and off (remembered). */
export function startDeck(): void {
  $("deck").addEventListener("click", () => {
    localStorage.setItem(DECK_KEY, isFourColour() ? "two" : "four");
    showDeck();
  });
  showDeck();
}

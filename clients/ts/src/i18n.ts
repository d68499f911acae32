// The words of the page (and of every TypeScript client) in Portugal's Portuguese (the rules
// Copas comes from are written in it), Brazil's Portuguese (only the words that differ, over
// Portugal's: i18n-br.ts) and English. Code names a message by its key, never by its sentence; a
// message may hold {placeholders} and, when it depends on a count {n}, a form per plural
// category (Intl.PluralRules). The language is the person's choice (kept in localStorage),
// else the browser's first of Portuguese or English (navigator.languages: pt-BR is Brazil's,
// any other pt Portugal's), else English.

import { BR } from "./i18n-br.js";
import { EN } from "./i18n-en.js";
import { PT } from "./i18n-pt.js";

/** What a browser (or Node 21+) offers of its storage and languages; nothing elsewhere. */
const host = globalThis as {
  localStorage?: { getItem(key: string): string | null };
  navigator?: { languages?: readonly string[] };
};

/** One message: a sentence, or its forms by plural category (of the count {n}). */
export type Message = string | { one: string; other: string; zero?: string };
export type Key = keyof typeof EN;
export type Catalogue = Record<Key, Message>;
export type Lang = "pt" | "pt-BR" | "en";

export const LANGS: readonly Lang[] = ["pt", "pt-BR", "en"];
export const CATALOGUES: Record<Lang, Catalogue> = { en: EN, pt: PT, "pt-BR": { ...PT, ...BR } };
/** The BCP 47 tag each language is formatted with (en-GB: "Ana, Bea and Cid", no serial comma). */
export const LOCALE: Record<Lang, string> = { pt: "pt-PT", "pt-BR": "pt-BR", en: "en-GB" };
export const LANG_KEY = "copas.lang";

function stored(): string | null {
  try {
    return host.localStorage?.getItem(LANG_KEY) ?? null;
  } catch {
    return null;
  }
}

/** The person's kept choice, else the first of the browser's languages the page speaks. */
export function chooseLang(kept: string | null, languages: readonly string[]): Lang {
  if ((LANGS as readonly (string | null)[]).includes(kept)) return kept as Lang;
  for (const tag of languages) {
    const [base, region] = tag.toLowerCase().split("-");
    if (base === "pt") return region === "br" ? "pt-BR" : "pt";
    if (base === "en") return base;
  }
  return "en";
}

let lang: Lang = chooseLang(stored(), host.navigator?.languages ?? []);
let plurals = new Intl.PluralRules(LOCALE[lang]);

export function currentLang(): Lang {
  return lang;
}

export function locale(): string {
  return LOCALE[lang];
}

/** Switches the language (the tests' way; the page keeps the choice and reloads). */
export function setLang(next: Lang): void {
  lang = next;
  plurals = new Intl.PluralRules(LOCALE[lang]);
}

/** Whether ``key`` names a message (for keys made from the server's enums). */
export function isKey(key: string): key is Key {
  return Object.hasOwn(EN, key);
}

/** A number in the language's digits and separators. */
export function formatNumber(n: number): string {
  return new Intl.NumberFormat(LOCALE[lang]).format(n);
}

/** The message ``key`` in the current language, its {placeholders} filled in (numbers
 * formatted); a count {n} picks the plural form. */
export function t(key: Key, params: Record<string, string | number> = {}): string {
  const message = CATALOGUES[lang][key] ?? EN[key];
  let text: string;
  if (typeof message === "string") {
    text = message;
  } else {
    const n = Number(params.n ?? 0);
    const form = n === 0 && message.zero !== undefined ? "zero" : plurals.select(n);
    text = (form === "zero" ? message.zero : form === "one" ? message.one : message.other) ?? message.other;
  }
  return text.replace(/\{(\w+)\}/g, (whole, name: string) => {
    const value = params[name];
    if (value === undefined) return whole;
    return typeof value === "number" ? formatNumber(value) : value;
  });
}

/** "2 days ago", "yesterday", "há 3 horas": how long ago ``ms`` (a time in ms since 1970) was. */
export function ago(ms: number, now = Date.now()): string {
  const seconds = Math.round((ms - now) / 1000);
  const format = new Intl.RelativeTimeFormat(LOCALE[lang], { numeric: "auto" });
  const steps: [Intl.RelativeTimeFormatUnit, number][] = [["day", 86400], ["hour", 3600], ["minute", 60]];
  for (const [unit, size] of steps) {
    if (Math.abs(seconds) >= size) return format.format(Math.round(seconds / size), unit);
  }
  return format.format(0, "minute");
}


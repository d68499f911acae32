// The static page (index.html) in the chosen language: the catalogue is ../i18n.ts.

import { isKey, LOCALE, currentLang, t } from "../i18n.js";

export * from "../i18n.js";

/** Every element of the static page marked data-i18n (its text) or data-i18n-label,
 * data-i18n-placeholder, data-i18n-title (those attributes) in the current language, and
 * the document's lang and title. */
export function translatePage(root: Document = document): void {
  root.documentElement.lang = LOCALE[currentLang()];
  root.title = t("page.title");
  for (const node of root.querySelectorAll<HTMLElement>("[data-i18n]")) {
    const key = node.dataset.i18n ?? "";
    if (isKey(key)) node.textContent = t(key);
  }
  const attributes: [string, string][] = [["i18nLabel", "aria-label"], ["i18nPlaceholder", "placeholder"], ["i18nTitle", "title"]];
  for (const [data, attribute] of attributes) {
    const dashed = data.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
    for (const node of root.querySelectorAll<HTMLElement>(`[data-${dashed}]`)) {
      const key = node.dataset[data] ?? "";
      if (isKey(key)) node.setAttribute(attribute, t(key));
    }
  }
}

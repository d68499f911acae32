// Plain DOM helpers: every server string goes in as text, never as HTML.

export const $ = <T extends HTMLElement>(id: string): T => document.getElementById(id) as T;

export function element<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  text = "",
  attributes: Record<string, string> = {},
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (text) node.textContent = text;
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  return node;
}

/** Replaces ``box``'s children only when ``key`` changed since the last time (keeps
 * animations running and focus in place while the same thing is shown). */
export function redraw(box: HTMLElement, key: string, draw: () => Node[]): boolean {
  if (box.dataset.key === key) return false;
  box.dataset.key = key;
  box.replaceChildren(...draw());
  return true;
}

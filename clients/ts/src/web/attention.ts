// Your turn while the page is in another tab: the tab's title and icon say so, and, when the
// person allowed it (asked once, on their click of the Alerts button), a notification. The
// choice to be notified is kept in localStorage; nothing about the cards leaves the page.

import { $ } from "./dom.js";
import { t } from "./i18n.js";

const NOTIFY_KEY = "copas.notify";
/** The tab's icons (server/web): a red heart on the felt, and with a gold dot on your turn. */
const ICON = (isTurn: boolean) => (isTurn ? "/icon-turn.svg" : "/icon.svg");

let wasTurn = false;
let titled = false;

function canNotify(): boolean {
  return typeof Notification !== "undefined";
}

function wantsNotices(): boolean {
  return canNotify() && Notification.permission === "granted" && localStorage.getItem(NOTIFY_KEY) === "on";
}

function setIcon(isTurn: boolean): void {
  const link = document.getElementById("favicon") as HTMLLinkElement | null;
  if (link) link.href = ICON(isTurn);
}

function showButton(): void {
  const button = $("notify");
  button.hidden = !canNotify() || Notification.permission === "denied";
  button.setAttribute("aria-pressed", String(wantsNotices()));
}

/** The page's own title again, and its icon, once the person looks at it. */
function restore(): void {
  if (!titled) return;
  titled = false;
  document.title = t("page.title");
  setIcon(false);
}

/** The Alerts button (asks for permission on its click, the only time it is asked), and the
 * title put back when the tab is looked at. */
export function startAttention(): void {
  setIcon(false);
  $("notify").addEventListener("click", () => {
    if (wantsNotices()) {
      localStorage.setItem(NOTIFY_KEY, "off");
      showButton();
      return;
    }
    localStorage.setItem(NOTIFY_KEY, "on");
    void Notification.requestPermission().then(showButton, showButton);
  });
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden) restore();
  });
  showButton();
}

/** Called on each drawing: when the turn has just become yours and the tab is hidden, the
 * title and icon change and a notification (if allowed) says so. */
export function onAttention(isYourTurn: boolean, tableName: string): void {
  if (!isYourTurn) restore();
  if (isYourTurn && !wasTurn && document.hidden) {
    titled = true;
    document.title = t("attention.title", { title: t("page.title") });
    setIcon(true);
    document.documentElement.dataset.attention = String(Number(document.documentElement.dataset.attention ?? "0") + 1);
    if (wantsNotices()) {
      try {
        const notice = new Notification(t("attention.notice"), { body: tableName, tag: "copas-turn", icon: "/icon.svg" });
        notice.onclick = () => {
          window.focus();
          notice.close();
        };
      } catch {
        // Some browsers make notifications only from a service worker: the title still says it.
      }
    }
  }
  wasTurn = isYourTurn;
}

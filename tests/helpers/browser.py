"""Headless Chromium for the page's tests (Debian's chromium, driven by Playwright), and
axe-core (a devDependency of clients/ts) for its accessibility checks."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
AXE = ROOT / "clients" / "ts" / "node_modules" / "axe-core" / "axe.min.js"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, ("chromium is needed for the web page tests: apt-get install -y chromium "
                   "(make test installs it)")
    return found


@contextlib.asynccontextmanager
async def browser() -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        # Playwright gives each launch a fresh profile (its own --user-data-dir).
        launched = await playwright.chromium.launch(executable_path=chromium(),
                                                    args=CHROMIUM_FLAGS)
        try:
            yield launched
        finally:
            await launched.close()


async def axe_violations(page: Any) -> list[dict[str, Any]]:
    await page.add_script_tag(path=str(AXE))
    result = await page.evaluate(
        "() => axe.run(document, {runOnly: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa',"
        " 'best-practice']})")
    return [{"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"]][:3]}
            for v in result["violations"]]

"""The account panel (issue 40): the rating on a 1500 scale with a line on what it means; a
password set says so and the panel shows the username; signing out ends the session on the
server (its refresh token refused), takes the tokens and the device's secret out of storage,
and leaves a new guest in the lobby."""

from __future__ import annotations

import asyncio
import base64
import json

from google.rpc import error_details_pb2

from tests.helpers.browser import browser
from tests.helpers.page import open_page
from tests.helpers.servers import free_port, serving
from tests.helpers.web import post_json

STORAGE = """() => ({ tokens: localStorage.getItem("copas.account"),
                      device: localStorage.getItem("copas.device") })"""


async def test_a_password_is_confirmed_and_sign_out_ends_the_session() -> None:
    port = free_port()
    async with serving(web_port=port, web_host="127.0.0.1") as _, browser() as launched:
        page = await open_page(launched, f"http://127.0.0.1:{port}/", locale="en-GB")
        await page.wait_for_selector("#me[data-account^=a_]")
        guest = await page.get_attribute("#me", "data-account")
        assert await page.text_content("#me-status") == "You are playing as a guest"
        assert await page.is_hidden("#sign-out")  # a guest's account is its device's
        # Ratings on the familiar scale: the server's 0 shows as 1500, with what it means.
        assert (await page.text_content("#me-rating") or "").startswith(
            "Rating 1500 (no rated game yet)")
        assert await page.get_attribute("#me-rating", "data-rating") == "0"
        assert "starts at 1500" in (await page.text_content("#rating-note") or "")

        await page.fill("#link-username", "nina.k")
        await page.fill("#link-password", "a long enough secret")
        await page.click("#link-button")
        await page.wait_for_selector("#me-note:has-text('Password set')")
        assert await page.text_content("#me-note") == (
            "Password set: sign in as nina.k from any browser.")
        assert await page.text_content("#me-status") == "You are signed in as nina.k"
        assert await page.is_hidden("#password-form")
        assert await page.get_attribute("#me", "data-account") == guest  # the same account

        before = await page.evaluate(STORAGE)
        refresh = json.loads(before["tokens"])["refreshToken"]
        await page.click("#sign-out")
        await page.wait_for_selector("#me-note:has-text('Signed out')")
        await page.wait_for_selector(f"#me[data-account^=a_]:not([data-account='{guest}'])")
        after = await page.evaluate(STORAGE)
        assert refresh not in (after["tokens"] or "")
        assert after["device"] != before["device"]  # the next guest is a new one
        assert await page.text_content("#me-status") == "You are playing as a guest"
        assert await page.is_hidden("#sign-out")
        assert not await page.is_hidden("#password-form")
        # The server refuses the old refresh token: the session ended there.
        status, answer = await asyncio.to_thread(
            post_json, port, "RefreshSession", {"refreshToken": refresh}, "127.0.0.1",
            service="copas.v1.AccountService")
        assert status == 401, (status, answer)
        info = next(d for d in answer["details"] if d["type"] == "google.rpc.ErrorInfo")
        raw = base64.b64decode(info["value"] + "=" * (-len(info["value"]) % 4))
        assert error_details_pb2.ErrorInfo.FromString(raw).reason == "SESSION_REVOKED"
        # The password still signs in (signing out ends a session, not the account).
        await page.fill("#sign-in-username", "nina.k")
        await page.fill("#sign-in-password", "a long enough secret")
        await page.click("#sign-in-button")
        await page.wait_for_selector(f"#me[data-account='{guest}']")
        assert page.errors == []


async def refresh_refused(port: int, refresh: str) -> str:
    """The reason the server gives for refusing ``refresh`` (it must refuse it)."""
    status, answer = await asyncio.to_thread(
        post_json, port, "RefreshSession", {"refreshToken": refresh}, "127.0.0.1",
        service="copas.v1.AccountService")
    assert status == 401, (status, answer)
    info = next(d for d in answer["details"] if d["type"] == "google.rpc.ErrorInfo")
    raw = base64.b64decode(info["value"] + "=" * (-len(info["value"]) % 4))
    return error_details_pb2.ErrorInfo.FromString(raw).reason


async def test_sign_out_everywhere_ends_the_other_browsers_session_and_says_so() -> None:
    port = free_port()
    async with serving(web_port=port, web_host="127.0.0.1") as _, browser() as launched:
        url = f"http://127.0.0.1:{port}/"
        laptop = await open_page(launched, url, locale="pt-PT")
        await laptop.wait_for_selector("#me[data-account^=a_]")
        assert await laptop.is_hidden("#sign-out-everywhere")  # a guest's is its device's
        await laptop.fill("#link-username", "rui.m")
        await laptop.fill("#link-password", "a long enough secret")
        await laptop.click("#link-button")
        await laptop.wait_for_selector("#sign-out-everywhere:visible")
        assert await laptop.text_content("#sign-out-everywhere") == "Sair em todos os dispositivos"
        account = await laptop.get_attribute("#me", "data-account")
        phone = await open_page(launched, url, locale="en-GB")
        await phone.wait_for_selector("#me[data-account^=a_]")
        await phone.fill("#sign-in-username", "rui.m")
        await phone.fill("#sign-in-password", "a long enough secret")
        await phone.click("#sign-in-button")
        await phone.wait_for_selector(f"#me[data-account='{account}']")
        tokens = [json.loads((await p.evaluate(STORAGE))["tokens"])["refreshToken"]
                  for p in (laptop, phone)]

        await laptop.focus("#sign-out-everywhere")  # by keyboard
        await laptop.keyboard.press("Enter")
        await laptop.wait_for_selector("#me-note:has-text('todos os dispositivos')")
        assert await laptop.text_content("#me-note") == (
            "Saiu em todos os dispositivos: terminaram 2 sessões (a deste navegador e as dos "
            "outros dispositivos). Este navegador joga como um novo convidado.")
        await laptop.wait_for_selector(f"#me[data-account^=a_]:not([data-account='{account}'])")
        assert tokens[0] not in ((await laptop.evaluate(STORAGE))["tokens"] or "")
        # Both refresh tokens are refused by the server: the phone's session ended too.
        assert [await refresh_refused(port, token) for token in tokens] == [
            "SESSION_REVOKED", "SESSION_REVOKED"]
        assert laptop.errors == [] and phone.errors == []

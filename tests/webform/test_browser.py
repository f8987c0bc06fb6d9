"""The web form in a real browser: Debian's Chromium, driven by Playwright on a phone-sized screen.

A person opens the link the bridge made for them, fills in every field with the native inputs, sends one value the
browser accepts but the bridge refuses, sees the reason beside that field with everything else kept, corrects it and
sends; the MCP server receives exactly typed values. Screenshots of the filled pages are kept in
`.cache/artifacts/webform/` at the top of the repository.
"""

from __future__ import annotations

import json
import re
import socket
import sys
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from playwright.async_api import Browser, Page, Response, async_playwright

from bridge.config.file import ServerConfig
from bridge.web.forms import LinkClaims
from bridge.web.forms.page import CSP
from tests.harness.hosts import BOB, patient
from tests.servers.inline import form_server
from tests.webform.site import running

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / ".cache/artifacts/webform"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
PHONE_WIDTH = 390
PHONE: dict[str, Any] = {"viewport": {"width": PHONE_WIDTH, "height": 844}, "device_scale_factor": 2,
                         "is_mobile": True, "has_touch": True}


@pytest.fixture
def artifacts() -> Path:
    """Where screenshots are kept for people to look at (under the repository's ignored .cache)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    if not await anyio.Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run `bash scripts/dev.sh test` (it runs scripts/install-chromium.sh)")
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            await launched.close()


async def phone_page(browser: Browser) -> Page:
    context = await browser.new_context(**PHONE)
    page = await context.new_page()
    blocked: list[str] = []  # what the Content-Security-Policy refused (the console reports each refusal)
    page.on("console", lambda message: blocked.append(message.text)
            if "Content Security Policy" in message.text else None)
    page.blocked = blocked  # type: ignore[attr-defined]
    return page


async def press(page: Page, button: str) -> Response:
    """Tap a form button and wait for the page the bridge answers with."""
    async with page.expect_response(lambda r: r.request.method == "POST") as answer:
        await page.get_by_role("button", name=button, exact=True).click()
    response = await answer.value
    await page.wait_for_load_state("domcontentloaded")
    return response


async def fits_the_screen(page: Page) -> bool:
    width: int = await page.evaluate("document.documentElement.scrollWidth")
    return width <= PHONE_WIDTH


EVERYTHING_ANSWER = {
    "name": "Ada Lovelace", "check": True, "firstLine": "Call me Ishmael.", "email": "ada@example.com",
    "homepage": "https://example.org/ada", "birthdate": "1815-12-10", "integer": 7, "number": 2.5,
    "untitledSingleSelectEnum": "Rachel", "untitledMultipleSelectEnum": ["Piano", "Drums"],
    "titledSingleSelectEnum": "hero-3", "titledMultipleSelectEnum": ["fish-2", "fish-3"],
    "legacyTitledEnum": "pet-2"}
"""What `fill_everything` enters, as server-everything must receive it (once the email is corrected)."""


async def fill_everything(page: Page, email: str = "ada@example") -> None:
    """Fill server-everything's 13-field form with the native inputs, as a person on a phone would."""
    await page.locator("#f0").fill("Ada Lovelace")
    await page.locator("#f1-field").get_by_label("Yes").check()
    await page.locator("#f2").fill("Call me Ishmael.")
    await page.locator("#f3").fill(email)  # the browser takes it; the bridge wants a dot
    await page.locator("#f4").fill("https://example.org/ada")
    await page.locator("#f5").fill("1815-12-10")
    await page.locator("#f6").fill("7")
    await page.locator("#f7").fill("2.5")
    await page.locator("#f8").select_option(label="Rachel")
    instruments = page.locator("#f9-field")
    await instruments.get_by_label("Guitar").uncheck()
    await instruments.get_by_label("Piano").check()
    await instruments.get_by_label("Drums").check()
    await page.locator("#f10-field").get_by_label("Wonder Woman").check()
    fish = page.locator("#f11-field")
    await fish.get_by_label("Tuna").uncheck()
    await fish.get_by_label("Salmon").check()
    await fish.get_by_label("Trout").check()
    await page.locator("#f12-field").get_by_label("Dogs").check()


async def test_server_everythings_full_form_filled_on_a_phone_reaches_it_exactly_typed(
        browser: Browser, everything_js: Path, artifacts: Path) -> None:
    everything = ServerConfig(name="everything", command="node", args=(str(everything_js), "stdio"))
    async with running({"everything": everything}) as site:
        with anyio.fail_after(patient(60)):
            card = await site.call("everything", "trigger-elicitation-request")
            page = await phone_page(browser)
            opened = await page.goto(site.link(card))
            assert opened is not None and opened.status == 200
            assert opened.headers["content-security-policy"] == CSP
            assert await page.locator(".field").count() == 13
            # Defaults are pre-filled.
            assert await page.locator("#f2").input_value() == "It was a dark and stormy night."
            assert await page.locator("#f6").input_value() == "42"
            assert await page.locator("#f12-field").get_by_label("Cats").is_checked()

            await fill_everything(page)
            instruments = page.locator("#f9-field")
            refused = await press(page, card.accept_label)
            assert refused.status == 422
            error = page.locator("#f3-err")
            assert await error.inner_text() == "enter an email address like name@example.com"
            assert await page.locator("#f3").get_attribute("aria-invalid") == "true"
            assert await page.locator("#f3").input_value() == "ada@example"
            assert await page.locator("#f0").input_value() == "Ada Lovelace"  # everything else is kept
            assert await page.locator("#f8").input_value() == "Rachel"
            assert await instruments.get_by_label("Drums").is_checked()
            assert not await instruments.get_by_label("Guitar").is_checked()
            assert card.id not in site.chat.finished
            await page.screenshot(path=artifacts / "everything-error.png", full_page=True)

            await page.locator("#f3").fill("ada@example.com")
            assert await fits_the_screen(page)
            await page.screenshot(path=artifacts / "everything-filled.png", full_page=True)
            sent = await press(page, card.accept_label)
            assert sent.status == 200
            assert await page.get_by_role("heading").inner_text() == "Thanks — sent"
            text = await site.result("everything", "trigger-elicitation-request")
            await site.chat.wait_finished(card.id)
            assert page.blocked == []  # type: ignore[attr-defined]
    match = re.search(r"Raw result: (\{.*\})", text, re.S)
    assert match, text
    assert json.loads(match.group(1)) == {"action": "accept", "content": EVERYTHING_ANSWER}
    assert (await anyio.Path(artifacts / "everything-filled.png").stat()).st_size > 10_000


async def test_the_console_offers_the_link_and_a_browser_answer_finishes_the_card(
        browser: Browser, everything_js: Path, tmp_path: Path) -> None:
    """`run` with the console: the card prints the person's link; the answer sent from Chromium reaches
    server-everything, and the console shows the card as accepted."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = tmp_path / "bridge.yaml"
    config.write_text(yaml.safe_dump({
        "store": str(tmp_path / "bridge.db"),
        "http": {"listen": f"127.0.0.1:{port}", "public_url": f"http://127.0.0.1:{port}"},
        "servers": {"everything": {"command": "node", "args": [str(everything_js), "stdio"]}},
        "chat": {"console": {}}}))
    process = await anyio.open_process([sys.executable, "-m", "bridge.cli", "run", "-c", str(config)])
    assert process.stdin is not None and process.stdout is not None
    seen = ""

    async def until(pattern: str) -> re.Match[str]:
        nonlocal seen
        assert process.stdout is not None
        while (match := re.search(pattern, seen, re.S)) is None:
            seen += (await process.stdout.receive()).decode()
        return match

    try:
        with anyio.fail_after(patient(60)):
            await until("Type `!mcp help`")
            await process.stdin.send(b"!mcp call everything trigger-elicitation-request\n")
            link = (await until(r"Or fill it in on the web: (\S+)")).group(1)
            page = await phone_page(browser)
            await page.goto(link)
            await fill_everything(page, email="ada@example.com")
            assert (await press(page, "Submit")).status == 200
            result = await until(r"Raw result: (\{.*?\n\})")
            assert "accepted by you" in seen
    except TimeoutError:
        pytest.fail(f"the console said: {seen}")
    finally:
        process.terminate()
        await process.wait()
    assert json.loads(result.group(1)) == {"action": "accept", "content": EVERYTHING_ANSWER}


async def test_a_2026_form_with_a_date_time_and_an_offset_round_trips(browser: Browser, artifacts: Path) -> None:
    async with running({"forms": form_server()}, server_protocol="auto") as site:
        with anyio.fail_after(patient(30)):
            card = await site.call("forms", "fill")
            page = await phone_page(browser)
            await page.goto(site.link(card))
            await page.locator("#f0").fill("Ada")
            await page.locator("#f1").fill("ada@example.com")
            await page.locator("#f3").fill("2026-12-01")
            await page.locator("#f4").fill("2026-12-01T09:30")
            await page.locator("#f4-field").get_by_label("UTC offset for Pick-up time").select_option("+05:30")
            await page.locator("#f5").fill("12")
            await page.locator("#f7").check()
            await page.locator("#f9-field").get_by_label("Kyoto").check()
            await page.locator("#f10-field").get_by_label("Not set").check()
            await page.locator("#f11-field").get_by_label("museums").check()
            await page.screenshot(path=artifacts / "form-2026-filled.png", full_page=True)
            assert (await press(page, card.accept_label)).status == 200
            result = json.loads(await site.result("forms", "fill"))
    assert result == {"era": "2026-07-28", "action": "accept", "content": {
        "name": "Ada", "email": "ada@example.com", "start": "2026-12-01", "pickup": "2026-12-01T09:30:00+05:30",
        "travellers": 12, "budget": 120.5, "window": True, "climate": "mild", "city": "kyo",
        "activities": ["museums", "food"]}}


async def test_server_text_is_shown_as_text_under_the_strict_policy(browser: Browser) -> None:
    schema = json.dumps({"type": "object", "properties": {
        "x": {"type": "string", "title": "<script>document.title='pwned'</script>",
              "description": "<b>bold?</b>"}}})
    async with running({"forms": form_server()}) as site:
        with anyio.fail_after(patient(30)):
            card = await site.call("forms", "fill", {"schema": schema})
            page = await phone_page(browser)
            response = await page.goto(site.link(card))
            assert response is not None and response.headers["content-security-policy"] == CSP
            assert await page.locator("script").count() == 0 and await page.locator("b").count() == 0
            assert await page.get_by_text("<script>document.title='pwned'</script>").is_visible()
            assert await page.get_by_text("Please fill this in <b>now</b>").is_visible()
            assert "pwned" not in await page.title()
            # The inline style sheet is allowed by its hash: the Accept button is styled, and nothing was blocked.
            colour = await page.get_by_role("button", name=card.accept_label).evaluate("b => getComputedStyle(b).color")
            assert colour == "rgb(255, 255, 255)"
            assert page.blocked == []  # type: ignore[attr-defined]


async def test_expired_strangers_reused_tampered_and_cross_site_links_are_refused(browser: Browser) -> None:
    schema = json.dumps({"type": "object", "properties": {"ok": {"type": "boolean", "title": "OK?"}},
                         "required": ["ok"]})
    async with running({"forms": form_server()}, lifetime=120) as site:
        with anyio.fail_after(patient(30)):
            card = await site.call("forms", "fill", {"schema": schema})
            url = site.link(card)
            page = await phone_page(browser)

            async def visit(address: str) -> tuple[int, str]:
                response = await page.goto(address)
                assert response is not None
                return response.status, await page.get_by_role("heading").inner_text()

            claims = site.forms.links.check(url.rsplit("/", 1)[1])
            assert isinstance(claims, LinkClaims)
            strangers = site.base + "/form/" + site.forms.links.sign(replace(claims, actor=BOB))
            assert await visit(strangers) == (403, "This link is not for you")
            token = url.rsplit("/", 1)[1]
            tampered = site.base + "/form/" + token[:-1] + ("A" if token[-1] != "A" else "B")
            assert await visit(tampered) == (400, "This link is not valid")

            # A page on another site that somehow has the link, posting to it, is refused (Origin and Sec-Fetch-Site).
            attack = (f'<form method="post" action="{url}"><input type="hidden" name="f0" value="on">'
                      '<button name="action" value="accept">Win a prize</button></form>')
            await page.route("https://evil.example/**", lambda route: route.fulfill(
                status=200, content_type="text/html", body=attack))
            await page.goto("https://evil.example/prize")
            assert (await press(page, "Win a prize")).status == 403
            assert site.host.open_interaction(card.id) == card

            assert (await visit(url))[0] == 200
            await page.locator("#f0").check()
            assert (await press(page, card.accept_label)).status == 200
            await site.chat.wait_finished(card.id)
            assert await visit(url) == (410, "This link has already been used")

            second = await site.call("forms", "fill", {"schema": schema})
            late = site.link(second)
            site.clock.offset = 121
            assert await visit(late) == (410, "This link has expired")
            assert site.host.open_interaction(second.id) == second
            assert site.chat.notices == []

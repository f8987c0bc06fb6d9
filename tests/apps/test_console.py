"""MCP Apps from the console, in Chromium on a phone-sized screen: the real console adapter prints the person's own
link under a result whose tool has an app, and the app runs on the bridge's page from it.

server-basic-vanillajs shows the time of the result it was given, calls `get-time` itself (through the bridge, to
the server), sends a message (posted in the conversation, labelled) and asks to open a link (shown with its host, the
page stays). The app cannot reach another origin (its CSP), another browser is refused the link, and closing the app
tears it down. server-system-monitor draws the result it was given and polls `poll-system-stats`, a tool for its app
alone, which chat does not list and cannot call. Screenshots: .cache/artifacts/apps/.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest
from playwright.async_api import Browser

from adapters.console import ConsoleAdapter
from bridge.config.file import ServerConfig
from bridge.host import Host
from bridge.web.apps.routes import AppPages
from bridge.web.server import HttpServer
from tests.adapters.console.test_connect import Screen
from tests.apps import browsing, servers
from tests.apps.servers import gated
from tests.harness.hosts import config_for, host_store, patient
from tests.webform import test_browser as web

pytestmark = [pytest.mark.anyio]

browser = web.browser
basic, monitor = servers.basic, servers.monitor  # the example app servers (fixtures)
LINK = re.compile(r"\[app\] .*?: (http://127\.0\.0\.1:\d+/app/\S+)")
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z$")


class Terminal:
    """The console's input, fed line by line by the test, open until `close`."""

    def __init__(self) -> None:
        self._send, self._receive = anyio.create_memory_object_stream[str | None](10)

    async def lines(self) -> AsyncIterator[str]:
        async with self._receive:
            async for line in self._receive:
                if line is None:
                    return
                yield line

    async def type(self, line: str) -> None:
        await self._send.send(line)

    async def close(self) -> None:
        async with self._send:
            await self._send.send(None)


@asynccontextmanager
async def console_with_apps(servers: dict[str, ServerConfig]) -> AsyncIterator[tuple[Screen, Terminal, HttpServer]]:
    """A host offering apps on its own HTTP server, and the console adapter on it: what the console shows, the
    terminal the test types into, and the server the app pages are on."""
    config = config_for(servers)
    out, terminal = Screen(), Terminal()
    host = Host(config, await host_store(config))
    http = HttpServer("127.0.0.1:0")
    host.offer_apps(AppPages(host.apps, host, host.pool, host.outbound, http))
    async with host, anyio.create_task_group() as tg:
        await tg.start(http.serve)
        console = ConsoleAdapter(host, terminal.lines(), out)
        host.attach(console)
        tg.start_soon(console.serve)
        yield out, terminal, http
        await terminal.close()
        tg.cancel_scope.cancel()


async def test_the_basic_app_runs_from_the_consoles_link_and_its_requests_reach_the_bridge(
        basic: ServerConfig, browser: Browser) -> None:
    async with console_with_apps({"basic": basic}) as (out, terminal, http):
        with anyio.fail_after(patient(90)):
            await terminal.type("!mcp call basic get-time")
            url = LINK.search(await out.wait_for(LINK)).group(1)  # type: ignore[union-attr]
            first = re.search(r"basic\.get-time:\n(\S+)", out.getvalue()).group(1)  # type: ignore[union-attr]
            assert ISO.match(first)

            page, said = await browsing.open_app(browser, url)
            frame = await browsing.app_frame(page, "#server-time")
            # The app runs in the sandbox, on another origin than the page (localhost, not 127.0.0.1).
            assert frame.parent_frame is not None
            assert frame.parent_frame.url.startswith(f"http://localhost:{http.port}/app-sandbox/")
            app = browsing.inside(page)
            # The tool's input and result reached the app: it shows the result's time, and logged the input.
            await app.locator("#server-time", has_text=first).wait_for()
            await browsing.said_in(page, said, "Received tool call input:")
            await page.screenshot(path=browsing.artifacts() / "console-basic.png", full_page=True)
            # Phone-sized: nothing wider than the screen; the frame takes the height the app asked for.
            assert await web.fits_the_screen(page)
            assert await page.locator("#app").evaluate("f => f.style.height") not in ("", "480px")

            # The app's own tools/call reaches the server: a later time.
            await browsing.settled(page)
            await browsing.tap(app, "Get Server Time")
            await app.locator("#server-time", has_text=re.compile(r"^(?!" + re.escape(first) + r")\d{4}-")).wait_for()
            assert ISO.match(await app.locator("#server-time").inner_text())

            # ui/message: posted in the conversation, cleaned and labelled with the server and the person.
            await app.locator("#message-text").fill("Lunch at noon?\u202e")
            await browsing.tap(app, "Send Message")
            posted = await out.wait_for(r"Message from the app of basic.*, sent by you:\nLunch at noon\?\n")
            assert "\u202e" not in posted

            # ui/open-link: shown with its real host; the page stays where it is.
            await app.locator("#link-url").fill("https://example.org/some/path")
            await browsing.tap(app, "Open Link")
            shown = page.locator(".link")
            await shown.wait_for()
            assert "The app asks to open a link to example.org" in await shown.inner_text()
            assert await shown.get_by_role("link").get_attribute("href") == "https://example.org/some/path"
            assert page.url == url

            # The app cannot reach another origin: its CSP (none declared) refuses the request before it is made.
            async with browsing.counting_site() as (elsewhere, hits):
                assert await browsing.blocked_request(frame, elsewhere) == "connect-src"
                assert await browsing.blocked_request(frame, http.url("/healthz")) == "connect-src"
            assert hits == []
            # Nor take the page elsewhere: its frames may not navigate the top.
            await frame.evaluate("() => { try { window.top.location.href = 'http://example.org/'; } catch (e) {} }")
            await browsing.said_in(page, said, "Unsafe attempt to initiate navigation")
            assert await page.evaluate("location.href") == url
            await page.screenshot(path=browsing.artifacts() / "console-basic-used.png", full_page=True)

            # Another browser (another person given the link) is refused.
            stranger = await (await browser.new_context(**web.PHONE)).new_page()
            refused = await stranger.goto(url)
            assert refused is not None and refused.status == 403
            assert await stranger.get_by_role("heading").inner_text() == "This link is open in another browser"

            # Closing the app tears it down first.
            await page.get_by_role("button", name="Close the app").click()
            await browsing.said_in(page, said, "App is being torn down")
            await page.locator("#status", has_text="The app is closed").wait_for()


async def test_the_system_monitor_polls_its_app_only_tool_which_chat_neither_lists_nor_calls(
        monitor: ServerConfig, browser: Browser) -> None:
    async with console_with_apps({"monitor": monitor}) as (out, terminal, _):
        with anyio.fail_after(patient(90)):
            # Chat sees the app's result tool, not the tool the app alone polls, and cannot call that one.
            await terminal.type("!mcp tools monitor")
            listing = await out.wait_for(r"monitor: \d+ tools?[^\n]*\n(  .*\n)+")
            assert "get-system-info" in listing and "poll-system-stats" not in listing
            await terminal.type("!mcp call monitor poll-system-stats")
            await out.wait_for(r"poll-system-stats is used by monitor's app only")

            await terminal.type("!mcp call monitor get-system-info")
            url = LINK.search(await out.wait_for(LINK)).group(1)  # type: ignore[union-attr]
            page, _ = await browsing.open_app(browser, url)
            app = browsing.inside(page)
            # The result it was given (the server's host name), and stats from its own polls of the app-only tool.
            hostname = re.search(r'"hostname":\s*"([^"]+)"', out.getvalue()).group(1)  # type: ignore[union-attr]
            await app.locator("#info-hostname", has_text=hostname).wait_for()
            await app.locator("#memory-percent", has_text=re.compile(r"^\d+%$")).wait_for()
            await app.locator("#info-uptime", has_text=re.compile(r"\d")).wait_for()
            await page.screenshot(path=browsing.artifacts() / "console-system-monitor.png", full_page=True)
            await page.get_by_role("button", name="Close the app").click()
            await page.locator("#status", has_text="The app is closed").wait_for()


async def test_an_apps_call_of_a_tool_that_needs_approval_waits_for_the_person_at_the_console(
        basic: ServerConfig, browser: Browser) -> None:
    async with console_with_apps({"basic": gated(basic, "get-time")}) as (out, terminal, _):
        with anyio.fail_after(patient(90)):
            await terminal.type("!mcp call basic get-time")
            await out.wait_for(r"get-time")
            await terminal.type("approve")
            url = LINK.search(await out.wait_for(LINK)).group(1)  # type: ignore[union-attr]
            first = re.search(r"basic\.get-time:\n(\S+)", out.getvalue()).group(1)  # type: ignore[union-attr]
            page, _ = await browsing.open_app(browser, url)
            app = browsing.inside(page)
            await app.locator("#server-time", has_text=first).wait_for()

            cards = out.getvalue().count("┌─")
            await browsing.settled(page)
            await browsing.tap(app, "Get Server Time")
            # The app's call asks in the conversation, as a call typed there would; the app waits.
            while out.getvalue().count("┌─") == cards:
                await out.changed.wait()
            assert await app.locator("#server-time").inner_text() == first
            await page.screenshot(path=browsing.artifacts() / "console-basic-waiting.png", full_page=True)
            await terminal.type("approve")
            await app.locator("#server-time", has_text=re.compile(r"^(?!" + re.escape(first) + r")\d{4}-")).wait_for()

"""Driving an app page in Chromium (phone-sized): finding the app's frame, what it shows, and CSP checks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from playwright.async_api import Browser, Frame, FrameLocator, Page

from bridge.host import Host
from bridge.web.apps.routes import AppPages
from bridge.web.server import HttpServer
from tests.webform import test_browser as web

ARTIFACTS = web.ROOT / ".cache/artifacts/apps"


def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


async def open_app(browser: Browser, url: str) -> tuple[Page, list[str]]:
    """A phone-sized page at `url`, and the console messages of it and its frames as they come."""
    context = await browser.new_context(**web.PHONE)
    context.set_default_timeout(0)  # the test's own deadline (`patient`) bounds every wait
    page = await context.new_page()
    said: list[str] = []
    page.on("console", lambda message: said.append(message.text))
    response = await page.goto(url)
    assert response is not None and response.status == 200, response and await response.text()
    return page, said


def inside(page: Page) -> FrameLocator:
    """Locators in the app's own frame: the page's sandbox frame, and the app's frame inside it."""
    return page.frame_locator("#app").frame_locator("iframe")


async def app_frame(page: Page, selector: str) -> Frame:
    """The app's own frame, once `selector` shows in it."""
    await inside(page).locator(selector).first.wait_for()
    found = [f for f in page.frames if f.url == "about:srcdoc"]
    assert len(found) == 1, [f.url for f in page.frames]
    return found[0]


async def settled(page: Page) -> None:
    """Wait until the page has sized the app's frame to what the app asked for, so that a tap lands where the
    button is (the frame grows under a finger otherwise)."""
    await page.wait_for_function("() => document.getElementById('app').style.height !== ''")


async def tap(app: FrameLocator, name: str) -> None:
    """Press the app's button `name`. The click event is dispatched on the button itself: the frame can still grow
    (size changes come one after another) while Playwright aims at the button's position, and a tap that lands
    beside the button is not what these tests are about."""
    await app.get_by_role("button", name=name).dispatch_event("click")


async def said_in(page: Page, said: list[str], text: str) -> None:
    """Wait until a console message containing `text` has come from the page or its frames."""
    if not any(text in m for m in said):
        await page.wait_for_event("console", predicate=lambda m: text in m.text, timeout=0)


async def blocked_request(frame: Frame, url: str) -> str:
    """Ask the app's frame to fetch `url`; the directive that refused it (a CSP violation), or 'allowed'."""
    directive: str = await frame.evaluate("""(url) => new Promise((resolve) => {
        document.addEventListener("securitypolicyviolation", (e) => resolve(e.violatedDirective), {once: true});
        fetch(url).then(() => resolve("allowed"), () => setTimeout(() => resolve("failed without a violation"), 500));
    })""", url)
    return directive


@asynccontextmanager
async def serving_apps(host: Host) -> AsyncIterator[HttpServer]:
    """The bridge's HTTP server on a free loopback port with the app pages, offered to results (as `run` sets it
    up when `http.listen` and `http.public_url` are set). The sandbox is the same server as `localhost`."""
    server = HttpServer("127.0.0.1:0")
    host.offer_apps(AppPages(host.apps, host, host.pool, host.outbound, server))
    async with anyio.create_task_group() as tg:
        await tg.start(server.serve)
        yield server
        tg.cancel_scope.cancel()


@asynccontextmanager
async def counting_site() -> AsyncIterator[tuple[str, list[str]]]:
    """A loopback HTTP listener that records every request: another origin an app must not reach."""
    hits: list[str] = []

    async def handle(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            data = await stream.receive(65536)
            hits.append(data.split(b"\r\n", 1)[0].decode("latin-1"))
            await stream.send(b"HTTP/1.1 200 OK\r\nAccess-Control-Allow-Origin: *\r\nContent-Length: 2\r\n\r\nok")

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, handle)
        yield f"http://127.0.0.1:{port}/steal", hits
        tg.cancel_scope.cancel()



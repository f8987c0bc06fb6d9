"""The app page's routes over real HTTP, without a browser: a real `Host` with an inline server made with the SDK's
MCP Apps extension, on both eras; what the bridge advertises and offers; who may open a link; what the app may ask."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2 as httpx
import pytest

from bridge.config.file import ServerConfig
from bridge.door.model import DecisionIn, MessageIn
from bridge.host import Host
from bridge.llm import LLMRequest, LLMResponse
from bridge.llm.types import ToolCall
from bridge.web.apps.links import AppLinks
from bridge.web.apps.routes import AppPages
from bridge.web.server import HttpServer
from tests.harness.hosts import ALICE, ROOM, FakeChatPort, config_for, host_for, host_store, patient
from tests.servers.apps_kit import HTML, URI, kit

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("protocol", ["legacy", "auto"])
async def test_an_apps_link_its_page_and_what_its_app_may_ask(protocol: str) -> None:
    server = ServerConfig(name="kit", inprocess=kit(), apps=True, protocol=protocol,  # type: ignore[arg-type]
                          tool_rules=(("wipe", "always"),))
    host, chat = await host_for(config_for({"kit": server}))
    http = HttpServer("127.0.0.1:0")
    pages = AppPages(host.apps, host, host.pool, host.outbound, http)
    host.offer_apps(pages)
    async with host, anyio.create_task_group() as tg:
        await tg.start(http.serve)
        base, sandbox = f"http://127.0.0.1:{http.port}", f"http://localhost:{http.port}"
        with anyio.fail_after(patient(60)):
            await host.run_message(MessageIn(ROOM, ALICE, 'call kit show {"what": "x"}', explicit_command=True))
            assert "showing x; apps negotiated: True" in await chat.wait_message("kit.show:")
            [(where, offer)] = chat.app_offers
            assert where == ROOM and offer.tool == "show" and offer.requester == ALICE
            url = host.app_link(offer.view_id, ALICE)
            assert url is not None and url.startswith(base + "/app/")

            async with httpx.AsyncClient() as ada, httpx.AsyncClient() as other:
                page = await ada.get(url)
                assert page.status_code == 200 and "Show the kit" in page.text
                assert f"frame-src {sandbox}" in page.headers["content-security-policy"]
                assert "mcp_app" in page.cookies
                assert (await other.get(url)).status_code == 403  # another browser
                assert (await other.get(url + "/view")).status_code == 403
                assert (await ada.get(url.replace(base, sandbox))).status_code == 404  # the page is not on the sandbox

                view = (await ada.get(url + "/view")).json()
                assert view["html"] == HTML and view["input"] == {"what": "x"}
                assert view["csp"] == {"connectDomains": ["https://api.example.com"]}  # junk dropped
                assert "showing x" in json.dumps(view["result"])
                assert view["sandbox"].startswith(sandbox + "/app-sandbox/")
                box = await ada.get(view["sandbox"])
                assert box.status_code == 200
                policy = box.headers["content-security-policy"]
                assert "connect-src https://api.example.com;" in policy and "'self'" not in policy
                assert f"frame-ancestors {base}" in policy
                assert (await ada.get(view["sandbox"].replace(sandbox, base))).status_code == 404

                async def rpc(method: str, params: dict[str, Any], **headers: str) -> httpx.Response:
                    return await ada.post(url + "/rpc", json={"method": method, "params": params}, headers=headers)

                polled = await rpc("tools/call", {"name": "poll", "arguments": {}})
                assert polled.status_code == 200 and polled.json()["result"]["content"][0]["text"] == "polled"
                for name in ("hidden", "nope"):
                    refused = await rpc("tools/call", {"name": name, "arguments": {}})
                    assert refused.status_code == 403, name
                    assert "that its app may call" in refused.json()["error"]["message"]
                assert (await rpc("tools/call", {"name": "poll"}, origin="http://evil.example")).status_code == 403
                assert (await rpc("tools/call", {"name": "poll"}, **{"sec-fetch-site": "cross-site"})).status_code \
                    == 403
                read = await rpc("resources/read", {"uri": URI})
                assert read.json()["result"]["contents"][0]["text"] == HTML
                said = await rpc("ui/message", {"role": "user", "content": [{"type": "text", "text": "hi\x1b[2J"}]})
                assert said.status_code == 200
                assert "Message from the app of kit, sent by" in await chat.wait_message("hi")
                assert "\x1b" not in (await chat.wait_message("hi"))
                link = (await rpc("ui/open-link", {"url": "https://exаmple.com/x"})).json()["result"]
                assert link["warning"] and link["href"].startswith("https://xn--")
                assert (await rpc("ui/download-file", {})).status_code == 400

                # A gated tool: the app's call posts an approval card and runs only once it is approved.
                async with anyio.create_task_group() as calls:
                    done: list[httpx.Response] = []

                    async def call_wipe() -> None:
                        done.append(await rpc("tools/call", {"name": "wipe", "arguments": {}}))

                    calls.start_soon(call_wipe)
                    card = await chat.wait_card()
                    assert card.tool == "wipe" and not done
                    await host.decide(DecisionIn(card.id, ALICE, "accept"))
                assert done[0].json()["result"]["content"][0]["text"] == "wiped"
                rows = [(r.kind, r.outcome) for r in await host.store.audit_rows(card.id)]
                assert ("tool", "accepted") in rows

            # Chat sees neither the app-only tool in `tools` nor may call it.
            await host.run_message(MessageIn(ROOM, ALICE, "tools kit", explicit_command=True))
            listing = await chat.wait_message("kit: ")
            assert "show" in listing and "poll" not in listing and "hidden" in listing
            await host.run_message(MessageIn(ROOM, ALICE, "call kit poll", explicit_command=True))
            assert "used by kit's app only" in await chat.wait_message("kit.poll")
            await host.run_message(MessageIn(ROOM, ALICE, "call kit ran", explicit_command=True))
            assert "show x, poll, wipe" in await chat.wait_message("kit.ran:")
        tg.cancel_scope.cancel()


async def test_a_link_expires_ends_with_its_session_and_a_server_with_apps_off_is_neither_told_nor_offered() -> None:
    clock = Clock()
    on = ServerConfig(name="kit", inprocess=kit(), apps=True, protocol="legacy")
    off = ServerConfig(name="off", inprocess=kit(), apps=False)
    host, chat = await host_for(config_for({"kit": on, "off": off}))
    http = HttpServer("127.0.0.1:0")
    pages = AppPages(host.apps, host, host.pool, host.outbound, http, AppLinks(lifetime=60, clock=clock))
    host.offer_apps(pages)
    async with host, anyio.create_task_group() as tg:
        await tg.start(http.serve)
        with anyio.fail_after(patient(60)):
            await host.run_message(MessageIn(ROOM, ALICE, "call off show", explicit_command=True))
            assert "apps negotiated: False" in await chat.wait_message("off.show:")
            assert chat.app_offers == []
            await host.run_message(MessageIn(ROOM, ALICE, "call kit show", explicit_command=True))
            [(_, offer)] = chat.app_offers
            clock.now = 10**10  # the link's lifetime has passed
            url = pages.link_for(offer.view_id, ALICE)
            assert url is not None
            async with httpx.AsyncClient() as ada:
                clock.now = 10**10 + 61
                expired = await ada.get(url)
            assert expired.status_code == 410 and "This link has expired" in expired.text

            # The app of a conversation's own session ends with that session.
            clock.now = 1_000_000_000.0
            await host.run_message(MessageIn(ROOM, ALICE, "call kit show", explicit_command=True))
            offer = chat.app_offers[-1][1]
            url = pages.link_for(offer.view_id, ALICE)
            assert url is not None
            async with httpx.AsyncClient() as ada:
                assert (await ada.get(url)).status_code == 200
                session = host.pool.find(ROOM, "kit", ALICE)
                assert session is not None
                await host.pool.close(session)
                ended = await ada.get(url + "/view")
                assert ended.status_code == 410 and ended.json()["error"]["message"] == "This app has ended."
                assert (await ada.get(url)).status_code == 410
        tg.cancel_scope.cancel()


@dataclass
class ShowingModel:
    """A model that calls `kit`'s `show` once, then answers; it keeps what it was offered."""

    name: str = "openai"
    supports_tools: bool = True
    default_model: str | None = "m"
    offered: list[str] = field(default_factory=list)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.offered = [spec.name for spec in request.tools]
        if any(m.tool_results for m in request.messages):
            return LLMResponse("Shown.", "m", "endTurn")
        return LLMResponse("", "m", "toolUse", tool_calls=(ToolCall("c1", "kit__show", {"what": "agent"}),))

    async def aclose(self) -> None:
        pass


async def test_the_agent_is_not_offered_app_only_tools_and_its_result_offers_the_app() -> None:
    model = ShowingModel()
    config = config_for({"kit": ServerConfig(name="kit", inprocess=kit(), apps=True)})
    chat = FakeChatPort()
    host = Host(config, await host_store(config), llm=model)
    host.attach(chat)
    async with host:
        with anyio.fail_after(patient(30)):
            await host.run_message(MessageIn(ROOM, ALICE, "what does the kit look like?"))
            await chat.wait_message("Shown.")
    assert "kit__show" in model.offered and "kit__hidden" in model.offered and "kit__poll" not in model.offered
    [(_, offer)] = chat.app_offers
    assert offer.tool == "show" and offer.requester == ALICE

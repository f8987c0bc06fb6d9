"""OAuth from the terminal, end to end: `mcp-chat-bridge tools` and `call` (real subprocesses) against a protected MCP
server and its authorization server (the SDK's auth server pieces, `tests/servers/oauth.py`). The test is the person:
it reads the sign-in link the command prints and follows it like a browser, which delivers the redirect to the
command's loopback listener."""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import stat
import sys
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import anyio
import httpx2
import pytest
import yaml
from mcp.types import CallToolResult

from bridge.auth.oauth import NoConsent, OAuthClients
from bridge.auth.tokens import Cipher, SqliteVault, VaultStorage
from bridge.config.file import load
from tests.harness.hosts import ALICE, ROOM, FakeChatPort, host_for, patient
from tests.servers.oauth import Provider, protected_server
from tests.servers.serving import bound_socket, serve

pytestmark = pytest.mark.anyio

LINK = re.compile(r"^\s{4}(https?://\S+)\s*$")
KEY_ENV = "TEST_TOKEN_KEY"

Browser = Callable[[str], Coroutine[Any, Any, None]]


@dataclass
class Site:
    url: str
    provider: Provider
    config: Path
    tokens: Path
    env: dict[str, str]


@dataclass
class Run:
    code: int
    out: str
    err: str
    links: list[str] = field(default_factory=list)


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    provider = Provider()
    sock = bound_socket()
    with serve(protected_server(provider, sock), sock) as base:
        tokens = tmp_path / "tokens.db"
        config = tmp_path / "bridge.yaml"
        config.write_text(yaml.safe_dump({"store": str(tmp_path / "bridge.db"), "secrets_key_env": KEY_ENV,
                                          "token_store": str(tokens),
                                          "servers": {"s": {"url": f"{base}/mcp", "auth": {"scopes": ["extra"]}}}}))
        env = {**os.environ, KEY_ENV: base64.b64encode(secrets.token_bytes(32)).decode()}
        yield Site(f"{base}/mcp", provider, config, tokens, env)


async def follow(url: str) -> httpx2.Response:
    """The browser: open the link; the authorization server consents at once and redirects back."""
    async with httpx2.AsyncClient(timeout=30) as http:
        response = await http.get(url, follow_redirects=False)
        assert response.is_redirect, response.text
        return await http.get(response.headers["location"], follow_redirects=False)


async def run_cli(args: list[str], env: dict[str, str], browser: Browser | None = None) -> Run:
    async def default(url: str) -> None:
        await follow(url)

    browse = browser or default
    command = [sys.executable, "-m", "bridge.cli", *args]
    out: list[bytes] = []
    err: list[str] = []
    links: list[str] = []
    with anyio.fail_after(patient(60)):
        async with await anyio.open_process(command, env=env) as proc, anyio.create_task_group() as tg:
            assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
            await proc.stdin.aclose()
            stdout = proc.stdout

            async def collect() -> None:
                async for chunk in stdout:
                    out.append(chunk)

            tg.start_soon(collect)
            pending = b""
            async for chunk in proc.stderr:
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for raw in lines:
                    line = raw.decode()
                    err.append(line)
                    if (link := LINK.match(line)) is not None:
                        links.append(link.group(1))
                        tg.start_soon(browse, link.group(1))
            code = await proc.wait()
    return Run(code, b"".join(out).decode(), "\n".join(err), links)


def storage(site: Site) -> tuple[SqliteVault, VaultStorage]:
    vault = SqliteVault(site.tokens, Cipher.from_env(KEY_ENV, site.env))
    return vault, VaultStorage(vault, site.url, "shared")


async def expire_stored_token(site: Site) -> None:
    """Time passes: the stored access token is past its expiry (through the bridge's own vault, with the key)."""
    vault, slot = storage(site)
    try:
        token = await slot.get_tokens()
        assert token is not None
        token.expires_in = -60
        await slot.set_tokens(token)
    finally:
        vault.close()
    site.provider.expire_access_tokens()


def assert_no_token_in(site: Site, *texts: str) -> None:
    blob = site.tokens.read_bytes() if site.tokens.exists() else b""
    for token in site.provider.issued:
        assert token.encode() not in blob
        assert all(token not in text for text in texts)


async def test_sign_in_at_the_terminal_once_then_the_encrypted_token_is_used(site: Site) -> None:
    listed = await run_cli(["tools", "-c", str(site.config), "s", "--json"], site.env)
    assert listed.code == 0, listed.err
    assert [t["name"] for t in json.loads(listed.out)] == ["whoami", "whoami_asking"]
    assert len(listed.links) == 1
    link = urlsplit(listed.links[0])
    assert f"s needs you to sign in (OAuth, at {link.hostname})." in listed.err
    query = parse_qs(link.query)
    assert query["code_challenge_method"] == ["S256"] and query["resource"] == [site.url]
    assert query["scope"] == ["mcp extra"] and query["redirect_uri"][0].startswith("http://127.0.0.1:")
    assert "Signed in to s." in listed.err

    called = await run_cli(["call", "-c", str(site.config), "s", "whoami"], site.env)
    assert called.code == 0, called.err
    assert called.out.startswith("client ") and called.out.strip().endswith("for ada")
    assert called.links == []  # the stored token was used: nobody asked to sign in again
    assert site.provider.counts == {"register": 1, "authorize": 1, "code": 1}

    assert stat.S_IMODE(site.tokens.stat().st_mode) == 0o600
    assert_no_token_in(site, listed.out, listed.err, called.out, called.err)


async def test_an_expired_access_token_is_refreshed_without_asking(site: Site) -> None:
    assert (await run_cli(["tools", "-c", str(site.config), "s"], site.env)).code == 0
    await expire_stored_token(site)
    called = await run_cli(["--log-level", "debug", "call", "-c", str(site.config), "s", "whoami"], site.env)
    assert called.code == 0, called.err
    assert called.links == []
    assert site.provider.counts["refresh"] == 1 and site.provider.counts["authorize"] == 1
    assert_no_token_in(site, called.out, called.err)  # not even in debug logs


async def test_a_revoked_refresh_token_asks_the_person_again(site: Site) -> None:
    assert (await run_cli(["tools", "-c", str(site.config), "s"], site.env)).code == 0
    site.provider.revoke_refresh_tokens()
    await expire_stored_token(site)
    called = await run_cli(["call", "-c", str(site.config), "s", "whoami"], site.env)
    assert called.code == 0, called.err
    assert len(called.links) == 1 and "s needs you to sign in" in called.err
    assert site.provider.counts["refresh"] == 1 and site.provider.counts["authorize"] == 2


async def test_a_tampered_state_is_refused_and_the_real_redirect_still_signs_in(site: Site) -> None:
    pages: list[tuple[int, str]] = []

    async def tampering_browser(url: str) -> None:
        async with httpx2.AsyncClient(timeout=30) as http:
            location = (await http.get(url, follow_redirects=False)).headers["location"]
            parts = urlsplit(location)
            query = {k: v[0] for k, v in parse_qs(parts.query).items()}
            forged = urlunsplit(parts._replace(query=urlencode({**query, "state": query["state"] + "x"})))
            for target in (forged, location):
                page = await http.get(target)
                pages.append((page.status_code, page.text))

    listed = await run_cli(["tools", "-c", str(site.config), "s"], site.env, tampering_browser)
    assert listed.code == 0, listed.err
    assert pages[0][0] == 400 and "not one the bridge is waiting for" in pages[0][1]
    assert pages[1][0] == 200 and "You are signed in to s." in pages[1][1]


async def test_a_declined_consent_is_told_in_plain_words(site: Site) -> None:
    site.provider.decline = True
    pages: list[int] = []

    async def browser(url: str) -> None:
        pages.append((await follow(url)).status_code)

    listed = await run_cli(["tools", "-c", str(site.config), "s"], site.env, browser)
    assert listed.code == 2
    assert "the authorization server refused the sign-in to s: access was declined (The person said no)" \
        in listed.err
    assert "Traceback" not in listed.err and pages == [400]


async def test_a_code_the_token_endpoint_refuses_is_never_called_signed_in(site: Site) -> None:
    site.provider.refuse_code = True
    pages: list[httpx2.Response] = []

    async def browser(url: str) -> None:
        pages.append(await follow(url))

    listed = await run_cli(["tools", "-c", str(site.config), "s"], site.env, browser)
    plain = "the authorization server refused the sign-in to s: the sign-in is no longer valid"
    assert listed.code == 2 and plain in listed.err and "Signed in" not in listed.err
    assert pages[0].status_code == 400 and "Sign-in failed" in pages[0].text and plain[1:] in pages[0].text
    assert "signed in" not in pages[0].text and "{" not in pages[0].text


async def test_without_a_key_the_token_lives_only_as_long_as_the_command(site: Site) -> None:
    config = yaml.safe_load(site.config.read_text())
    del config["secrets_key_env"]
    site.config.write_text(yaml.safe_dump(config))
    for _ in range(2):
        called = await run_cli(["call", "-c", str(site.config), "s", "whoami"], site.env)
        assert called.code == 0, called.err
        assert len(called.links) == 1
    assert not site.tokens.exists()


async def test_call_url_signs_in_the_same_way(site: Site) -> None:
    env = {**site.env, "XDG_STATE_HOME": str(site.tokens.parent)}
    called = await run_cli(["call", "--url", site.url, "whoami"], env)
    assert called.code == 0, called.err
    assert len(called.links) == 1 and called.out.strip().endswith("for ada")
    assert not (site.tokens.parent / "mcp-chat-bridge").exists()  # no MCP_CHAT_BRIDGE_SECRETS_KEY: nothing kept


async def test_the_chat_bridge_uses_the_admins_sign_in_and_says_what_to_run_without_it(site: Site) -> None:
    config = replace(load(site.config, env=site.env), store=":memory:")

    async def whoami() -> tuple[CallToolResult | None, FakeChatPort]:
        clients = OAuthClients(config, NoConsent(str(site.config)), site.env)
        host, chat = await host_for(config, auth=lambda session: clients.for_server(session.server, None))
        try:
            async with host:
                with anyio.fail_after(patient(30)):
                    return await host.calls.run(ROOM, ALICE, "s", "whoami", {}), chat
        finally:
            await clients.aclose()

    before, chat = await whoami()
    assert before is None
    assert f"s needs someone to sign in first: run `mcp-chat-bridge tools -c {site.config} s`" in chat.messages[-1].text
    assert (await run_cli(["tools", "-c", str(site.config), "s"], site.env)).code == 0  # the admin signs in once
    after, _ = await whoami()
    assert after is not None and not after.is_error
    assert "for ada" in str(after.content[0].text)  # type: ignore[union-attr]
    assert site.provider.counts["authorize"] == 1

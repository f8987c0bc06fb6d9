"""Company sign-in from the terminal, end to end: `mcp-chat-bridge call` (real subprocesses, configured as
docs/authorization.md says) against the test's company identity provider and two protected MCP servers that take
its ID-JAGs. The test is the person: it follows the one sign-in link the first command prints, signing in as Ada;
the second command, to the other server, asks nothing and answers as her. No token is printed or kept in the clear."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
import yaml

from tests.cli.test_oauth_cli import run_cli
from tests.servers.company_idp import CLIENT_ID, CLIENT_SECRET
from tests.servers.enterprise import KEY_ENV, Company, company

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
"""This tree, first on the commands' path (the venv's editable install may point at another)."""


@pytest.fixture
def acme(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Company]:
    with company(tmp_path, monkeypatch) as c:
        yield c


async def as_ada(url: str) -> None:
    """The browser: the identity provider's login page as Ada, then its redirect to the command's listener."""
    async with httpx2.AsyncClient(timeout=30) as http:
        login = await http.get(url)
        assert login.status_code == 302, login.text
        back = await http.get(f"{login.headers['location']}&user=ada")
        assert back.status_code == 302, back.text
        await http.get(back.headers["location"])


async def test_one_sign_in_at_the_terminal_serves_both_servers(acme: Company, tmp_path: Path) -> None:
    config = tmp_path / "bridge.yaml"
    config.write_text(yaml.safe_dump({
        "store": str(tmp_path / "bridge.db"), "secrets_key_env": KEY_ENV, "token_store": str(acme.tokens),
        "identity_provider": {"issuer": acme.idp.issuer, "client_id": CLIENT_ID, "client_secret": "${IDP_SECRET}",
                              "name": "Acme SSO"},
        "servers": {name: {"url": acme.urls[name], "auth": {
            "identity": "enterprise", "issuer": provider.base, "client_id": provider.client_id,
            "client_secret": "${AS_SECRET}"}} for name, provider in acme.servers.items()}}))
    env = {**os.environ, "IDP_SECRET": CLIENT_SECRET, "AS_SECRET": "as-secret",
           "PYTHONPATH": str(ROOT)}
    first = await run_cli(["call", "-c", str(config), "crm", "whoami", "{}"], env, as_ada)
    second = await run_cli(["call", "-c", str(config), "wiki", "whoami", "{}"], env, as_ada)
    assert first.code == 0 and "ada@example.com" in first.out, first.err
    assert len(first.links) == 1 and first.links[0].startswith(f"{acme.idp.issuer}/authorize?")
    assert "Acme SSO needs you to sign in" in first.err and "Signed in to Acme SSO." in first.err
    assert second.code == 0 and "ada@example.com" in second.out and second.links == [], second.err
    assert acme.idp.counts["authorize"] == 1 and acme.idp.counts["exchange"] == 2
    printed = first.out + first.err + second.out + second.err
    assert not any(token in printed for token in acme.issued())
    assert not any(token.encode() in acme.tokens.read_bytes() for token in acme.issued())

"""DPoP end to end in chat: a service account's token from an authorization server that offers DPoP is bound to the
installation's key, every MCP request carries it as `Authorization: DPoP` with a fresh proof, both servers' nonce
challenges are met, the binding outlives the process (a later one sends the stored token the same way), and neither
the token nor the key reaches a log or the chat. The server side checks proofs with PyJWT (`tests/servers/
dpop_checks`)."""

from __future__ import annotations

import base64
import logging
import secrets
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from bridge.config.auth import AuthConfig
from bridge.config.file import Config, ServerConfig
from bridge.door.model import Actor, ConversationKey
from tests.harness.hosts import host_for, patient
from tests.servers.dpop_checks import DpopChecks, with_dpop
from tests.servers.service_account import Accounts, service_server
from tests.servers.serving import base_url, bound_socket, serve
from tests.servers.signin import text

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]

ADA = Actor("test", "U-ada", "Ada")
CHANNEL = ConversationKey("test", "W1", "C1")


@pytest.fixture
def site() -> Iterator[tuple[str, Accounts, DpopChecks]]:
    accounts, checks = Accounts(), DpopChecks(nonce_at_token=True, nonce_at_mcp=True)
    accounts.secrets["svc"] = "s3cr3t-value"
    sock = bound_socket()
    base = base_url(sock)
    with serve(with_dpop(service_server(accounts, sock), checks, base), sock):
        yield base, accounts, checks


def config(base: str, tmp_path: Path) -> Config:
    auth = AuthConfig(identity="service", client_id="svc", client_secret="s3cr3t-value", issuer=base)
    return Config(servers={"s": ServerConfig("s", url=f"{base}/mcp", auth=auth)}, store=":memory:",
                  conversation_scope="channel", secrets_key_env="DPOP_TEST_TOKEN_KEY",
                  token_store=str(tmp_path / "tokens.db"))


async def test_a_bound_token_goes_with_a_proof_on_every_request_and_outlives_the_process(
        site: tuple[str, Accounts, DpopChecks], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    base, accounts, checks = site
    monkeypatch.setenv("DPOP_TEST_TOKEN_KEY", base64.b64encode(secrets.token_bytes(32)).decode())
    with anyio.fail_after(patient(60)):
        host, chat = await host_for(config(base, tmp_path))
        async with host:
            first = await host.calls.run(CHANNEL, ADA, "s", "whoami", {})
        host, later_chat = await host_for(config(base, tmp_path))  # another process, the same token store
        async with host:
            second = await host.calls.run(CHANNEL, ADA, "s", "whoami", {})
    assert text(first) == text(second) == "client svc for svc"
    assert accounts.methods == ["client_secret_basic"]  # one token, bound, used by both processes
    assert len(checks.bound) == 1 and set(checks.schemes) == {"DPoP"}
    # Each server asked for its nonce once, and each request after that carried a fresh, valid proof.
    assert checks.refusals.count("nonce") == 2, checks.refusals
    assert len(checks.jtis) == len(set(checks.jtis)) > 2
    token = next(iter(checks.bound))
    said = caplog.text + "\n".join(m.text for m in chat.messages + later_chat.messages)
    assert token not in said and "s3cr3t" not in said


async def test_without_dpop_offered_tokens_stay_bearer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An authorization server that offers no DPoP gets no proofs: the flow is the SDK's, untouched."""
    accounts = Accounts()
    accounts.secrets["svc"] = "s3cr3t-value"
    sock = bound_socket()
    monkeypatch.setenv("DPOP_TEST_TOKEN_KEY", base64.b64encode(secrets.token_bytes(32)).decode())
    with serve(service_server(accounts, sock), sock) as base, anyio.fail_after(patient(30)):
        host, _ = await host_for(config(base, tmp_path))
        async with host:
            assert text(await host.calls.run(CHANNEL, ADA, "s", "whoami", {})) == "client svc for svc"

"""`identity: service` in chat, end to end: the bridge gets its own token with `client_credentials` (a client secret,
sent as HTTP Basic or in the form, or a private-key JWT) from a local authorization server, uses it for everyone's
calls without asking anybody, and a refused credential is told in plain words."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

import anyio
import pytest

from bridge.config.auth import AuthConfig
from bridge.config.file import Config, ServerConfig
from bridge.door.model import Actor, ConversationKey
from tests.bridge.test_connect import text
from tests.harness.hosts import host_for, patient
from tests.servers.service_account import Accounts, key_pair, service_server
from tests.servers.serving import bound_socket, serve

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]

ADA = Actor("test", "U-ada", "Ada")
BOB = Actor("test", "U-bob", "Bob")
CHANNEL = ConversationKey("test", "W1", "C1")


@pytest.fixture
def site() -> Iterator[tuple[str, Accounts]]:
    accounts = Accounts()
    sock = bound_socket()
    with serve(service_server(accounts, sock), sock) as base:
        yield base, accounts


def config(base: str, auth: AuthConfig) -> Config:
    return Config(servers={"s": ServerConfig("s", url=f"{base}/mcp", auth=auth)}, store=":memory:",
                  conversation_scope="channel")


@pytest.mark.parametrize("method", ["client_secret_basic", "client_secret_post"])
async def test_a_client_secret_gets_the_service_token_used_for_everyones_calls(
        site: tuple[str, Accounts], method: Literal["client_secret_basic", "client_secret_post"]) -> None:
    base, accounts = site
    accounts.secrets["svc"] = "s3cr3t-value"
    auth = AuthConfig(identity="service", client_id="svc", client_secret="s3cr3t-value",
                      token_endpoint_auth_method=method, issuer=base)
    host, chat = await host_for(config(base, auth))
    with anyio.fail_after(patient(30)):
        async with host:
            ada = await host.calls.run(CHANNEL, ADA, "s", "whoami", {})
            bob = await host.calls.run(CHANNEL, BOB, "s", "whoami", {})
    assert text(ada) == text(bob) == "client svc for svc"
    assert accounts.methods == [method]  # one token for the bridge, asked for once
    assert chat.cards == {} and not any("s3cr3t" in m.text for m in chat.messages)


async def test_a_private_key_jwt_gets_the_service_token(site: tuple[str, Accounts]) -> None:
    base, accounts = site
    private, public = key_pair()
    accounts.keys["keyed"] = public
    host, chat = await host_for(config(base, AuthConfig(identity="service", client_id="keyed", private_key=private,
                                                  signing_algorithm="ES256", issuer=base)))
    with anyio.fail_after(patient(30)):
        async with host:
            result = await host.calls.run(CHANNEL, ADA, "s", "whoami", {})
    assert text(result) == "client keyed for keyed"
    assert accounts.methods == ["private_key_jwt"] and chat.cards == {}


async def test_refused_credentials_are_told_in_plain_words(site: tuple[str, Accounts]) -> None:
    base, accounts = site
    accounts.secrets["svc"] = "the-real-one"
    auth = AuthConfig(identity="service", client_id="svc", client_secret="a-wrong-one", issuer=base)
    host, chat = await host_for(config(base, auth))
    with anyio.fail_after(patient(30)):
        async with host:
            assert await host.calls.run(CHANNEL, ADA, "s", "whoami", {}) is None
    said = "\n".join(m.text for m in chat.messages)
    assert "the authorization server refused the sign-in to s: it did not accept this bridge's client credentials " \
        "(Unknown client or wrong credentials)" in said
    assert "a-wrong-one" not in said and "failed to start" not in said

"""`identity: service` in chat, end to end: the bridge gets its own token with `client_credentials` (a client secret,
sent as HTTP Basic or in the form, or a private-key JWT), or with a workload's JWT (the JWT-bearer grant, no secret),
from a local authorization server, uses it for everyone's
calls without asking anybody, and a refused credential is told in plain words."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import anyio
import jwt
import pytest

from bridge.config.auth import AuthConfig
from bridge.config.file import Config, ServerConfig
from bridge.door.model import Actor, ConversationKey
from tests.harness.hosts import host_for, patient
from tests.servers.service_account import Accounts, key_pair, service_server
from tests.servers.serving import bound_socket, serve
from tests.servers.signin import text

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


def workload_jwt(private: str, audience: str, jti: str) -> str:
    """What a platform projects into a workload (a Kubernetes service-account token): a JWT for the audience."""
    now = int(time.time())
    return jwt.encode({"iss": "https://platform.example", "sub": "system:serviceaccount:bots:reporter",
                       "aud": audience, "iat": now, "exp": now + 600, "jti": jti}, private, algorithm="ES256")


async def test_a_workload_token_file_is_read_again_at_each_token_request(
        site: tuple[str, Accounts], tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """No secret: the token the platform projects is the credential (JWT-bearer grant); the platform rotates the
    file, so a later token request sends the new one."""
    caplog.set_level(logging.DEBUG)
    base, accounts = site
    private, public = key_pair()
    accounts.workload_issuer_key = public
    projected = tmp_path / "token"
    first, second = workload_jwt(private, base, "one"), workload_jwt(private, base, "two")
    projected.write_text(first + "\n")
    auth = AuthConfig(identity="service", client_id="reporter", assertion_file=str(projected), issuer=base)
    host, chat = await host_for(config(base, auth))
    with anyio.fail_after(patient(30)):
        async with host:
            before = await host.calls.run(CHANNEL, ADA, "s", "whoami", {})
            projected.write_text(second)  # rotated by the platform
            accounts.access.clear()  # and the access token has run out: the next call needs a new one
            after = await host.calls.run(CHANNEL, BOB, "s", "whoami", {})
    assert text(before) == text(after) == "client system:serviceaccount:bots:reporter for " \
        "system:serviceaccount:bots:reporter"
    assert accounts.methods == ["jwt-bearer", "jwt-bearer"] and accounts.workload_jtis == ["one", "two"]
    assert chat.cards == {}
    logged = caplog.text + "\n".join(m.text for m in chat.messages)
    assert first not in logged and second not in logged and first.split(".")[1] not in logged


async def test_a_workload_token_from_the_environment(site: tuple[str, Accounts],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    base, accounts = site
    private, public = key_pair()
    accounts.workload_issuer_key = public
    monkeypatch.setenv("WORKLOAD_TOKEN", workload_jwt(private, base, "env"))
    auth = AuthConfig(identity="service", client_id="reporter", assertion_env="WORKLOAD_TOKEN", issuer=base)
    host, _ = await host_for(config(base, auth))
    with anyio.fail_after(patient(30)):
        async with host:
            result = await host.calls.run(CHANNEL, ADA, "s", "whoami", {})
    assert text(result).startswith("client system:serviceaccount:bots:reporter")
    assert accounts.workload_jtis == ["env"]


async def test_a_missing_workload_token_is_told_in_plain_words(site: tuple[str, Accounts], tmp_path: Path) -> None:
    base, _ = site
    auth = AuthConfig(identity="service", client_id="reporter", assertion_file=str(tmp_path / "absent"), issuer=base)
    host, chat = await host_for(config(base, auth))
    with anyio.fail_after(patient(30)):
        async with host:
            assert await host.calls.run(CHANNEL, ADA, "s", "whoami", {}) is None
    said = "\n".join(m.text for m in chat.messages)
    assert f"the workload token file {tmp_path / 'absent'} cannot be read" in said
    assert "Traceback" not in said

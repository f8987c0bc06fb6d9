"""Signed receipts of decisions, checked from the server's side with PyJWT (not joserfc, which signs them): one for
each kind of decision on both eras, a destructive tool that runs only with a valid receipt of exactly its call,
rotation, quorums, the audit row of every receipt, and the off switch."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import jwt
import pytest
from mcp.client import Client

from bridge.cli.demo import setup as demo
from bridge.config.file import RootsPolicy, SamplingPolicy
from bridge.config.team import ApproverRule, GrantScope
from bridge.door.model import Actor, DecisionIn, Interaction, MessageIn, Verdict
from bridge.host import Host
from bridge.llm import HumanProvider, LLMProvider, OpenAIProvider
from bridge.safety.receipts.keys import ReceiptKeys, ReceiptSettings
from bridge.safety.receipts.tokens import META_KEY, Decision, mint
from bridge.storage import AuditRow, open_store
from bridge.storage.driver import Step
from tests.harness.hosts import ALICE, BOB, ROOM, FakeChatPort, config_for, host_for, patient
from tests.llm.fake_llm_server import FakeLLMServer, Reply, openai_completion
from tests.servers.receipts import check, receipts_server, request_digest

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]

ERAS = ["legacy", "auto"]
CAROL = Actor("test", "U-carol", "Carol")


@asynccontextmanager
async def bridge(protocol: str, keys: ReceiptKeys | None = None, jwks_keys: ReceiptKeys | None = None,
                 llm: LLMProvider | None = None,
                 **server_fields: Any) -> AsyncIterator[tuple[Host, FakeChatPort, list[str], ReceiptKeys]]:
    keys = keys or ReceiptKeys.generate()
    server, acted = receipts_server((jwks_keys or keys).jwks())
    fields = {"roots": RootsPolicy(defaults=(("file:///srv/data", "data"),)), **server_fields}
    config = config_for({"vault": server}, server_protocol=protocol, receipts=ReceiptSettings(keys, "test-bridge"),
                        **{f"server_{k}": v for k, v in fields.items()})
    chat = FakeChatPort()
    host = Host(config, await open_store(":memory:"), llm=llm or HumanProvider())
    host.attach(chat)
    async with host:
        yield host, chat, acted, keys


async def call(host: Host, text: str, who: Actor = ALICE) -> None:
    await host.handle_message(MessageIn(ROOM, who, text, explicit_command=True))


async def decide(host: Host, card: Interaction, who: Actor = ALICE, **content: Any) -> Verdict:
    return (await host.decide(DecisionIn(card.id, who, "accept", content=content or None))).verdict


async def reported(chat: FakeChatPort, tool: str) -> dict[str, Any]:
    text = await chat.wait_message(f"vault.{tool}:")
    found: dict[str, Any] = json.loads(text.split(":", 1)[1].strip().strip("`").strip())
    return found


def checked(token: str, keys: ReceiptKeys, kind: str) -> dict[str, Any]:
    claims = check(token, keys.jwks(), "vault")
    assert claims["kind"] == kind and claims["iss"] == "test-bridge" and claims["outcome"] == "accept"
    assert claims["conv"] == ROOM.id() and claims["exp"] - claims["iat"] == 300
    return claims


@pytest.mark.parametrize("protocol", ERAS)
async def test_an_approved_destructive_call_carries_a_receipt_the_server_checks(protocol: str) -> None:
    async with bridge(protocol) as (host, chat, acted, _keys):
        await call(host, 'call vault destroy {"target": "/srv/a"}')
        with anyio.fail_after(patient(20)):
            card = await chat.wait_card("tool")
            assert await decide(host, card) is Verdict.CLAIMED
            assert f"destroyed /srv/a (approved by {ALICE.key}" in await chat.wait_message("vault.destroy")
        rows = [r for r in await host.store.audit_rows(card.id) if r.kind == "receipt"]
    assert acted == ["/srv/a"]
    assert len(rows) == 1 and rows[0].detail.startswith("receipt jti=")


@pytest.mark.parametrize("protocol", ERAS)
async def test_each_decision_kind_gets_a_receipt_bound_to_its_request_and_content(protocol: str) -> None:
    async with bridge(protocol) as (host, chat, _acted, keys):
        with anyio.fail_after(patient(30)):
            await call(host, "call vault form")
            card = await chat.wait_card("form")
            assert await decide(host, card, name="Ada") is Verdict.CLAIMED
            form = await reported(chat, "form")
            claims = checked(form["receipt"], keys, "form")
            assert claims["req"] == form["req"] and claims["by"] == [ALICE.key] and claims["iid"] == card.id
            assert claims["cnt"] == _digest({"name": "Ada"})

            await call(host, "call vault visit")
            card = await chat.wait_card("url")
            assert await decide(host, card) is Verdict.CLAIMED
            visit = await reported(chat, "visit")
            claims = checked(visit["receipt"], keys, "url")
            assert claims["req"] == visit["req"] and "cnt" not in claims, (claims, visit)

            await call(host, 'call vault sample {"prompt": "hi"}')
            approval = await chat.wait_card("sampling")
            assert await decide(host, approval) is Verdict.CLAIMED
            review = await chat.wait_card("sampling_review")
            assert await decide(host, review, ALICE, answer="hello") is Verdict.CLAIMED
            sample = await reported(chat, "sample")
            claims = checked(sample["receipt"], keys, "sampling")
            assert claims["cnt"] == sample["content"] and claims["iid"] == review.id

            await call(host, "call vault roots")
            card = await chat.wait_card("roots")
            assert await decide(host, card, roots=["file:///srv/data"]) is Verdict.CLAIMED
            roots = await reported(chat, "roots")
            claims = checked(roots["receipt"], keys, "roots")
            assert claims["req"] == roots["req"] and claims["cnt"] == roots["content"]
        kinds = [r.kind for r in await host.store.audit_rows() if r.kind == "receipt"]
    assert len(kinds) == 4


def _digest(value: Any) -> str:
    from tests.servers.receipts import digest

    return digest(value)


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_sampling_request_let_through_by_a_grant_gets_a_receipt_naming_it(protocol: str) -> None:
    llm = FakeLLMServer()
    await llm.start()
    try:
        llm.reply(Reply(body=openai_completion("one")), Reply(body=openai_completion("two")))
        provider = OpenAIProvider("gpt-test", "sk-test", base_url=f"{llm.url}/v1", timeout=patient(10), max_retries=0)
        policy = SamplingPolicy(review=False, grants=(GrantScope("conversation", 3600.0),))
        async with bridge(protocol, llm=provider, sampling=policy) as (host, chat, _acted, keys):
            with anyio.fail_after(patient(30)):
                await call(host, 'call vault sample {"prompt": "one"}')
                approval = await chat.wait_card("sampling")
                await host.decide(DecisionIn(approval.id, ALICE, "accept", grant="conversation"))
                first = await reported(chat, "sample")
                await call(host, 'call vault sample {"prompt": "two"}', BOB)
                text = await chat.wait_for(lambda: next(
                    (m.text for m in chat.messages if m.text.startswith("vault.sample:") and first["receipt"]
                     not in m.text), None))
                second = json.loads(text.split(":", 1)[1].strip().strip("`").strip())
            grant = next(g for g in await host.grants.here(ROOM) if g.kind == "sampling")
            issued = [r for r in await host.store.audit_rows() if r.kind == "receipt"]
    finally:
        await llm.stop()
    assert [c.kind.value for c in chat.cards.values()] == ["sampling"]  # the second went by the grant
    assert checked(first["receipt"], keys, "sampling")["iid"] == approval.id
    claims = checked(second["receipt"], keys, "sampling")
    assert claims["rule"] == {"grant": grant.id} and claims["iid"] == grant.id, claims
    assert claims["by"] == [ALICE.key] and claims["cnt"] == second["content"]
    assert len(issued) == 2


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_tool_call_let_through_by_a_grant_carries_a_receipt_naming_it(protocol: str) -> None:
    grants = (GrantScope("conversation", 3600.0),)
    async with bridge(protocol, tool_grants=grants) as (host, chat, acted, _keys):
        with anyio.fail_after(patient(20)):
            await call(host, 'call vault destroy {"target": "/srv/1"}')
            card = await chat.wait_card("tool")
            await host.decide(DecisionIn(card.id, ALICE, "accept", grant="conversation"))
            await chat.wait_message("destroyed /srv/1")
            await call(host, 'call vault destroy {"target": "/srv/2"}', BOB)
            done = await chat.wait_message("destroyed /srv/2")
        grant = next(g for g in await host.grants.here(ROOM) if g.kind == "tool")
        rows = [r for r in await host.store.audit_rows() if r.kind == "receipt"]
    assert [c.kind.value for c in chat.cards.values()] == ["tool"]  # the second went by the grant
    assert acted == ["/srv/1", "/srv/2"]  # the server checked both receipts (PyJWT, exactly this call, unused)
    assert f"approved by {ALICE.key}; rule {json.dumps({'grant': grant.id})})" in done
    assert [r.interaction_id for r in rows] == [card.id, grant.id]


async def test_a_2026_call_that_asks_after_its_approval_carries_the_receipt_to_the_round_that_acts() -> None:
    async with bridge("auto") as (host, chat, acted, keys):
        with anyio.fail_after(patient(20)):
            await call(host, 'call vault destroy_confirmed {"target": "/srv/c"}')
            approval = await chat.wait_card("tool")
            assert await decide(host, approval) is Verdict.CLAIMED
            confirm = await chat.wait_card("form")  # parked: the round that acts comes after this answer
            assert await decide(host, confirm, name="/srv/c") is Verdict.CLAIMED
            done = await reported(chat, "destroy_confirmed")
    assert acted == ["/srv/c"]
    claims = checked(done["receipt"], keys, "tool")
    assert claims["iid"] == approval.id and claims["tool"] == "destroy_confirmed" and claims["by"] == [ALICE.key]


async def test_a_link_accepted_after_a_url_required_error_gets_no_receipt_it_never_receives() -> None:
    async with bridge("legacy") as (host, chat, _acted, _keys):
        await call(host, "call vault needs_link")
        with anyio.fail_after(patient(20)):
            card = await chat.wait_card("url")
            assert await decide(host, card) is Verdict.CLAIMED
            await call(host, "call vault needs_link")
            await chat.wait_message("linked")
        rows = await host.store.audit_rows()
    # The link's answer goes to no server (the call is run again), so no receipt is made or recorded.
    assert [r.outcome for r in rows if r.interaction_id == card.id and r.kind == "url"] == ["accepted"]
    assert [r for r in rows if r.kind == "receipt"] == []


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_quorum_receipt_names_every_approver(protocol: str) -> None:
    rule = ApproverRule((ALICE.key, BOB.key, CAROL.key), required=2, requester=False)
    async with bridge(protocol, tool_approvers=(("destroy", rule),)) as (host, chat, acted, _keys):
        await call(host, 'call vault destroy {"target": "/srv/q"}')
        with anyio.fail_after(patient(20)):
            card = await chat.wait_card("tool")
            assert await decide(host, card, CAROL) is Verdict.COUNTED
            assert await decide(host, card, BOB) is Verdict.CLAIMED
            done = await chat.wait_message("vault.destroy")
        row = next(r for r in await host.store.audit_rows(card.id) if r.kind == "receipt")
    assert acted == ["/srv/q"]
    assert f"approved by {CAROL.key}, {BOB.key}; rule " in done
    assert '"required": 2' in done and f'"approvers": ["{ALICE.key}", "{BOB.key}", "{CAROL.key}"]' in done
    assert row.outcome == "issued"


async def test_the_server_refuses_replayed_expired_altered_and_other_tool_receipts() -> None:
    keys = ReceiptKeys.generate()
    server, acted = receipts_server(keys.jwks())
    settings = ReceiptSettings(keys, "test-bridge")

    def receipt(tool: str = "destroy", target: str = "/srv/x", now: float | None = None) -> str:
        req = request_digest("tools/call", {"name": tool, "arguments": {"target": target}})
        return mint(settings, Decision("tool", "vault", ROOM.id(), "i-1", req, (ALICE.key,), {"required": 1},
                                       tool=tool), now).token

    async with Client(server) as client:
        async def destroy(token: str | None, target: str = "/srv/x") -> str:
            meta: Any = {META_KEY: token} if token else None
            result = await client.call_tool("destroy", {"target": target}, meta=meta)
            return "".join(getattr(c, "text", "") for c in result.content)

        good = receipt()
        assert (await destroy(None)).endswith("no receipt")
        assert (await destroy(good)).startswith("destroyed /srv/x")
        assert (await destroy(good)).endswith("replayed receipt")
        assert (await destroy(receipt(now=time.time() - 3600))).endswith("ExpiredSignatureError")
        assert (await destroy(receipt(), target="/srv/other")).endswith("for another call")
        assert (await destroy(receipt(tool="wipe"))).endswith("for another call")
        head, body, sig = receipt().split(".")
        claims = json.loads(jwt.utils.base64url_decode(body))
        claims["req"] = request_digest("tools/call", {"name": "destroy", "arguments": {"target": "/"}})
        altered = ".".join([head, jwt.utils.base64url_encode(json.dumps(claims).encode()).decode(), sig])
        assert (await destroy(altered, "/")).endswith("InvalidSignatureError")
        stranger = mint(ReceiptSettings(ReceiptKeys.generate()), Decision(
            "tool", "vault", ROOM.id(), "i", request_digest("tools/call", {"name": "destroy",
                                                                          "arguments": {"target": "/srv/x"}}),
            (ALICE.key,), {})).token
        assert (await destroy(stranger)).endswith("InvalidTokenError")
    assert acted == ["/srv/x"]


async def test_rotation_keeps_old_receipts_verifiable() -> None:
    old, new = ReceiptKeys.generate(), ReceiptKeys.generate()
    decision = Decision("form", "vault", ROOM.id(), "i", "sha256:00", (ALICE.key,), {"required": 1})
    before = mint(ReceiptSettings(old), decision).token
    rotated = ReceiptKeys((*new.ring, *old.ring))
    after = mint(ReceiptSettings(rotated), decision).token
    jwks = rotated.jwks()
    assert [k["kid"] for k in jwks["keys"]] == [new.jwks()["keys"][0]["kid"], old.jwks()["keys"][0]["kid"]]
    assert check(before, jwks, "vault")["req"] == check(after, jwks, "vault")["req"] == "sha256:00"
    assert jwt.get_unverified_header(after)["kid"] == new.jwks()["keys"][0]["kid"]


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_server_with_receipts_off_gets_none_and_the_call_is_refused(protocol: str) -> None:
    async with bridge(protocol, receipts=False) as (host, chat, acted, _keys):
        await call(host, 'call vault destroy {"target": "/srv/a"}')
        with anyio.fail_after(patient(20)):
            card = await chat.wait_card("tool")
            await decide(host, card)
            assert "no receipt" in await chat.wait_message("vault.destroy")
    assert acted == []


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_receipt_signed_by_a_key_the_server_does_not_know_is_refused(protocol: str) -> None:
    async with bridge(protocol, jwks_keys=ReceiptKeys.generate()) as (host, chat, acted, _keys):
        await call(host, 'call vault destroy {"target": "/srv/a"}')
        with anyio.fail_after(patient(20)):
            await decide(host, await chat.wait_card("tool"))
            assert "refused: InvalidTokenError" in await chat.wait_message("vault.destroy")
    assert acted == []


async def _approved_then_stopped(target: str, config: Any, path: str, at_rest: str = "",
                                 approvers: tuple[Actor, ...] = (ALICE,)) -> tuple[Interaction, Interaction]:
    """Run `destroy_confirmed` until its approval is accepted (by each of `approvers` in turn) and its confirmation
    form waits, then stop the bridge (the call stays stored). `at_rest`: SQL run on the store while it is down."""
    store = await open_store(path)
    host, chat = await host_for(config, store)
    async with host:
        await call(host, f'call vault destroy_confirmed {{"target": "{target}"}}')
        with anyio.fail_after(patient(20)):
            approval = await chat.wait_card("tool")
            for who in approvers:
                await decide(host, approval, who)
            confirm = await chat.wait_card("form")
    if at_rest:
        await store.driver.transaction([Step(at_rest)])
    await store.aclose()
    return approval, confirm


async def _confirmed_after_restart(config: Any, path: str, confirm: Interaction, target: str,
                                   who: Actor = ALICE) -> tuple[str, list[AuditRow]]:
    store = await open_store(path)
    host, chat = await host_for(config, store)
    async with host:
        with anyio.fail_after(patient(20)):
            await host.broker.wait_open(confirm.id)
            assert await decide(host, confirm, who, name=target) is Verdict.CLAIMED
            done = await chat.wait_message("vault.destroy_confirmed")
        rows = [r for r in await store.audit_rows() if r.kind == "receipt"]
    await store.aclose()
    return done, rows


async def test_a_call_approved_before_a_restart_carries_a_receipt_made_again_from_its_approval(
        store_target: str) -> None:
    keys = ReceiptKeys.generate()
    server, acted = receipts_server(keys.jwks())
    config = config_for({"vault": server}, server_protocol="auto", receipts=ReceiptSettings(keys, "test-bridge"))
    approval, confirm = await _approved_then_stopped("/srv/r", config, store_target)
    done, rows = await _confirmed_after_restart(config, store_target, confirm, "/srv/r")

    assert acted == ["/srv/r"], done
    token = json.loads(done.split(":", 1)[1].strip().strip("`").strip())["receipt"]
    claims = checked(token, keys, "tool")
    assert claims["tool"] == "destroy_confirmed" and claims["iid"] == approval.id and claims["by"] == [ALICE.key]
    assert claims["req"] == request_digest("tools/call", {"name": "destroy_confirmed",
                                                         "arguments": {"target": "/srv/r"}})
    # Two receipts of the one approval: the first went with the round before the restart (held in memory only),
    # the second was made after it, with a new single-use id; both are in the audit log (and the form's own).
    before, again = [r for r in rows if r.interaction_id == approval.id]
    assert f"jti={claims['jti']} " in again.detail and f"jti={claims['jti']} " not in before.detail
    assert [r.interaction_id for r in rows if r.detail.endswith("for form")] == [confirm.id]


async def test_a_quorum_approval_given_before_a_restart_is_named_whole_in_the_receipt_made_after_it(
        store_target: str) -> None:
    keys = ReceiptKeys.generate()
    server, acted = receipts_server(keys.jwks())
    rule = ApproverRule((ALICE.key, BOB.key, CAROL.key), required=2, requester=False)
    config = config_for({"vault": server}, server_protocol="auto", receipts=ReceiptSettings(keys, "test-bridge"),
                        server_tool_approvers=(("destroy_confirmed", rule),))
    approval, confirm = await _approved_then_stopped("/srv/q", config, store_target, approvers=(CAROL, BOB))
    done, _rows = await _confirmed_after_restart(config, store_target, confirm, "/srv/q")
    assert acted == ["/srv/q"], done
    claims = checked(json.loads(done.split(":", 1)[1].strip().strip("`").strip())["receipt"], keys, "tool")
    assert claims["by"] == [CAROL.key, BOB.key] and claims["iid"] == approval.id
    assert claims["rule"] == {"required": 2, "approvers": sorted([ALICE.key, BOB.key, CAROL.key]), "groups": []}


async def test_a_stored_call_whose_arguments_no_longer_match_its_approval_gets_no_new_receipt(
        store_target: str) -> None:
    keys = ReceiptKeys.generate()
    server, acted = receipts_server(keys.jwks())
    config = config_for({"vault": server}, server_protocol="auto", receipts=ReceiptSettings(keys, "test-bridge"))
    # Someone with the database edits the stored call while the bridge is down: the approval was for /srv/r.
    approval, confirm = await _approved_then_stopped(
        "/srv/r", config, store_target, """UPDATE pending_calls SET arguments = '{"target": "/srv/other"}'""")
    done, rows = await _confirmed_after_restart(config, store_target, confirm, "/srv/other")
    assert acted == [] and "refused: no receipt" in done
    assert len([r for r in rows if r.interaction_id == approval.id]) == 1  # only the one made before the restart


async def test_a_call_let_through_by_a_grant_before_a_restart_carries_a_receipt_naming_it_after(
        store_target: str) -> None:
    keys = ReceiptKeys.generate()
    server, acted = receipts_server(keys.jwks())
    config = config_for({"vault": server}, server_protocol="auto", receipts=ReceiptSettings(keys, "test-bridge"),
                        server_tool_grants=(GrantScope("conversation", 3600.0),))
    store = await open_store(store_target)
    host, chat = await host_for(config, store)
    async with host:
        with anyio.fail_after(patient(20)):
            await call(host, 'call vault destroy_confirmed {"target": "/srv/1"}')
            card = await chat.wait_card("tool")
            await host.decide(DecisionIn(card.id, ALICE, "accept", grant="conversation"))
            assert await decide(host, await chat.wait_card("form"), name="/srv/1") is Verdict.CLAIMED
            await chat.wait_message("vault.destroy_confirmed")
            await call(host, 'call vault destroy_confirmed {"target": "/srv/2"}', BOB)
            confirm = await chat.wait_card("form", index=1)  # no tool card: the grant let it through
        grant = next(g for g in await host.grants.here(ROOM) if g.kind == "tool")
    await store.aclose()
    done, rows = await _confirmed_after_restart(config, store_target, confirm, "/srv/2", BOB)
    assert acted == ["/srv/1", "/srv/2"], done
    claims = checked(json.loads(done.split(":", 1)[1].strip().strip("`").strip())["receipt"], keys, "tool")
    assert claims["rule"] == {"grant": grant.id} and claims["iid"] == grant.id and claims["by"] == [ALICE.key]
    assert len([r for r in rows if r.interaction_id == grant.id]) == 2  # before the restart and after it


@pytest.mark.parametrize("protocol", ["legacy", "2026-07-28"])
async def test_the_demo_refunds_only_with_the_receipt_of_an_approval(protocol: str, tmp_path: Path) -> None:
    config = demo.config(protocol, {"XDG_STATE_HOME": str(tmp_path)})
    config = replace(config, store=":memory:", chat={})
    you = Actor("console", "you", "you")
    chat = FakeChatPort()
    host = Host(config, await open_store(":memory:"), llm=HumanProvider())
    host.attach(chat)
    async with host:
        await host.handle_message(MessageIn(ROOM, you, 'call demo wire_refund {"amount": 80}', explicit_command=True))
        with anyio.fail_after(patient(20)):
            card = await chat.wait_card("tool")
            assert await decide(host, card, you) is Verdict.CLAIMED
            done = await chat.wait_message("demo.wire_refund")
    assert "Refunded 80 EUR for 'Lisbon, 3 nights'" in done and "approved by console:you" in done
    # The same server asked directly, without the bridge: no receipt, nothing done.
    async with Client(config.servers["demo"].inprocess) as client:
        result = await client.call_tool("wire_refund", {"amount": 80})
    assert result.is_error and "Refused: no receipt" in "".join(getattr(c, "text", "") for c in result.content)


def test_the_docs_verification_example_accepts_a_receipt_once_and_refuses_another_call(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "receipts.md").read_text("utf-8")
    example = docs.split("```python\n", 1)[1].split("```", 1)[0]
    keys = ReceiptKeys.generate()
    (tmp_path / "jwks.json").write_text(json.dumps(keys.jwks()))
    monkeypatch.chdir(tmp_path)
    scope: dict[str, Any] = {}
    exec(compile(example, "docs/receipts.md", "exec"), scope)  # the documented example, as written
    args = {"target": "/srv/a"}
    token = mint(ReceiptSettings(keys), Decision("tool", "vault", ROOM.id(), "i", request_digest(
        "tools/call", {"name": "destroy", "arguments": args}), (ALICE.key,), {"required": 1}, tool="destroy")).token
    assert scope["approved"]({META_KEY: token}, "vault", "destroy", args)["by"] == [ALICE.key]
    with pytest.raises(PermissionError, match="used before"):
        scope["approved"]({META_KEY: token}, "vault", "destroy", args)
    with pytest.raises(PermissionError, match="another call"):
        scope["approved"]({META_KEY: token}, "vault", "destroy", {"target": "/"})
    with pytest.raises(jwt.InvalidAudienceError):
        scope["approved"]({META_KEY: token}, "other", "destroy", args)

"""Sampling, roots, tool approvals, the agent, progress, cancellation and logging, on both protocol eras."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

import anyio
import pytest
from mcp.types import ToolAnnotations

from bridge.config.file import RootsPolicy, SamplingPolicy
from bridge.door.model import DecisionIn, Kind, MessageIn, Status
from bridge.host import Host
from bridge.llm import HumanProvider, LLMProvider, OpenAIProvider
from bridge.storage import open_store
from tests.harness.hosts import ALICE, ROOM, FakeChatPort, config_for, host_store, patient
from tests.llm.fake_llm_server import FakeLLMServer, Reply, openai_completion, openai_tool_call
from tests.servers.features import Observed, features_server

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]

ERAS = ["legacy", "auto"]


def openai(llm: FakeLLMServer) -> OpenAIProvider:
    return OpenAIProvider("gpt-test", "sk-test-key", base_url=f"{llm.url}/v1", timeout=5, max_retries=0)


@asynccontextmanager
async def bridge(protocol: str, provider: LLMProvider | None = None,
                 **server_fields: Any) -> AsyncIterator[tuple[Host, FakeChatPort, Observed]]:
    server, seen = features_server()
    config = config_for({"feat": server}, server_protocol=protocol, **{f"server_{k}": v for k, v in
                                                                      server_fields.items()})
    chat = FakeChatPort()
    host = Host(config, await host_store(config), llm=provider or HumanProvider())
    host.attach(chat)
    async with host:
        yield host, chat, seen


async def say(host: Host, text: str) -> None:
    await host.handle_message(MessageIn(ROOM, ALICE, text, explicit_command=True))


# -- sampling ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ERAS)
async def test_sampling_is_approved_then_the_answer_reviewed_and_changed(protocol: str, llm: FakeLLMServer) -> None:
    llm.reply(Reply(body=openai_completion("Paris.")))
    async with bridge(protocol, openai(llm)) as (host, chat, _):
        await say(host, 'call feat ask_model {"prompt": "Capital of France?"}')
        with anyio.fail_after(patient(10)):
            approval = await chat.wait_card("sampling")
            assert [d.label for d in approval.details][:2] == ["System prompt", "Message 1 (user)"]
            assert approval.details[1].text == "Capital of France?"
            await host.decide(DecisionIn(approval.id, ALICE, "accept"))
            review = await chat.wait_card("sampling_review")
            assert review.form.field("answer").default == "Paris."
            await host.decide(DecisionIn(review.id, ALICE, "accept", {"answer": "Paris, France."}))
            result = await chat.wait_message("feat.ask_model:")
    assert result.endswith("model=gpt-test-2026-01-01 text=Paris, France.")
    sent = llm.requests[0].body
    assert sent["messages"] == [{"role": "system", "content": "Be terse."},
                                {"role": "user", "content": "Capital of France?"}]
    assert sent["max_tokens"] == 50


@pytest.mark.parametrize("protocol", ERAS)
async def test_an_edited_prompt_is_what_the_model_gets(protocol: str, llm: FakeLLMServer) -> None:
    llm.reply(Reply(body=openai_completion("Rome.")))
    async with bridge(protocol, openai(llm), sampling=SamplingPolicy(review=False)) as (host, chat, _):
        await say(host, 'call feat ask_model {"prompt": "Capital of France?"}')
        with anyio.fail_after(patient(10)):
            approval = await chat.wait_card("sampling")
            await host.decide(DecisionIn(approval.id, ALICE, "accept",
                                         {"system_prompt": "Answer in Latin.", "prompt": "Capital of Italy?"}))
            result = await chat.wait_message("feat.ask_model:")
    assert result.endswith("text=Rome.")
    assert llm.requests[0].body["messages"] == [{"role": "system", "content": "Answer in Latin."},
                                                {"role": "user", "content": "Capital of Italy?"}]
    assert not chat.cards.keys() - {approval.id}  # review was off: no second card


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_denied_sampling_request_never_reaches_the_model(protocol: str, llm: FakeLLMServer) -> None:
    async with bridge(protocol, openai(llm)) as (host, chat, _):
        await say(host, 'call feat ask_model {"prompt": "x"}')
        with anyio.fail_after(patient(10)):
            approval = await chat.wait_card("sampling")
            await host.decide(DecisionIn(approval.id, ALICE, "decline"))
            failure = await chat.wait_message("feat.ask_model")
    assert "User rejected sampling request" in failure
    if protocol == "auto":
        assert "was not continued" in failure  # 2026: the call is not retried
    assert llm.requests == []


@pytest.mark.parametrize("protocol", ERAS)
async def test_sampling_caps_and_rate_limits_hold_under_auto(protocol: str, llm: FakeLLMServer) -> None:
    llm.reply(Reply(body=openai_completion("one")))
    policy = SamplingPolicy(approval="auto", review=False, max_tokens=7, rate_per_minute=1)
    async with bridge(protocol, openai(llm), sampling=policy) as (host, chat, _):
        await say(host, 'call feat ask_model {"prompt": "a"}')
        with anyio.fail_after(patient(10)):
            first = await chat.wait_message("feat.ask_model:")
            await say(host, 'call feat ask_model {"prompt": "b"}')
            notice = await chat.wait_message("more than 1 times a minute")
            second = await chat.wait_for(lambda: next((m.text for m in chat.messages[1:]
                                                       if "feat.ask_model" in m.text and m.text != first), None))
    assert first.endswith("text=one") and not chat.cards
    assert llm.requests[0].body["max_tokens"] == 7
    assert "refused" in notice and "rate limit" in second
    assert len(llm.requests) == 1


@pytest.mark.parametrize("protocol", ERAS)
async def test_sampling_times_out_as_a_rejection(protocol: str) -> None:
    async with bridge(protocol, sampling=SamplingPolicy(timeout=0.2)) as (host, chat, _):
        await say(host, 'call feat ask_model {"prompt": "x"}')
        with anyio.fail_after(patient(10)):
            approval = await chat.wait_card("sampling")
            assert (await chat.wait_finished(approval.id)).status is Status.EXPIRED
            failure = await chat.wait_message("feat.ask_model")
    assert "nobody answered in time" in failure


@pytest.mark.parametrize("protocol", ERAS)
async def test_with_no_model_the_reviewer_writes_the_answer(protocol: str) -> None:
    async with bridge(protocol) as (host, chat, _):
        await say(host, 'call feat ask_model {"prompt": "Favourite colour?"}')
        with anyio.fail_after(patient(10)):
            await host.decide(DecisionIn((await chat.wait_card("sampling")).id, ALICE, "accept"))
            review = await chat.wait_card("sampling_review")
            assert review.form.field("answer").required and not review.quick_accept
            bad = await host.decide(DecisionIn(review.id, ALICE, "accept", {}))
            assert bad.errors == {"answer": "this field is required"}
            await host.decide(DecisionIn(review.id, ALICE, "accept", {"answer": "Teal."}))
            result = await chat.wait_message("feat.ask_model:")
    assert result.endswith("model=human text=Teal.")


async def test_sampling_deny_policy_does_not_declare_the_capability() -> None:
    async with bridge("legacy", sampling=SamplingPolicy(approval="deny")) as (host, chat, _):
        await say(host, 'call feat ask_model {"prompt": "x"}')
        with anyio.fail_after(patient(10)):
            failure = await chat.wait_message("feat.ask_model")
    assert "sampling" in failure.lower() and not chat.cards


@pytest.mark.parametrize("protocol", ERAS)
async def test_sampling_tools_reach_a_provider_that_supports_them(protocol: str, llm: FakeLLMServer) -> None:
    llm.reply(Reply(body=openai_completion(None, finish_reason="tool_calls", tool_calls=[
        openai_tool_call("t1", "get_weather", '{"city": "Oslo"}')])))
    async with bridge(protocol, openai(llm), sampling=SamplingPolicy(approval="auto")) as (host, chat, _):
        await say(host, 'call feat ask_model_with_tools {"city": "Oslo"}')
        with anyio.fail_after(patient(10)):
            # Review is on: tool calls are shown for approval too (not editable) before they go back.
            review = await chat.wait_card("sampling_review")
            assert [(d.label, d.text) for d in review.details] == [("Tool call get_weather", '{"city": "Oslo"}')]
            assert review.form.empty
            await host.decide(DecisionIn(review.id, ALICE, "accept"))
            result = await chat.wait_message("feat.ask_model_with_tools")
    assert result.endswith("stop=toolUse tool_use:get_weather")
    sent = llm.requests[0].body
    assert [t["function"]["name"] for t in sent["tools"]] == ["get_weather"]
    assert sent["tool_choice"] == "auto"


async def test_sampling_tools_are_not_declared_without_a_provider_that_uses_them() -> None:
    async with bridge("legacy", sampling=SamplingPolicy(approval="auto")) as (host, chat, _):
        await say(host, 'call feat ask_model_with_tools {"city": "Oslo"}')
        with anyio.fail_after(patient(10)):
            failure = await chat.wait_message("feat.ask_model_with_tools")
    assert "tools" in failure.lower() and not chat.cards


# -- roots ---------------------------------------------------------------------------------------------------------

A, B = "file:///srv/a", "file:///srv/b"


async def roots_card(host: Host, chat: FakeChatPort, index: int = 0) -> Any:
    await say(host, "call feat my_roots")
    return await chat.wait_card("roots", index)


@pytest.mark.parametrize("protocol", ERAS)
@pytest.mark.parametrize(("content", "expected"), [
    (None, f"roots: alpha={A}, -={B}"), ({"roots": [B]}, f"roots: -={B}"), ("decline", "roots: ")])
async def test_roots_are_shared_all_some_or_none(protocol: str, content: Any, expected: str) -> None:
    async with bridge(protocol) as (host, chat, _):
        with anyio.fail_after(patient(10)):
            await say(host, f"roots add {A} alpha")  # commands run concurrently: one at a time keeps the order
            await chat.wait_message(f"Added {A}")
            await say(host, f"roots add {B}")
            await chat.wait_message(f"Added {B}")
            card = await roots_card(host, chat)
            assert [d.text for d in card.details] == [A, B]
            if content == "decline":
                await host.decide(DecisionIn(card.id, ALICE, "decline"))
            else:
                await host.decide(DecisionIn(card.id, ALICE, "accept", content))
            result = await chat.wait_message("feat.my_roots:")
    assert result == f"feat.my_roots:\n{expected}"


@pytest.mark.parametrize("protocol", ERAS)
async def test_always_for_this_server_here_is_remembered(protocol: str) -> None:
    async with bridge(protocol, roots=RootsPolicy(defaults=((A, "alpha"),))) as (host, chat, _):
        with anyio.fail_after(patient(10)):
            card = await roots_card(host, chat)
            await host.decide(DecisionIn(card.id, ALICE, "accept", {"roots": [A], "remember": True}))
            await chat.wait_message("feat.my_roots:")
            chat.messages.clear()
            await say(host, "call feat my_roots")
            assert await chat.wait_message("feat.my_roots:") == f"feat.my_roots:\nroots: alpha={A}"
    assert len(chat.cards) == 1


async def test_changed_roots_are_announced_to_legacy_sessions() -> None:
    async with bridge("legacy") as (host, chat, seen):
        await say(host, 'call feat add {"a": 1, "b": 2}')  # starts the session
        with anyio.fail_after(patient(10)):
            await chat.wait_message("feat.add:")
            await say(host, f"roots add {A}")
            await seen.roots_changed.wait()
            await say(host, f"roots remove {A}")
            await chat.wait_message(f"Removed {A}.")
            await say(host, "roots add http://example.com")
            assert "not a file:// URI" in await chat.wait_message("http://example.com")


async def test_roots_are_stored_per_conversation() -> None:
    store = await open_store(":memory:")
    other = replace(ROOM, thread="T2")
    await store.add_root(ROOM, A, "alpha")
    assert await store.roots(ROOM) == [(A, "alpha")] and await store.roots(other) == []


# -- tool approvals ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_destructive_tool_asks_first_and_a_denial_reaches_the_caller(protocol: str) -> None:
    async with bridge(protocol) as (host, chat, seen):
        await say(host, 'call feat wipe {"target": "/srv", "api_key": "sk-live-123"}')
        with anyio.fail_after(patient(10)):
            card = await chat.wait_card("tool")
            assert card.tool == "wipe" and "feat.wipe" in card.details[0].text
            assert "••••••" in card.details[1].text and "sk-live" not in card.details[1].text
            await host.decide(DecisionIn(card.id, ALICE, "decline"))
            result = await chat.wait_message("feat.wipe")
    assert "reported an error" in result and "was not run: declined by Alice" in result
    assert seen.ran == []


@pytest.mark.parametrize("protocol", ERAS)
async def test_rules_on_tool_names_override_annotations(protocol: str) -> None:
    rules = (("wipe", "never"), ("pe*", "always"))
    async with bridge(protocol, tool_rules=rules) as (host, chat, seen):
        await say(host, 'call feat wipe {"target": "/tmp/x"}')
        with anyio.fail_after(patient(10)):
            await chat.wait_message("feat.wipe:")
            await say(host, 'call feat peek {"target": "/etc"}')
            card = await chat.wait_card("tool")
            await host.decide(DecisionIn(card.id, ALICE, "accept"))
            await chat.wait_message("feat.peek:")
    assert seen.ran == ["wipe /tmp/x", "peek /etc"]


# -- the agent -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ERAS)
async def test_an_agent_turn_calls_two_tools_and_answers(protocol: str, llm: FakeLLMServer) -> None:
    llm.reply(
        Reply(body=openai_completion(None, finish_reason="tool_calls", tool_calls=[
            openai_tool_call("c1", "feat__add", '{"a": 2, "b": 3}'),
            openai_tool_call("c2", "feat__peek", '{"target": "/srv"}')])),
        Reply(body=openai_completion("2 + 3 = 5 and /srv looks fine.")))
    async with bridge(protocol, openai(llm)) as (host, chat, seen):
        await host.handle_message(MessageIn(ROOM, ALICE, "add 2 and 3, then look at /srv"))
        with anyio.fail_after(patient(10)):
            answer = await chat.wait_message("looks fine.")
        assert answer == "2 + 3 = 5 and /srv looks fine."
        second = llm.requests[1].body["messages"]
        assert [m["role"] for m in second] == ["system", "user", "assistant", "tool", "tool"]
        assert second[3] == {"role": "tool", "tool_call_id": "c1", "content": "5"}
        tools = {t["function"]["name"] for t in llm.requests[0].body["tools"]}
        assert {"feat__add", "feat__wipe", "feat__ask_model"} <= tools
        assert len(await host.store.history(ROOM)) == 4
        await say(host, "reset")
        with anyio.fail_after(patient(10)):
            await chat.wait_message("Forgot")
        assert await host.store.history(ROOM) == []
    assert seen.ran == ["peek /srv"]


async def test_an_agent_model_failure_is_shown(llm: FakeLLMServer) -> None:
    llm.reply(Reply(status=500, body={"error": {"message": "boom", "type": "server_error"}}))
    async with bridge("auto", openai(llm)) as (host, chat, _):
        await host.handle_message(MessageIn(ROOM, ALICE, "hello"))
        with anyio.fail_after(patient(10)):
            assert "The model failed" in await chat.wait_message("model failed")


async def test_without_a_model_messages_get_a_pointer_to_commands() -> None:
    async with bridge("auto") as (host, chat, _):
        await host.handle_message(MessageIn(ROOM, ALICE, "hello there"))
        with anyio.fail_after(patient(10)):
            await chat.wait_message("only answer commands")


# -- progress, cancellation, logging -------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ERAS)
async def test_progress_is_shown_and_cancel_reaches_the_server(protocol: str) -> None:
    async with bridge(protocol) as (host, chat, seen):
        await say(host, "call feat slow")
        with anyio.fail_after(patient(10)):
            await seen.started.wait()
            views = await chat.wait_for(lambda: next(iter(chat.statuses.values()), None))
            assert views[0].progress == 1 and views[0].total == 4 and views[0].text == "warming up"
            await say(host, "cancel")
            await seen.cancelled.wait()
            await chat.wait_message("Stopped feat.slow.")
            final = await chat.wait_for(lambda: views[-1] if views[-1].done else None)
    assert final.text == "stopped by Alice"


@pytest.mark.parametrize("protocol", ERAS)
async def test_server_logs_at_or_above_the_level_are_shown(protocol: str) -> None:
    async with bridge(protocol) as (host, chat, _):
        await say(host, "call feat noisy")
        with anyio.fail_after(patient(10)):
            await chat.wait_message("feat.noisy:")
            log = await chat.wait_message("[feat warning]")
    assert "disk almost full" in log
    assert not any("debug detail" in m.text for m in chat.messages)


# -- prompts and resources are covered against server-everything in tests/cli; here the plumbing -------------------


async def test_show_prints_a_waiting_requests_full_details() -> None:
    async with bridge("auto") as (host, chat, _):
        await say(host, 'call feat ask_model {"prompt": "' + "x" * 5000 + '"}')
        with anyio.fail_after(patient(10)):
            card = await chat.wait_card("sampling")
            await say(host, f"show {card.id}")
            full = await chat.wait_message("Message 1 (user):")
            await host.decide(DecisionIn(card.id, ALICE, "decline"))
    assert "x" * 5000 in full


def test_tool_cards_are_a_kind() -> None:
    assert Kind("tool") is Kind.TOOL and json.dumps(Kind.TOOL.value) == '"tool"'


async def test_after_a_restart_a_sampling_step_of_a_2026_call_is_asked_again(store_target: str) -> None:
    server, _ = features_server()
    path = store_target
    first_store = await open_store(path)
    chat = FakeChatPort()
    host = Host(config_for({"feat": server}, server_protocol="auto"), first_store, llm=HumanProvider())
    host.attach(chat)
    async with host:
        await say(host, 'call feat ask_model {"prompt": "Still there?"}')
        with anyio.fail_after(patient(10)):
            old = await chat.wait_card("sampling")
    await first_store.aclose()

    store = await open_store(path)
    chat2 = FakeChatPort()
    host2 = Host(config_for({"feat": server}, server_protocol="auto"), store, llm=HumanProvider())
    host2.attach(chat2)
    async with host2:
        with anyio.fail_after(patient(10)):
            retired = await chat2.wait_finished(old.id)
            again = await chat2.wait_card("sampling")
            await host2.decide(DecisionIn(again.id, ALICE, "accept"))
            review = await chat2.wait_card("sampling_review")
            await host2.decide(DecisionIn(review.id, ALICE, "accept", {"answer": "Yes."}))
            result = await chat2.wait_message("feat.ask_model:")
    assert retired.status is Status.CANCELLED and retired.reason == "asked again after the bridge restarted"
    assert again.id != old.id and result.endswith("text=Yes.")
    assert await store.pending_calls() == []
    await store.aclose()


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_tool_added_later_is_checked_against_its_annotations(protocol: str) -> None:
    async with bridge(protocol) as (host, chat, seen):
        await say(host, 'call feat peek {"target": "/a"}')  # fetches and caches the tool list
        with anyio.fail_after(patient(10)):
            await chat.wait_message("feat.peek:")
        server = host.config.servers["feat"].inprocess

        def zap(target: str) -> str:
            seen.ran.append(f"zap {target}")
            return "zapped"

        server.add_tool(zap, annotations=ToolAnnotations(destructive_hint=True))
        await say(host, 'call feat zap {"target": "/b"}')
        with anyio.fail_after(patient(10)):
            card = await chat.wait_card("tool")
            await host.decide(DecisionIn(card.id, ALICE, "decline"))
            await chat.wait_message("feat.zap reported an error")
    assert card.tool == "zap" and seen.ran == ["peek /a"]

"""FakeSlack drives a real bolt app the way Slack does: over Socket Mode, over signed HTTP, and as its Web API.

These tests pin the fake's behaviour and show the wiring adapter tests should copy.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import anyio
import pytest
from aiohttp import web
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncRespond
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from tests.harness.hosts import patient
from tests.harness.slack import (
    FakeSlack,
    check_http_ack,
    encode_http_body,
    event_app_mention,
    sign_request,
    slash_command,
    view_submission,
)

DIVIDER = {"type": "divider"}
SIGNING_SECRET = "test-signing-secret"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # bolt, slack_sdk and aiohttp are asyncio-only


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        yield fake


def make_app(slack: FakeSlack, retry_handlers: list[AsyncRetryHandler] | None = None) -> AsyncApp:
    """A bolt app whose Web API client talks to the fake; passing ``client`` makes bolt ignore ``token=``."""
    client = AsyncWebClient(token="xoxb-test", base_url=slack.api_url, retry_handlers=retry_handlers)
    return AsyncApp(client=client, signing_secret=SIGNING_SECRET)


@asynccontextmanager
async def socket_mode(app: AsyncApp, slack: FakeSlack) -> AsyncIterator[AsyncSocketModeHandler]:
    """Connect bolt's real Socket Mode handler; it gets the websocket URL from ``apps.connections.open``."""
    web_client = AsyncWebClient(token="xapp-test", base_url=slack.api_url)
    handler = AsyncSocketModeHandler(app, app_token="xapp-test", web_client=web_client)
    try:
        await handler.connect_async()  # type: ignore[no-untyped-call]  # bolt leaves these unannotated
        yield handler
    finally:
        await handler.close_async()  # type: ignore[no-untyped-call]


@asynccontextmanager
async def http_mode(app: AsyncApp) -> AsyncIterator[str]:
    """Serve the app with bolt's own aiohttp app on an ephemeral port; yields the request URL."""
    runner = web.AppRunner(app.web_app(path="/slack/events"), access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        host, port = runner.addresses[0][:2]
        yield f"http://{host}:{port}/slack/events"
    finally:
        await runner.cleanup()


@pytest.mark.anyio
async def test_app_mention_over_socket_mode_is_acked_and_reaches_the_listener(slack: FakeSlack) -> None:
    app = make_app(slack)

    @app.event("app_mention")
    async def reply(event: dict[str, Any], client: AsyncWebClient) -> None:
        await client.chat_postMessage(channel=event["channel"], thread_ts=event["ts"], text="pong")

    async with socket_mode(app, slack):
        with anyio.fail_after(patient(5)):
            ack = await slack.send_envelope("events_api", event_app_mention("U1", "C1", "<@UBOT> ping", "1.000001"))
            call = await slack.wait_for_call("chat.postMessage")

    assert list(ack) == ["envelope_id"]
    # bolt's per-request client adds the workspace's team_id to every call
    assert call.args == {"channel": "C1", "thread_ts": "1.000001", "text": "pong", "team_id": "T111"}
    assert call.token == "xoxb-test"
    assert slack.messages[("C1", call.response["ts"])].text == "pong"
    assert [c.method for c in slack.calls] == ["apps.connections.open", "auth.test", "chat.postMessage"]
    assert slack.calls[0].token == "xapp-test"


@pytest.mark.anyio
async def test_view_submission_ack_carries_response_action_errors(slack: FakeSlack) -> None:
    app = make_app(slack)

    @app.view("ask")
    async def validate(ack: AsyncAck, view: dict[str, Any]) -> None:
        name = view["state"]["values"]["b"]["name"]["value"]
        await ack(response_action="errors", errors={"b": f"{name!r} is too short"})

    state = {"b": {"name": {"type": "plain_text_input", "value": "A"}}}
    async with socket_mode(app, slack):
        with anyio.fail_after(patient(5)):
            ack = await slack.send_envelope("interactive", view_submission("U1", "V1", "ask", "req-1", state))

    assert ack["payload"] == {"response_action": "errors", "errors": {"b": "'A' is too short"}}


@pytest.mark.anyio
async def test_rate_limited_post_is_retried_by_slack_sdk(slack: FakeSlack) -> None:
    app = make_app(slack, retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=1)])
    slack.fail_next("chat.postMessage", "ratelimited", status=429, retry_after=0)

    with anyio.fail_after(patient(5)):
        response = await app.client.chat_postMessage(channel="C1", text="hi")

    assert response["ok"]
    assert [(c.status, c.ok) for c in slack.calls_to("chat.postMessage")] == [(429, False), (200, True)]


@pytest.mark.anyio
async def test_a_dropped_connection_follows_the_work_and_is_retried_by_slack_sdk(slack: FakeSlack) -> None:
    client = AsyncWebClient(token="xoxb-test", base_url=slack.api_url,
                            retry_handlers=[AsyncConnectionErrorRetryHandler(max_retry_count=1)])
    slack.drop_next("chat.postMessage")

    with anyio.fail_after(patient(5)):
        response = await client.chat_postMessage(channel="C1", text="hi")

    assert response["ok"]
    assert [c.ok for c in slack.calls_to("chat.postMessage")] == [True, True]  # the first was done, then dropped
    assert len(slack.messages) == 2


@pytest.mark.anyio
async def test_injected_errors_surface_as_slack_api_errors(slack: FakeSlack) -> None:
    client = AsyncWebClient(token="xoxb-test", base_url=slack.api_url, retry_handlers=[])
    slack.fail_next("chat.postMessage", retry_after=7)
    slack.fail_next("chat.postMessage", "channel_not_found")

    with pytest.raises(SlackApiError) as rate_limited:
        await client.chat_postMessage(channel="C1", text="hi")
    with pytest.raises(SlackApiError) as not_found:
        await client.chat_postMessage(channel="C1", text="hi")

    assert rate_limited.value.response.status_code == 429
    assert rate_limited.value.response.headers["Retry-After"] == "7"
    assert (not_found.value.response.status_code, not_found.value.response["error"]) == (200, "channel_not_found")
    assert (await client.chat_postMessage(channel="C1", text="hi"))["ok"]


@pytest.mark.anyio
async def test_signed_slash_command_over_http_is_answered_and_a_bad_signature_is_refused(slack: FakeSlack) -> None:
    app = make_app(slack)

    @app.command("/mcp")
    async def mcp(ack: AsyncAck, respond: AsyncRespond, command: dict[str, str]) -> None:
        await ack(f"pending: {command['text']}")
        await respond("done")  # goes to the payload's response_url, here the fake's

    command = slash_command("U1", "C1", "list", response_url=slack.response_url)
    body, content_type = encode_http_body("slash_commands", command)
    async with http_mode(app) as url, aiohttp.ClientSession() as http:
        good = sign_request(SIGNING_SECRET, body) | {"Content-Type": content_type}
        async with http.post(url, data=body, headers=good) as response:
            # HTTP mode answers ack("text") as text/plain; Socket Mode wraps the same ack as {"text": ...}
            assert (response.status, await response.text()) == (200, "pending: list")
        bad = sign_request("wrong-secret", body) | {"Content-Type": content_type}
        async with http.post(url, data=body, headers=bad) as response:
            assert response.status == 401
        with anyio.fail_after(patient(5)):
            follow_up = await slack.wait_for_call("response_url")
    assert follow_up.args["text"] == "done"


@pytest.mark.anyio
async def test_messages_are_stored_updated_threaded_and_deleted(slack: FakeSlack) -> None:
    client = AsyncWebClient(token="xoxb-test", base_url=slack.api_url)
    mention = slack.add_message("C1", "<@UBOT> hi", user="U1")

    reply = await client.chat_postMessage(channel="C1", thread_ts=mention.ts, text="working…")
    # Form-encoded bodies (what slack_sdk sends for many methods) decode to the same args as JSON ones.
    await client.api_call("chat.update", data={"channel": "C1", "ts": reply["ts"], "blocks": '[{"type": "divider"}]'})
    await client.reactions_add(channel="C1", timestamp=mention.ts, name="eyes")
    thread = await client.conversations_replies(channel="C1", ts=mention.ts)
    permalink = await client.chat_getPermalink(channel="C1", message_ts=reply["ts"])
    top = await client.chat_getPermalink(channel="C1", message_ts=mention.ts)

    assert reply["ts"] > mention.ts
    assert slack.messages[("C1", reply["ts"])].blocks == [{"type": "divider"}]
    assert [m["text"] for m in thread["messages"]] == ["<@UBOT> hi", "working…"]
    assert thread["messages"][0]["reactions"][0]["name"] == "eyes"
    assert permalink["permalink"] == (f"https://fake-slack.invalid/archives/C1/p{reply['ts'].replace('.', '')}"
                                      f"?thread_ts={mention.ts}&cid=C1")  # a reply's link names its thread
    assert top["permalink"] == f"https://fake-slack.invalid/archives/C1/p{mention.ts.replace('.', '')}"
    await client.chat_delete(channel="C1", ts=reply["ts"])
    assert ("C1", reply["ts"]) not in slack.messages
    with pytest.raises(SlackApiError, match="message_not_found"):
        await client.chat_update(channel="C1", ts=reply["ts"], text="gone")


@pytest.mark.anyio
async def test_views_get_ids_and_updates_keep_them(slack: FakeSlack) -> None:
    client = AsyncWebClient(token="xoxb-test", base_url=slack.api_url)
    modal = {"type": "modal", "callback_id": "ask", "title": {"type": "plain_text", "text": "Ask"}, "blocks": [DIVIDER]}

    opened = (await client.views_open(trigger_id="t1", view=modal))["view"]
    updated = await client.views_update(view_id=opened["id"], hash=opened["hash"], view=modal | {"callback_id": "v2"})
    pushed = (await client.views_push(trigger_id="t2", view=modal))["view"]
    home = (await client.views_publish(user_id="U1", view={"type": "home", "blocks": [DIVIDER]}))["view"]

    assert updated["view"]["id"] == opened["id"]
    assert slack.views[opened["id"]]["callback_id"] == "v2"
    assert len({opened["id"], pushed["id"], home["id"]}) == 3
    with pytest.raises(SlackApiError, match="hash_conflict"):
        await client.views_update(view_id=opened["id"], hash=opened["hash"], view=modal)


@pytest.mark.anyio
async def test_lookups_unknown_methods_and_missing_arguments(slack: FakeSlack) -> None:
    client = AsyncWebClient(token="xoxb-test", base_url=slack.api_url)
    slack.users["U1"] = "Ada Lovelace"

    user = (await client.users_info(user="U1"))["user"]
    channel = (await client.conversations_info(channel="D1"))["channel"]

    assert (user["real_name"], user["profile"]["real_name"]) == ("Ada Lovelace", "Ada Lovelace")
    assert channel["is_im"]
    for call, error in [
        (client.users_info(user="U2"), "user_not_found"),
        (client.api_call("files.upload"), "unknown_method"),
        (client.api_call("chat.postMessage", json={"text": "no channel"}), "invalid_arguments"),
        (client.apps_connections_open(app_token="xoxb-not-an-app-token"), "not_allowed_token_type"),
    ]:
        with pytest.raises(SlackApiError) as failed:
            await call
        assert failed.value.response["error"] == error


@pytest.mark.anyio
async def test_wait_for_call_returns_past_calls_and_waits_for_future_ones(slack: FakeSlack) -> None:
    client = AsyncWebClient(token="xoxb-test", base_url=slack.api_url)
    await client.chat_postMessage(channel="C1", text="first")

    async def post_second() -> None:
        await client.chat_postMessage(channel="C1", text="second")

    with anyio.fail_after(patient(5)):
        assert (await slack.wait_for_call("chat.postMessage")).args["text"] == "first"
        async with anyio.create_task_group() as tg:
            tg.start_soon(post_second)
            second = await slack.wait_for_call("chat.postMessage", lambda c: c.args["text"] == "second")
    assert second.ok


@pytest.mark.anyio
async def test_send_envelope_fails_instead_of_hanging_when_the_socket_drops(slack: FakeSlack) -> None:
    async with aiohttp.ClientSession() as http, http.ws_connect(slack.socket_url) as ws:
        assert (await ws.receive_json())["type"] == "hello"

        async def drop_after_envelope() -> None:
            await ws.receive_json()
            await ws.close()

        with anyio.fail_after(patient(5)), pytest.RaisesGroup(ConnectionError):
            async with anyio.create_task_group() as tg:
                tg.start_soon(drop_after_envelope)
                await slack.send_envelope("events_api", event_app_mention("U1", "C1", "hi", "1.000001"))


@pytest.mark.anyio
async def test_a_held_answer_comes_after_the_work_and_calls_show_their_connection(slack: FakeSlack) -> None:
    modal = {"type": "modal", "callback_id": "ask", "title": {"type": "plain_text", "text": "Ask"}, "blocks": [DIVIDER]}
    release = slack.hold_next("views.open")
    answers: list[str] = []
    async with aiohttp.ClientSession() as session:
        client = AsyncWebClient(token="xoxb-test", base_url=slack.api_url, session=session)

        async def open_view() -> None:
            answers.append((await client.views_open(trigger_id="t1", view=modal))["view"]["id"])

        with anyio.fail_after(patient(5)):
            async with anyio.create_task_group() as tg:
                tg.start_soon(open_view)
                held = await slack.wait_for_call("views.open")
                assert held.response["view"]["id"] in slack.views and answers == []  # done, not yet answered
                release.set()
            await client.auth_test()
            await client.auth_test()
        alone = AsyncWebClient(token="xoxb-test", base_url=slack.api_url)
        await alone.auth_test()
        await alone.auth_test()
    assert answers == [held.response["view"]["id"]]
    shared, single = slack.calls_to("auth.test")[:2], slack.calls_to("auth.test")[2:]
    assert shared[0].connection == shared[1].connection == held.connection  # one kept-alive connection
    assert single[0].connection != single[1].connection  # slack_sdk's default: a session per call


def _date_input(element: dict[str, Any]) -> dict[str, Any]:
    return {"type": "input", "block_id": "b", "label": {"type": "plain_text", "text": "When"},
            "element": {"action_id": "a", **element}}


@pytest.mark.anyio
async def test_block_kit_slack_would_refuse_is_refused_and_fails_the_test() -> None:
    """Every payload is checked with slack_sdk's models: a bad view or message gets Slack's error, and leaving the
    fake with one unclaimed fails the test (so every test driving the adapter checks every payload)."""
    modal = {"type": "modal", "title": {"type": "plain_text", "text": "Ask"}, "submit": {"type": "plain_text",
             "text": "OK"}, "blocks": [_date_input({"type": "datepicker", "initial_date": "2026-W01-1"})]}
    with pytest.raises(AssertionError, match=r"views\.open: .*YYYY-MM-DD.*json-pointer:/view/blocks/0"):
        async with FakeSlack() as slack:
            client = AsyncWebClient(token="xoxb-test", base_url=slack.api_url)
            with pytest.raises(SlackApiError) as refused:
                await client.views_open(trigger_id="t1", view=modal)
            assert refused.value.response["error"] == "invalid_arguments"
            assert not slack.views

    async with FakeSlack() as slack:
        client = AsyncWebClient(token="xoxb-test", base_url=slack.api_url)
        for element in ({"type": "datetimepicker", "initial_date_time": -14182940}, {"type": "nope"}):
            with pytest.raises(SlackApiError, match="invalid_blocks"):
                await client.chat_postMessage(channel="C1", text="x", blocks=[_date_input(element)])
        with pytest.raises(SlackApiError, match="invalid_blocks"):
            await client.chat_postMessage(channel="C1", text="x", blocks=[DIVIDER | {"colour": "red"}])
        await client.chat_postMessage(channel="C1", text="x", blocks=[DIVIDER])
        taken = slack.take_invalid()
        assert [(i.method, len(i.problems)) for i in taken] == [("chat.postMessage", 1)] * 3
        assert "initial_date_time" in taken[0].problems[0]
        assert "json-pointer:/blocks/0/colour" in taken[2].problems[0]  # a key Slack does not know
        assert len(slack.messages) == 1  # only the good one was posted


@pytest.mark.anyio
async def test_a_bad_view_in_an_ack_is_recorded() -> None:
    with pytest.raises(AssertionError, match=r"ack: .*between 0 and"):
        async with FakeSlack() as slack:
            app = make_app(slack)

            @app.view("ask")
            async def next_page(ack: AsyncAck) -> None:
                await ack(response_action="update", view={
                    "type": "modal", "title": {"type": "plain_text", "text": "Ask"},
                    "submit": {"type": "plain_text", "text": "OK"},
                    "blocks": [_date_input({"type": "datetimepicker", "initial_date_time": 253402300799})]})

            async with socket_mode(app, slack):
                with anyio.fail_after(patient(5)):
                    await slack.send_envelope("interactive", view_submission("U1", "V1", "ask", "req-1", {}))


def test_an_http_mode_ack_with_a_view_slack_would_refuse_fails_the_sender() -> None:
    view = {"type": "modal", "title": {"type": "plain_text", "text": "Ask"}, "submit": {"type": "plain_text",
            "text": "OK"}, "blocks": [_date_input({"type": "datepicker", "initial_date": "2026-W01-1"})]}
    check_http_ack("")
    check_http_ack("pending: list")
    check_http_ack(json.dumps({"response_action": "update", "view": view | {"blocks": [DIVIDER]}}))
    with pytest.raises(AssertionError, match="YYYY-MM-DD"):
        check_http_ack(json.dumps({"response_action": "update", "view": view}))

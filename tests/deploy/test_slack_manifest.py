"""The Slack app manifests in deploy/slack/ ask for what the adapter uses: every Web API method the adapter calls has
its OAuth scope among the bot scopes, every event it listens to is subscribed, its slash command and its interactive
parts (buttons, modals, option lists, the Home tab) are declared, and nothing more is asked for.

Schema: slack-sdk ships no manifest schema; its `apps.manifest.validate` method needs an app configuration token and
Slack's servers. Slack publishes a JSON Schema (github.com/slackapi/manifest-schema, not on PyPI); point
`SLACK_MANIFEST_SCHEMA` at a copy of its `schemas/manifest.schema.1.0.0.json` to validate both files against it here
(both pass against the version of 2026), otherwise that one test is skipped.
"""

from __future__ import annotations

import ast
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.settings import from_mapping

ROOT = Path(__file__).resolve().parents[2]
ADAPTER = ROOT / "adapters" / "slack"
DEFAULTS = from_mapping({"bot_token": "xoxb-unused"})  # the `chat.slack` block the README shows
MANIFESTS = {mode: ROOT / "deploy" / "slack" / f"manifest-{mode}.yaml" for mode in ("socket", "http")}

# Each Web API method the adapter may call -> the bot scopes it needs, from Slack's method reference
# (https://docs.slack.dev/reference/methods/<method>, "Required scopes"). A method the adapter starts calling that is
# not in this table fails `test_every_web_api_method_the_adapter_calls_is_in_the_table`: look its scope up and add it.
METHOD_SCOPES: dict[str, frozenset[str]] = {
    "auth_test": frozenset(),                      # auth.test: no scope
    "chat_postMessage": frozenset({"chat:write"}),
    "chat_postEphemeral": frozenset({"chat:write"}),
    "chat_update": frozenset({"chat:write"}),
    "views_open": frozenset(),                     # views.*: no scope (a trigger id or the app's own Home tab)
    "views_update": frozenset(),
    "views_publish": frozenset(),
    "users_info": frozenset({"users:read"}),
    "usergroups_users_list": frozenset({"usergroups:read"}),
    # conversations.members needs the read scope of the conversation's kind; the bot is in public channels, private
    # channels and DMs (the three message.* subscriptions below).
    "conversations_members": frozenset({"channels:read", "groups:read", "im:read"}),
    # conversations.open for a DM with one person (im:write); mpim:write would only be for a group DM.
    "conversations_open": frozenset({"im:write"}),
}

# Each bot event -> the scope Slack requires to subscribe to it (https://docs.slack.dev/reference/events/<event>).
EVENT_SCOPES: dict[str, frozenset[str]] = {
    "app_mention": frozenset({"app_mentions:read"}),
    "app_home_opened": frozenset(),
    "message.im": frozenset({"im:history"}),
    "message.channels": frozenset({"channels:history"}),
    "message.groups": frozenset({"groups:history"}),
}

# What an `app.event(...)` registration in the adapter needs subscribed. `message` covers a DM to the bot and a reply
# in one of its threads in a public or private channel (adapters/slack/intake.py).
EVENT_SUBSCRIPTIONS: dict[str, frozenset[str]] = {
    "app_mention": frozenset({"app_mention"}),
    "message": frozenset({"message.im", "message.channels", "message.groups"}),
    "app_home_opened": frozenset({"app_home_opened"}),
}

COMMAND_SCOPE = "commands"  # a slash command (https://docs.slack.dev/interactivity/implementing-slash-commands)
INTERACTIVE = frozenset({"action", "view_submission", "view_closed", "options", "shortcut"})


def manifest(mode: str) -> dict[str, Any]:
    loaded = yaml.safe_load(MANIFESTS[mode].read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def bot_scopes(mode: str) -> set[str]:
    return set(manifest(mode)["oauth_config"]["scopes"]["bot"])


def bot_events(mode: str) -> set[str]:
    return set(manifest(mode)["settings"]["event_subscriptions"]["bot_events"])


def adapter_calls() -> Iterator[tuple[str, str]]:
    """(module, attribute) for every `x.attribute(...)` call in the adapter's source."""
    for path in sorted(ADAPTER.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                yield path.name, node.func.attr


def web_api_calls() -> set[str]:
    """The Web API methods the adapter calls: attributes named like one of `AsyncWebClient`'s own methods."""
    methods = {name for name, value in vars(AsyncWebClient).items() if callable(value) and not name.startswith("_")}
    methods.discard("api_call")
    return {attr for _, attr in adapter_calls() if attr in methods}


def registrations() -> list[tuple[str, list[Any]]]:
    """Bolt registrations in listeners.py: (`event`/`command`/`action`/…, the constant arguments)."""
    out = []
    tree = ast.parse((ADAPTER / "listeners.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                isinstance(node.func.value, ast.Name) and node.func.value.id == "app":
            out.append((node.func.attr, [a.value for a in node.args if isinstance(a, ast.Constant)]))
    return out


def test_the_adapter_source_is_scanned() -> None:
    # Guards the scanners themselves: a rename that hid every call would make the other tests pass vacuously.
    assert {"chat_postMessage", "views_open", "conversations_open"} <= web_api_calls()
    kinds = {kind for kind, _ in registrations()}
    assert {"event", "command", "action", "options"} <= kinds


def test_every_web_api_method_the_adapter_calls_is_in_the_table() -> None:
    assert web_api_calls() - METHOD_SCOPES.keys() == set()


@pytest.mark.parametrize("mode", MANIFESTS)
def test_the_bot_scopes_cover_every_method_and_event(mode: str) -> None:
    needed = {scope for method in web_api_calls() for scope in METHOD_SCOPES[method]}
    needed |= {scope for event in bot_events(mode) for scope in EVENT_SCOPES[event]}
    assert needed - bot_scopes(mode) == set()


@pytest.mark.parametrize("mode", MANIFESTS)
def test_every_subscribed_event_has_a_known_scope_and_a_listener(mode: str) -> None:
    assert bot_events(mode) - EVENT_SCOPES.keys() == set()
    listened = {name for kind, args in registrations() if kind == "event" for name in args}
    wanted = {sub for name in listened for sub in EVENT_SUBSCRIPTIONS[name]}
    assert wanted - bot_events(mode) == set(), "the adapter listens to events the app does not subscribe to"
    assert bot_events(mode) - wanted == set(), "the app subscribes to events nothing listens to"


@pytest.mark.parametrize("mode", MANIFESTS)
def test_no_scope_is_asked_for_that_nothing_uses(mode: str) -> None:
    used = {scope for method in web_api_calls() for scope in METHOD_SCOPES[method]}
    used |= {scope for event in bot_events(mode) for scope in EVENT_SCOPES[event]}
    used.add(COMMAND_SCOPE)
    assert bot_scopes(mode) - used == set()


@pytest.mark.parametrize("mode", MANIFESTS)
def test_the_slash_command_interactivity_and_home_tab_are_declared(mode: str) -> None:
    m = manifest(mode)
    commands = [c["command"] for c in m["features"]["slash_commands"]]
    assert commands == [DEFAULTS.slash_command]  # the adapter's default, which the README tells people to use
    assert COMMAND_SCOPE in bot_scopes(mode)
    assert {kind for kind, _ in registrations()} & INTERACTIVE
    assert m["settings"]["interactivity"]["is_enabled"] is True
    # views.publish on app_home_opened: the Home tab; DMs to the bot: the Messages tab, writable.
    assert m["features"]["app_home"] == {"home_tab_enabled": True, "messages_tab_enabled": True,
                                         "messages_tab_read_only_enabled": False}
    assert m["settings"]["socket_mode_enabled"] is (mode == "socket")


def test_http_mode_sends_everything_to_the_one_events_path() -> None:
    # bolt's HTTP handler (adapters/slack/http_edge.py) takes events, commands, interactions and option requests at
    # one path; an options request (the `options` listener: long option lists) needs its URL set too.
    m = manifest("http")
    urls = {m["features"]["slash_commands"][0]["url"], m["settings"]["event_subscriptions"]["request_url"],
            m["settings"]["interactivity"]["request_url"],
            m["settings"]["interactivity"]["message_menu_options_url"]}
    assert len(urls) == 1
    [url] = urls
    assert url.startswith("https://") and url.endswith(DEFAULTS.http.path)


def without_urls(m: dict[str, Any]) -> dict[str, Any]:
    """A manifest with what only HTTP mode has (request URLs) and the mode switch taken out."""
    m = json.loads(json.dumps(m))
    for command in m["features"]["slash_commands"]:
        command.pop("url", None)
    m["settings"]["event_subscriptions"].pop("request_url", None)
    m["settings"]["interactivity"].pop("request_url", None)
    m["settings"]["interactivity"].pop("message_menu_options_url", None)
    m["settings"].pop("socket_mode_enabled")
    return m


def test_the_socket_and_http_manifests_differ_only_in_the_mode_and_its_urls() -> None:
    socket, http = manifest("socket"), manifest("http")
    assert "request_url" not in socket["settings"]["event_subscriptions"]
    assert without_urls(socket) == without_urls(http)


@pytest.mark.skipif(not os.environ.get("SLACK_MANIFEST_SCHEMA"),
                    reason="set SLACK_MANIFEST_SCHEMA to Slack's manifest.schema.1.0.0.json to validate against it")
@pytest.mark.parametrize("mode", MANIFESTS)
def test_the_manifest_is_valid_against_slacks_schema(mode: str) -> None:
    schema = json.loads(Path(os.environ["SLACK_MANIFEST_SCHEMA"]).read_text(encoding="utf-8"))
    errors = [f"{list(e.path)}: {e.message}" for e in jsonschema.Draft7Validator(schema).iter_errors(manifest(mode))]
    assert errors == []

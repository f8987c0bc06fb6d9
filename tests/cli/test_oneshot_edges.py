"""`call` and `tools` at the protocol's edges, against a real SDK server whose answers are bent where the SDK would
not bend them (`tests/servers/edges.py`): results without resultType, dropped and task-only tools, URL-required
errors, hostile text. Each runs the real command in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.servers.edges import HOSTILE, Edges, edge_app
from tests.servers.serving import serve

INVISIBLE = ("\x1b", "\u202e", "\u202c", "\u200b", "\u2066", "\u2069")


@pytest.fixture
def edges() -> Iterator[tuple[str, Edges]]:
    state = Edges()
    with serve(edge_app(state)) as base:
        yield f"{base}/mcp", state


def cli(*args: str, answers: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bridge.cli", *args], input=answers, capture_output=True, text=True,
                          timeout=60, check=False)


def test_tools_prints_the_definitions_as_received_task_only_ones_too(edges: tuple[str, Edges]) -> None:
    url, _ = edges
    listed = cli("tools", "--url", url, "--json")
    assert listed.returncode == 0, listed.stderr
    tools = {t["name"]: t for t in json.loads(listed.stdout)}
    assert set(tools) == {"echo", "needs_link", "no_result_type", "task_only"}  # bad_header dropped by the SDK
    assert tools["echo"]["inputSchema"]["required"] == ["text"]
    assert "description" in tools["echo"] and "execution" not in tools["echo"]
    assert tools["task_only"]["execution"] == {"taskSupport": "required"} and "not shown" not in listed.stderr
    plain = cli("tools", "--url", url)
    assert plain.returncode == 0 and plain.stdout.startswith("echo\n  Echo the text back.\n  input: {")


def test_a_result_without_result_type_is_complete(edges: tuple[str, Edges]) -> None:
    # SEP-2322: a client treats a result without resultType as complete (the SDK alone refuses it).
    url, _ = edges
    done = cli("call", "--url", url, "no_result_type")
    assert done.returncode == 0, done.stderr
    assert "fine" in done.stdout and "Traceback" not in done.stderr


def test_a_tool_missing_from_the_fresh_list_is_refused_before_tools_call(edges: tuple[str, Edges]) -> None:
    url, state = edges
    dropped = cli("call", "--url", url, "bad_header", '{"region": "eu"}')
    assert dropped.returncode == 2
    assert "server has no tool named 'bad_header' (its tools: echo, needs_link, no_result_type, task_only)" \
        in dropped.stderr
    missing = cli("call", "--url", url, "nope")
    assert missing.returncode == 2 and "no tool named 'nope'" in missing.stderr
    assert "tools/call" not in state.methods


def test_a_task_only_tool_of_a_server_that_runs_no_tasks_is_called_plainly(edges: tuple[str, Edges]) -> None:
    # The server lists the tool as task-only but does not advertise `tasks.requests.tools.call`: a task-augmented
    # call would be outside what it said it takes, so the call goes out plain and the server answers for itself.
    url, state = edges
    done = cli("call", "--url", url, "task_only")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ran without a task"
    assert "tools/call" in state.methods and not any(m.startswith("tasks/") for m in state.methods)


def test_after_a_url_required_answer_the_call_runs_again_once_the_link_is_done(edges: tuple[str, Edges]) -> None:
    url, state = edges
    done = cli("call", "--url", url, "needs_link", answers="done\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "linked\n"
    assert "URL:  https://example.com/connect" in done.stderr
    assert state.link_calls == 2 and state.methods.count("tools/call") == 2
    # Declining the link ends the call without a second try.
    state.link_calls = 0
    declined = cli("call", "--url", url, "needs_link", answers="decline\n")
    assert declined.returncode == 2 and state.link_calls == 1


def test_server_text_on_stdout_is_sanitised(edges: tuple[str, Edges]) -> None:
    url, _ = edges
    done = cli("call", "--url", url, "echo", json.dumps({"text": HOSTILE}))
    assert done.returncode == 0, done.stderr
    assert not any(c in done.stdout for c in INVISIBLE)
    assert "red" in done.stdout and "evil" in done.stdout and "zerowidth" in done.stdout
    as_json = cli("call", "--url", url, "echo", json.dumps({"text": HOSTILE}), "--json")
    assert as_json.returncode == 0 and not any(c in as_json.stdout for c in INVISIBLE)
    assert json.loads(as_json.stdout)["content"][0]["text"] == HOSTILE  # the same JSON, escaped


def test_usage_errors(edges: tuple[str, Edges]) -> None:
    url, _ = edges
    both = cli("tools", "--url", url, "--stdio", "x")
    assert both.returncode == 2 and "give --url or --stdio, not both" in both.stderr
    bare = cli("tools")
    assert bare.returncode == 2 and "usage: tools" in bare.stderr

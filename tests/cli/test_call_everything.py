"""`mcp-chat-bridge call` against server-everything from npm, answered through a pipe."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path


def run_call(everything_js: Path, tool: str, answers: list[str], *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bridge.cli", "call", "--stdio", f"node {everything_js} stdio", *extra, tool],
        input="\n".join(answers) + "\n", capture_output=True, text=True, timeout=60, check=False)


def raw_result(stdout: str) -> dict[str, object]:
    match = re.search(r"Raw result: (\{.*\})", stdout, re.S)
    assert match, stdout
    data: dict[str, object] = json.loads(match.group(1))
    return data


def test_piped_answers_reach_server_everything_with_exact_types(everything_js: Path) -> None:
    answers = ["Ada", "yes", "", "not an email", "ada@example.com", "https://example.com/ada", "1990-01-02", "7",
               "2.5", "2", "1, Drums", "Wonder Woman", "", "Dogs", "accept"]
    done = run_call(everything_js, "trigger-elicitation-request", answers)
    assert done.returncode == 0, done.stderr
    assert raw_result(done.stdout) == {"action": "accept", "content": {
        "name": "Ada", "check": True, "firstLine": "It was a dark and stormy night.", "email": "ada@example.com",
        "homepage": "https://example.com/ada", "birthdate": "1990-01-02", "integer": 7, "number": 2.5,
        "untitledSingleSelectEnum": "Rachel", "untitledMultipleSelectEnum": ["Guitar", "Drums"],
        "titledSingleSelectEnum": "hero-3", "titledMultipleSelectEnum": ["fish-1"], "legacyTitledEnum": "pet-2"}}
    assert "✗ Enter an email address like name@example.com." in done.stderr
    assert "asks you to fill in a form" in done.stderr


def test_a_declined_form_and_end_of_input(everything_js: Path) -> None:
    declined = run_call(everything_js, "trigger-elicitation-request", ["!decline"])
    assert declined.returncode == 0 and '"action": "decline"' in declined.stdout
    ended = run_call(everything_js, "trigger-elicitation-request", [])
    assert ended.returncode == 0 and '"action": "cancel"' in ended.stdout


def test_exit_codes_for_tool_errors_and_connection_errors(everything_js: Path, tmp_path: Path) -> None:
    ok = run_call(everything_js, "get-sum", [], "--json")
    assert ok.returncode == 1  # no arguments: the tool reports an error
    result = subprocess.run([sys.executable, "-m", "bridge.cli", "call", "--stdio", f"{sys.executable} -c pass",
                             "x"], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2 and "failed to start" in result.stderr
    usage = subprocess.run([sys.executable, "-m", "bridge.cli", "call", "--stdio", "node x", "tool", "[1]"],
                           capture_output=True, text=True, timeout=60, check=False)
    assert usage.returncode == 2 and "must be a JSON object" in usage.stderr


def test_a_task_tool_runs_with_its_status_on_stderr_and_its_question_answered_at_the_terminal(
        everything_js: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bridge.cli", "call", "--stdio", f"node {everything_js} stdio",
         "simulate-research-query", '{"topic": "python", "ambiguous": true}'],
        input="2\nsubmit\n", capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("# Research Report: python (snake)")
    assert "server.simulate-research-query task working: " in done.stderr
    assert "task waiting for an answer from you: Found multiple interpretations" in done.stderr
    assert "Task: simulate-research-query (task " in done.stderr
    assert "server.simulate-research-query: task completed · " in done.stderr

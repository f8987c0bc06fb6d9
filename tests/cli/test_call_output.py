"""What `call` prints is cleaned like every other output: a result cannot drive the terminal or hide characters."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = "\x1b[2J\x1b]8;;https://evil.example\x07link\x1b]8;;\x07 \u202eevil\u202c a\u2060b\ufeffc\u00add\u061ce\u200b"


def call(*extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bridge.cli", "call", "--stdio",
                           f"{sys.executable} -m bridge.cli.demo.server", *extra, "echo",
                           json.dumps({"message": HOSTILE})],
                          capture_output=True, text=True, timeout=60, check=False, cwd=ROOT, stdin=subprocess.DEVNULL)


def test_a_hostile_result_is_printed_clean() -> None:
    done = call()
    assert done.returncode == 0, done.stderr
    assert done.stdout == "[2J]8;;https://evil.examplelink]8;; evil abcde\n"


def test_json_output_keeps_the_data_with_control_characters_escaped() -> None:
    done = call("--json")
    assert done.returncode == 0, done.stderr
    assert done.stdout.isascii()  # every control, bidi and invisible character is escaped
    assert json.loads(done.stdout)["content"][0]["text"] == HOSTILE

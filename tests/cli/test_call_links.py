"""`call` in a real process against a real stdio server, on both eras: a link card names the host a browser opens,
and neither cards nor results carry a stray zero-width joiner."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.servers.links import FAMILY, TRICKS

ROOT = Path(__file__).resolve().parents[2]


def call(*words: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bridge.cli", "call", "--stdio",
                           f"{sys.executable} -m tests.servers.links", *words],
                          input=stdin, capture_output=True, text=True, timeout=120, check=False, cwd=ROOT)


def test_a_result_keeps_an_emoji_sequence_and_drops_a_stray_joiner() -> None:
    done = call("joined")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"paypal says hi {FAMILY}\n"


@pytest.mark.parametrize("protocol", ["legacy", "auto"])
def test_a_link_card_names_the_host_a_browser_opens(protocol: str) -> None:
    url, opened, seeming = TRICKS[0]
    done = call("--protocol", protocol, "visit", json.dumps({"url": url}), stdin="decline\n")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["action"] == "decline"
    assert f"│ Host: {opened} (a browser opens this host, not {seeming} as written" in done.stderr
    assert f"│ ⚠ Careful: in a browser this link opens {opened}." in done.stderr
    assert f"│ Sign in to continue: paypal says hi {FAMILY}" in done.stderr

"""The README's Matrix set-up, followed step by step against the suite's Synapse: an account for the bot (step 1), the
config block the README shows with only the homeserver and the bot's id changed and the password in
MATRIX_BOT_PASSWORD (step 2), the README's `run` command as a real process, and a person who invites the bot to a room
and types `!mcp help` (step 3) gets the list of commands back."""

from __future__ import annotations

import os
import re
import shlex
import signal
import sys
from pathlib import Path

import anyio
import pytest
from anyio.abc import Process

from tests.adapters.matrix.harness import body, person, register
from tests.harness.hosts import patient
from tests.harness.synapse import Synapse

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[3]
README_HOMESERVER = "https://matrix.example.org"
README_BOT = '"@mcp-bot:example.org"'


def matrix_section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"^## Matrix\n(.*?)^## ", text, re.DOTALL | re.MULTILINE)
    assert match, "README.md has no '## Matrix' section"
    return match.group(1)


def readme_config() -> str:
    """Step 2's YAML block, unindented."""
    match = re.search(r"^( *)```yaml\n(.*?)^ *```", matrix_section(), re.DOTALL | re.MULTILINE)
    assert match, "the Matrix section has no YAML block"
    indent = len(match.group(1))
    return "".join(line[indent:] + "\n" for line in match.group(2).splitlines())


def readme_command() -> list[str]:
    """Step 3's `mcp-chat-bridge run …` command, as this interpreter runs it (`python -m bridge.cli`)."""
    match = re.search(r"`(mcp-chat-bridge run [^`]*)`", matrix_section())
    assert match, "the Matrix section shows no run command"
    words = shlex.split(match.group(1))
    return [sys.executable, "-m", "bridge.cli", *words[1:]]


def test_the_readme_shows_a_config_block_and_a_command() -> None:
    config = readme_config()
    assert config.startswith("chat:\n  matrix:\n")
    assert README_HOMESERVER in config and README_BOT in config and "${MATRIX_BOT_PASSWORD}" in config
    assert readme_command()[3:] == ["run", "-c", "bridge.yaml"]


async def stop(process: Process) -> int:
    process.send_signal(signal.SIGTERM)
    with anyio.fail_after(patient(60)):
        return await process.wait()


async def test_the_readme_steps_bring_a_bot_that_answers_help(synapse: Synapse, tmp_path: Path) -> None:
    # Step 1: an account for the bot (the harness registers users through Synapse's shared-secret API).
    bot = register(synapse, "mcp-bot")
    password = f"{bot.user_id[1:].split(':')[0]}-password"
    # Step 2: the README's block, pointed at this homeserver and account; the password stays a ${VAR}.
    config = readme_config().replace(README_HOMESERVER, synapse.base_url).replace(README_BOT, f'"{bot.user_id}"')
    (tmp_path / "bridge.yaml").write_text(config, encoding="utf-8")
    assert password not in config
    # Step 3: the README's command, from the directory holding bridge.yaml (store_path is relative to it). This
    # tree's code is imported first; the state (the store's default place) goes to the test's folder.
    env = {**os.environ, "MATRIX_BOT_PASSWORD": password, "PYTHONPATH": str(ROOT),
           "XDG_STATE_HOME": str(tmp_path / "state"), "XDG_DATA_HOME": str(tmp_path / "data")}
    log = tmp_path / "run.log"
    with log.open("wb") as output:
        process = await anyio.open_process(readme_command(), cwd=tmp_path, env=env, stdin=None, stdout=output,
                                           stderr=output)
        try:
            async with person(synapse, "ada", None) as ada:
                await ada.create_room([bot.user_id], encrypted=False)
                await ada.wait_joined(bot.user_id)  # the bot accepts the invitation
                await ada.say("!mcp help")
                reply = await ada.wait(lambda i, e: getattr(e, "sender", "") == bot.user_id and
                                       body(e).startswith("Commands"))
        finally:
            code = await stop(process) if process.returncode is None else process.returncode
    logged = log.read_text(encoding="utf-8", errors="replace")
    listed = set(re.findall(r"^  ([a-z]+)", body(reply), re.MULTILINE))
    assert {"help", "servers", "tools", "call", "pending", "cancel"} <= listed, body(reply)
    assert code == 0, logged
    assert "Traceback" not in logged and password not in logged
    assert (tmp_path / "matrix-store").is_dir()  # the device is kept where the README says

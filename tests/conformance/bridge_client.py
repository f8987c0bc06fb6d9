"""The bridge under test: the conformance runner's client command, driving `mcp-chat-bridge tools` and `call`.

Invoked as `python -m tests.conformance.bridge_client URL`. It follows the same plan as the bare-SDK reference
(`plan.py`), but every step is a real `mcp-chat-bridge` process, driven the way a person at a terminal drives it:

- the scenario's context becomes a config file (an `auth:` block, the secret through `${VAR}`), with a token store
  and its key, so a sign-in made by `tools` is reused by each `call`;
- `tools -c FILE s --json` lists the tools; `call -c FILE s TOOL ARGS` makes each call of the plan (`plan.calls`);
- every command logs at debug level, and nothing it prints may hold a secret the scenario handed out;
- this script plays the person: when a command prints a sign-in link it follows it like a browser (the test
  authorization servers consent at once) and so delivers the redirect to the command's loopback listener; when a
  form field is asked it presses Enter (the default), answering a required field without one plainly; it accepts
  every summary.

`BRIDGE_PROTOCOL` (optional) pins the protocol the commands speak.
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import httpx2
import yaml
from anyio.abc import Process

from tests.conformance import enterprise, plan

LINK = re.compile(r"^\s{4}(https?://\S+)\s*$")
QUESTION = re.compile(r"^│ \(\d+/\d+\) .*\[(?P<hint>[^\]]*)\]\s*$")
SUMMARY = re.compile(r"^└ .*\(answer ")
REQUIRED = "This one is required."


def write_config(url: str, folder: Path, env: dict[str, str]) -> Path:
    auth = plan.auth_settings(plan.context())
    if "assertion" in auth:  # where the platform projects a workload's token: a file, read at each use
        token = folder / "workload-token"
        token.write_text(auth.pop("assertion"), "utf-8")
        auth["assertion_file"] = str(token)
    for secret in plan.SECRET_KEYS:
        if secret in auth:
            env[f"CONFORMANCE_{secret.upper()}"] = auth[secret]
            auth[secret] = f"${{CONFORMANCE_{secret.upper()}}}"
    env["CONFORMANCE_TOKEN_KEY"] = base64.b64encode(secrets.token_bytes(32)).decode()
    config: dict[str, Any] = {
        "store": str(folder / "bridge.db"),
        "secrets_key_env": "CONFORMANCE_TOKEN_KEY",
        "servers": {"s": {"url": url, "auth": auth}},
    }
    if os.environ.get("BRIDGE_PROTOCOL"):
        config["servers"]["s"]["protocol"] = os.environ["BRIDGE_PROTOCOL"]
    enterprise.apply(config, env, plan.context())  # the company sign-in, for the scenarios that play a company
    path = folder / "bridge.yaml"
    path.write_text(yaml.safe_dump(config), "utf-8")
    return path


def secrets_of(auth: dict[str, Any]) -> list[str]:
    """The secrets a scenario handed out: its `auth:` block's and the identity provider's (a person's ID token)."""
    ctx = plan.context()
    return [str(v) for v in (*(auth.get(k) for k in plan.SECRET_KEYS), *(ctx.get(k) for k in plan.SECRET_KEYS)) if v]


def leaked(secret_values: list[str], printed: str) -> bool:
    """A secret, or the middle of a JWT one (its claims), in what was printed."""
    pieces = [p for s in secret_values for p in (s, *(s.split(".")[1:2] if s.count(".") == 2 else []))]
    return any(p and p in printed for p in pieces)


def plain_answer(hint: str) -> str:
    """What a person types into a required field that has no default: the plainest value its hint allows."""
    bounds = re.search(r"(?:at least |^.*?, )(-?[0-9.]+)(?: to |$|,)", hint)
    table = [("whole number", bounds.group(1).split(".")[0] if bounds else "1"),
             ("a number", bounds.group(1) if bounds else "1"), ("yes or no", "yes"), ("option", "1"),
             ("email", "person@example.com"), ("a URL", "https://example.com/"), ("date and time",
             "2026-01-01T00:00:00Z"), ("a date", "2026-01-01")]
    return next((answer for key, answer in table if key in hint), "example")


async def browse(url: str) -> None:
    """The browser: open the link, follow the authorization server's redirect back to the command."""
    async with httpx2.AsyncClient(timeout=30) as http:
        response = await http.get(url, follow_redirects=False)
        location = response.headers.get("location")
        if response.is_redirect and location:
            await http.get(location, follow_redirects=False)


async def drive(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run one command as a person would; returns its exit code and stdout."""
    command = [sys.executable, "-m", "bridge.cli", *args, "--log-level", "debug"]
    async with await anyio.open_process(command, env=env) as proc, anyio.create_task_group() as tg:
        out: list[bytes] = []
        tg.start_soon(_collect, proc, out)
        await _person(proc, tg)
        code = await proc.wait()
    printed = b"".join(out).decode()
    PRINTED.append(printed)
    return code, printed


async def _collect(proc: Process, out: list[bytes]) -> None:
    assert proc.stdout is not None
    async for chunk in proc.stdout:
        out.append(chunk)


TRACEBACKS: list[str] = []
"""Commands that printed a traceback: never acceptable, whatever the scenario checks."""
PRINTED: list[str] = []
"""Everything the commands printed (stdout and stderr, debug logs included), checked for the scenario's secrets."""


async def _person(proc: Process, tg: Any) -> None:
    assert proc.stderr is not None and proc.stdin is not None
    pending = b""
    required = False
    async for chunk in proc.stderr:
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for raw in lines:
            line = raw.decode(errors="replace")
            PRINTED.append(line)
            print(line, file=sys.stderr)
            if line.startswith("Traceback (most recent call last)"):
                TRACEBACKS.append(line)
            reply: str | None = None
            if (link := LINK.match(line)) is not None:
                tg.start_soon(browse, link.group(1))
            elif (question := QUESTION.match(line)) is not None:
                reply = plain_answer(question.group("hint")) if required else ""
                required = False
            elif line.startswith("│ ✗") and REQUIRED in line:
                required = True  # the question comes again on the next line
            elif SUMMARY.match(line):
                reply = "accept"
            if reply is not None:
                await proc.stdin.send((reply + "\n").encode())
    await proc.stdin.aclose()


async def main(url: str) -> int:
    with tempfile.TemporaryDirectory(prefix="bridge-conformance-") as tmp:
        folder = Path(tmp)
        env = {**os.environ}
        config = str(write_config(url, folder, env))
        code, listing = await drive(["tools", "-c", config, "s", "--json"], env)
        if code != 0:
            return 3 if TRACEBACKS else code
        failures = 0
        for name, arguments in plan.calls(json.loads(listing)):
            code, _ = await drive(["call", "-c", config, "s", name, json.dumps(arguments)], env)
            failures += code not in (0, 1)  # 1: the tool reported an error, which the protocol allows
        if TRACEBACKS:
            print("the bridge printed a traceback", file=sys.stderr)
            return 3
        if leaked(secrets_of(plan.auth_settings(plan.context())), "\n".join(PRINTED)):
            print("the bridge printed a secret of the scenario (a client secret, key or workload token)",
                  file=sys.stderr)
            return 3
        return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(anyio.run(main, sys.argv[-1]))

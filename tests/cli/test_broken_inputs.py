"""Every command with broken inputs, run as a user runs it: an exit code, one line saying what is wrong, no traceback.

Each case is a real process. A missing extra is simulated by a module on PYTHONPATH that shadows the real package
and fails to import, exactly as an absent package does.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

MATRIX = {"homeserver": "http://127.0.0.1:{port}", "user_id": "@bot:localhost", "password": "pw",
          "store_path": "{tmp}/matrix"}


@dataclass
class Case:
    argv: list[str]
    expect: str
    """Text the single error line contains."""
    files: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    missing: tuple[str, ...] = ()
    """Packages to make unimportable."""
    code: int = 2
    extra_lines: int = 0
    """Lines the conversation itself prints before the error (`call`'s console talks on stderr; none of these cases
    gets that far: `call` fetches a fresh tool list first, and its failure is the one line)."""


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def yaml_file(store: str, chat: str) -> str:
    return "store: " + store + "\nservers: {e: {command: echo}}\nchat: " + chat + "\n"


CASES: dict[str, Case] = {
    "run: no -c": Case(["run"], "the following arguments are required: -c/--config"),
    "run: missing file": Case(["run", "-c", "{tmp}/nope.yaml"], "nope.yaml: cannot read: No such file"),
    "run: not YAML": Case(["run", "-c", "{tmp}/c.yaml"], "not valid YAML", files={"c.yaml": "a: [1, 2\n"}),
    "run: not a mapping": Case(["run", "-c", "{tmp}/c.yaml"], "the config must be a mapping",
                               files={"c.yaml": "- 1\n"}),
    "run: no chat adapter": Case(["run", "-c", "{tmp}/c.yaml"], "chat: configure at least one adapter",
                                 files={"c.yaml": "servers: {e: {command: echo}}\n"}),
    "run: bad duration": Case(["run", "-c", "{tmp}/c.yaml"], "servers.e.tools.timeout: must be a duration",
                              files={"c.yaml": "servers: {e: {command: echo, tools: {timeout: soon}}}\n"
                                               "chat: {console: {}}\n"}),
    "run: unset variable": Case(["run", "-c", "{tmp}/c.yaml"],
                                "servers.e.url: environment variable NOT_SET_ANYWHERE is not set",
                                files={"c.yaml": "servers: {e: {url: '${NOT_SET_ANYWHERE}'}}\nchat: {console: {}}\n"}),
    "run: per_user without a token key": Case(
        ["run", "-c", "{tmp}/c.yaml"], "servers.e.auth: per_user keeps each person's tokens, which must be encrypted",
        files={"c.yaml": "servers: {e: {url: 'https://e.example/mcp', auth: {identity: per_user}}}\n"
                         "chat: {console: {}}\nhttp: {listen: '127.0.0.1:0'}\n"}),
    "run: per_user with its key unset": Case(
        ["run", "-c", "{tmp}/c.yaml"], "per_user needs the token encryption key, but the environment variable "
        "KEY_NOT_SET_ANYWHERE is not set",
        files={"c.yaml": "secrets_key_env: KEY_NOT_SET_ANYWHERE\n"
                         "servers: {e: {url: 'https://e.example/mcp', auth: {identity: per_user}}}\n"
                         "chat: {console: {}}\nhttp: {listen: '127.0.0.1:0'}\n"}),
    "run: matrix extra missing": Case(
        ["run", "-c", "{tmp}/c.yaml"], "install the bridge with its matrix extra", missing=("nio",),
        files={"c.yaml": yaml_file("{tmp}/s.db", "{matrix: {matrix}}")}),
    "run: slack extra missing": Case(
        ["run", "-c", "{tmp}/c.yaml"], "install the bridge with its slack extra", missing=("slack_bolt", "slack_sdk"),
        files={"c.yaml": yaml_file("{tmp}/s.db", "{slack: {bot_token: x, app_token: y}}")}),
    "run: homeserver unreachable": Case(
        ["run", "-c", "{tmp}/c.yaml"], "matrix login failed",
        files={"c.yaml": yaml_file("{tmp}/s.db", "{matrix: {matrix}}")}),
    "run: store cannot be opened": Case(["run", "-c", "{tmp}/c.yaml"], "store: cannot open",
                                        files={"c.yaml": yaml_file("{tmp}/c.yaml/s.db", "{console: {}}")}),
    "check-config: no chat adapter": Case(["check-config", "{tmp}/c.yaml"], "chat: configure at least one adapter",
                                          files={"c.yaml": "servers: {e: {command: echo}}\n"}),
    "check-config: bad duration named once": Case(
        ["check-config", "{tmp}/c.yaml"], "servers.e.elicitation.timeout: must be a duration",
        files={"c.yaml": "servers: {e: {command: echo, elicitation: {timeout: 10 minutes}}}\nchat: {console: {}}\n"}),
    "check-config: unset variable only": Case(
        ["check-config", "{tmp}/c.yaml"], "chat.matrix.homeserver: environment variable HS_NOT_SET is not set",
        files={"c.yaml": "chat: {matrix: {homeserver: '${HS_NOT_SET}', user_id: '@a:b', password: x}}\n"}),
    "check-config: extra missing": Case(
        ["check-config", "{tmp}/c.yaml"], "install the bridge with its matrix extra", missing=("nio",),
        files={"c.yaml": yaml_file("{tmp}/s.db", "{matrix: {matrix}}")}),
    "check-config: missing file": Case(["check-config", "{tmp}/nope.yaml"], "cannot read"),
    "check-config: approver platform in the wrong case": Case(
        ["check-config", "{tmp}/c.yaml"],
        "servers.e.approvers[0]: 'Slack:U1' can never match: write the platform in lower case (slack:U1)",
        files={"c.yaml": "servers: {e: {command: echo, approvers: ['Slack:U1']}}\nchat: {console: {}}\n"}),
    "check-config: approver without a platform": Case(
        ["check-config", "{tmp}/c.yaml"], "servers.e.approvers[1]: 'U1' can never match: it needs its platform",
        files={"c.yaml": "servers: {e: {command: echo, approvers: ['slack:U1', U1]}}\nchat: {console: {}}\n"}),
    "check-config: approver wildcard": Case(
        ["check-config", "{tmp}/c.yaml"], "servers.e.approvers[0]: '*' can never match: approvers are people",
        files={"c.yaml": "servers: {e: {command: echo, approvers: ['*']}}\nchat: {console: {}}\n"}),
    "call: timeout soon": Case(["call", "--stdio", "node x.js", "--timeout", "soon", "tool"],
                               "--timeout: not a duration"),
    "call: bad JSON": Case(["call", "--stdio", "node x.js", "tool", "{"], "the arguments are not valid JSON"),
    "call: not an object": Case(["call", "--stdio", "node x.js", "tool", "[1]"], "must be a JSON object"),
    "call: no server": Case(["call", "tool"], "give -c FILE SERVER TOOL"),
    "call: unknown server": Case(["call", "-c", "{tmp}/c.yaml", "nope", "tool"], "no server named 'nope'",
                                 files={"c.yaml": "servers: {e: {command: echo}}\n"}),
    "call: unbalanced quote": Case(["call", "--stdio", "node 'x", "tool"], "--stdio: cannot split the command"),
    "call: bad url": Case(["call", "--url", "ftp://x", "tool"], "--url: must start with http"),
    "call: server unreachable": Case(["call", "--url", "http://127.0.0.1:{port}/mcp", "tool"],
                                     "server failed to start"),
    "call: program missing": Case(["call", "--stdio", "no-such-program-here", "tool"], "server failed to start"),
    "import-servers: missing file": Case(["import-servers", "{tmp}/nope.json"], "No such file"),
    "import-servers: not JSON": Case(["import-servers", "{tmp}/m.json"], "not valid JSON",
                                     files={"m.json": "{'a': 1"}),
    "import-servers: no servers": Case(["import-servers", "{tmp}/m.json"], "must be an object",
                                       files={"m.json": '{"mcpServers": [1]}'}),
    "audit: no store": Case(["audit", "--store", "{tmp}/none.db"], "does not exist"),
    "audit: bad since": Case(["audit", "-c", "{tmp}/c.yaml", "--since", "yesterday"], "--since: 'yesterday'",
                             files={"c.yaml": "store: x.db\n"}),
    "demo: state folder unusable": Case(["demo"], "demo: cannot keep the request-state key in",
                                        files={"file": "not a folder"}, env={"XDG_STATE_HOME": "{tmp}/file"}),
    "demo: bad key in the environment": Case(["demo"], "MCP_CHAT_BRIDGE_DEMO_KEY: must be at least 64 hex digits",
                                             env={"MCP_CHAT_BRIDGE_DEMO_KEY": "short"}),
    "demo: bad protocol": Case(["demo", "--protocol", "1999"], "argument --protocol: invalid choice"),
}


def run(case: Case, tmp_path: Path, debug: bool = False) -> subprocess.CompletedProcess[str]:
    port = closed_port()
    matrix = "{" + ", ".join(f"{k}: '{v}'" for k, v in MATRIX.items()) + "}"

    def fill(text: str) -> str:
        return text.replace("{matrix}", matrix).replace("{tmp}", str(tmp_path)).replace("{port}", str(port))

    for name, text in case.files.items():
        (tmp_path / name).write_text(fill(text))
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), **{k: fill(v) for k, v in case.env.items()}}
    if case.missing:
        blocked = tmp_path / "blocked"
        blocked.mkdir()
        for package in case.missing:
            (blocked / f"{package}.py").write_text(
                f"raise ModuleNotFoundError(\"No module named {package!r}\", name={package!r})\n")
        env["PYTHONPATH"] = os.pathsep.join([str(blocked), env.get("PYTHONPATH", "")])
    argv = [fill(a) for a in case.argv]
    return subprocess.run([sys.executable, "-m", "bridge.cli", *(["--debug"] if debug else []), *argv],
                          capture_output=True, text=True, timeout=60, check=False, env=env, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("name", CASES)
def test_a_broken_input_gives_one_line_and_no_traceback(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    done = run(case, tmp_path)
    assert "Traceback" not in done.stderr + done.stdout
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 + case.extra_lines, done.stderr
    assert case.expect in lines[0], done.stderr
    assert done.returncode == case.code, done.stderr


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    done = run(CASES["run: homeserver unreachable"], tmp_path, debug=True)
    assert done.returncode == 2
    assert "Traceback" in done.stderr
    assert done.stderr.rstrip().splitlines()[-1].startswith("error: matrix login failed")
    after = run(Case(["call", "--stdio", "node x", "--debug", "--timeout", "soon", "t"], ""), tmp_path)
    assert "Traceback" in after.stderr and "--timeout: not a duration" in after.stderr

"""What a newcomer met in the first hour with the config and its commands, each as a real `mcp-chat-bridge` process.

A missing extra is simulated the way Python itself reports an absent package: a `sitecustomize` on PYTHONPATH sets
`sys.modules[name] = None`, so `import name` raises ModuleNotFoundError and `importlib.util.find_spec(name)` is None,
exactly as when the package is not installed (a second venv without the extra would take minutes to build here).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bridge.config.file import from_mapping, load
from bridge.config.yaml_text import loads
from bridge.errors import ConfigError
from tests.harness.hosts import patient

AUDIT_WARNING = "warning: audit:"


def cli(*argv: str, tmp: Path, env: dict[str, str] | None = None,
        missing: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "XDG_STATE_HOME": str(tmp / "state"), **(env or {})}
    if missing:
        blocked = tmp / "blocked"
        blocked.mkdir(exist_ok=True)
        (blocked / "sitecustomize.py").write_text(
            "import sys\n" + "".join(f"sys.modules[{name!r}] = None\n" for name in missing))
        environment["PYTHONPATH"] = os.pathsep.join([str(blocked), environment.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "bridge.cli", *argv], capture_output=True, text=True,
                          timeout=patient(60), check=False, env=environment, stdin=subprocess.DEVNULL)


def errors(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.strip() and not line.startswith(AUDIT_WARNING)]


# 1. Duplicate keys, and import-servers --into.

CONFIG = """\
# the team's bridge
store: {tmp}/s.db
servers:
  first:
    command: echo   # kept
  second:
    command: echo
  # more servers below
# the chat
chat:
  console: {{}}
"""

CLAUDE = {"mcpServers": {
    "github": {"command": "npx", "args": ["-y", "gh"], "env": {"GITHUB_TOKEN": "ghp_0123456789abcdef"}},
    "db": {"command": "npx", "args": ["pg-mcp", "postgresql://admin:hunter2pass@db:5432/x", "--token=abcd1234secret",
                                      "--api-key", "sk-live-zzzzzzzz", "--verbose"]}}}


def test_a_second_servers_key_is_refused_naming_the_key_and_both_lines(tmp_path: Path) -> None:
    config = tmp_path / "bridge.yaml"
    config.write_text(CONFIG.format(tmp=tmp_path) + "servers:\n  third:\n    command: echo\n")
    done = cli("check-config", str(config), tmp=tmp_path)
    assert done.returncode == 2, done.stderr
    assert errors(done) == [f"{config}: not valid YAML: key 'servers' appears twice (lines 3 and 12); YAML would "
                            "keep only the second: merge the two into one"]


def test_every_config_read_refuses_duplicate_keys(tmp_path: Path) -> None:
    config = tmp_path / "bridge.yaml"
    config.write_text("store: a.db\nservers: {e: {command: echo, env: {A: '1', A: '2'}}}\nstore: b.db\n")
    with pytest.raises(ConfigError, match=r"key 'store' appears twice \(lines 1 and 3\)"):
        load(config)
    audit = cli("audit", "-c", str(config), tmp=tmp_path)  # reads only the store: from the file
    assert audit.returncode == 2 and "key 'store' appears twice" in audit.stderr, audit.stderr
    config.write_text("servers: {e: {command: echo, env: {A: '1',\n  A: '2'}}}\n")
    with pytest.raises(ConfigError, match=r"key 'A' appears twice \(lines 1 and 2\)"):
        load(config)
    assert loads("a: {<<: {b: 1}, c: 2}\n") == {"a": {"b": 1, "c": 2}}  # a merge key is not a duplicate


def test_import_servers_into_a_config_keeps_its_servers_and_comments(tmp_path: Path) -> None:
    config = tmp_path / "bridge.yaml"
    config.write_text(CONFIG.format(tmp=tmp_path))
    source = tmp_path / "claude.json"
    source.write_text(json.dumps(CLAUDE))
    done = cli("import-servers", str(source), "--into", str(config), tmp=tmp_path)
    assert done.returncode == 0, done.stderr
    text = config.read_text()
    assert "# the team's bridge" in text and "command: echo   # kept" in text and "# the chat" in text
    data = yaml.safe_load(text)
    assert list(data["servers"]) == ["first", "second", "github", "db"]
    assert data["servers"]["github"]["env"] == {"GITHUB_TOKEN": "${GITHUB_TOKEN}"}
    assert data["chat"] == {"console": {}}
    check = cli("check-config", str(config), tmp=tmp_path,
                env={"GITHUB_TOKEN": "x", "DB_PASSWORD": "x", "DB_TOKEN": "x", "DB_API_KEY": "x"})
    assert check.returncode == 0 and "OK (4 servers" in check.stdout, check.stderr


def test_import_servers_into_refuses_a_name_clash_and_changes_nothing(tmp_path: Path) -> None:
    config = tmp_path / "bridge.yaml"
    config.write_text(CONFIG.format(tmp=tmp_path))
    before = config.read_text()
    source = tmp_path / "claude.json"
    source.write_text(json.dumps({"mcpServers": {"second": {"command": "npx"}, "new": {"command": "npx"}}}))
    done = cli("import-servers", str(source), "--into", str(config), tmp=tmp_path)
    assert done.returncode == 2
    assert errors(done) == [f"{config}: servers.second: already configured; rename one of the two (in the imported "
                            "file or in the config) and import again"]
    assert config.read_text() == before


@pytest.mark.parametrize("servers", ["servers:\n", "servers: {}\n", "servers: {old: {command: echo}}\n", ""])
def test_import_servers_into_a_config_with_an_empty_flow_or_no_servers_block(tmp_path: Path, servers: str) -> None:
    config = tmp_path / "bridge.yaml"
    config.write_text(f"store: {tmp_path}/s.db\n{servers}chat: {{console: {{}}}}  # console only\n")
    source = tmp_path / "claude.json"
    source.write_text(json.dumps({"mcpServers": {"new": {"command": "npx"}}}))
    done = cli("import-servers", str(source), "--into", str(config), tmp=tmp_path)
    assert done.returncode == 0, done.stderr
    data = yaml.safe_load(config.read_text())
    assert list(data["servers"]) == (["old", "new"] if "old" in servers else ["new"])
    assert data["chat"] == {"console": {}} and "# console only" in config.read_text()


def test_import_servers_refuses_duplicate_keys_in_its_input(tmp_path: Path) -> None:
    source = tmp_path / "claude.json"
    source.write_text('{"mcpServers": {"a": {"command": "x"}, "a": {"command": "y"}}}')
    done = cli("import-servers", str(source), tmp=tmp_path)
    assert done.returncode == 2 and "not valid JSON" in done.stderr and "Traceback" not in done.stderr


# 6. Secrets in args become ${VAR}.

def test_import_servers_turns_secrets_in_args_into_variables(tmp_path: Path) -> None:
    source = tmp_path / "claude.json"
    source.write_text(json.dumps({"mcpServers": {
        **CLAUDE["mcpServers"], "web": {"url": "https://u:pw-secret-1@x.example/mcp?access_token=qq12345&x=1"}}}))
    done = cli("import-servers", str(source), tmp=tmp_path)
    assert done.returncode == 0, done.stderr
    for secret in ("hunter2pass", "abcd1234secret", "sk-live-zzzzzzzz", "ghp_0123456789abcdef", "pw-secret-1",
                   "qq12345"):
        assert secret not in done.stdout + done.stderr
    servers = yaml.safe_load(done.stdout)["servers"]
    assert servers["db"]["args"] == ["pg-mcp", "postgresql://admin:${DB_PASSWORD}@db:5432/x", "--token=${DB_TOKEN}",
                                     "--api-key", "${DB_API_KEY}", "--verbose"]
    assert servers["web"]["url"] == "https://u:${WEB_PASSWORD}@x.example/mcp?access_token=${WEB_ACCESS_TOKEN}&x=1"
    for name in ("DB_PASSWORD", "DB_TOKEN", "DB_API_KEY", "WEB_PASSWORD", "WEB_ACCESS_TOKEN"):
        assert f"  {name}  " in done.stderr or f"  {name} " in done.stderr
    assert "looks like it holds a secret" not in done.stderr


# 9. An unquoted protocol date.

def test_an_unquoted_protocol_date_is_the_era(tmp_path: Path) -> None:
    config = tmp_path / "bridge.yaml"
    config.write_text(f"store: {tmp_path}/s.db\nservers:\n  e:\n    command: echo\n    protocol: 2026-07-28\n"
                      "chat: {console: {}}\n")
    done = cli("check-config", str(config), tmp=tmp_path)
    assert done.returncode == 0, done.stderr
    assert load(config).servers["e"].protocol == "2026-07-28"


# 2. check-config runs run's checks.

PG = "store: 'postgresql://u@127.0.0.1:1/x'\nservers: {e: {command: echo}}\nchat: {console: {}}\n"
OPENAI = "store: '{tmp}/s.db'\nllm: {provider: openai, model: m, api_key: k}\nservers: {e: {command: echo}}\n" \
         "chat: {console: {}}\n"
TOKEN_STORE = "store: '{tmp}/s.db'\nsecrets_key_env: TOKEN_KEY_NOT_SET_HERE\n" \
              "servers: {e: {url: 'https://e.example/mcp', auth: {client_id: x}}}\nchat: {console: {}}\n"


@pytest.mark.parametrize(("text", "missing", "expect"), [
    (PG, ("psycopg", "psycopg_pool"), "store: a Postgres store needs psycopg, which is not installed: install the "
                                      "bridge with its postgres extra"),
    (OPENAI, ("openai",), "llm.provider: openai needs its SDK, which is not installed: install the bridge with its "
                          "llm extra"),
    (TOKEN_STORE, (), "servers.e.auth: its OAuth tokens are kept encrypted in the token store, but the environment "
                      "variable TOKEN_KEY_NOT_SET_HERE (the key) is not set"),
], ids=["postgres-without-psycopg", "openai-without-the-extra", "token-store-without-its-key"])
@pytest.mark.parametrize("command", ["check-config", "run"])
def test_check_config_refuses_what_run_refuses(tmp_path: Path, text: str, missing: tuple[str, ...], expect: str,
                                               command: str) -> None:
    config = tmp_path / "bridge.yaml"
    config.write_text(text.replace("{tmp}", str(tmp_path)))
    done = cli(command, "-c", str(config), tmp=tmp_path, missing=missing)
    assert done.returncode == 2, done.stderr
    lines = errors(done)
    assert len(lines) == 1 and expect in lines[0], done.stderr
    assert "Traceback" not in done.stderr


# 3. Error texts name variables.

def test_the_redactor_keeps_the_names_of_key_variables() -> None:
    config = from_mapping({"secrets_key_env": "MCP_BRIDGE_TOKEN_KEY", "token_store": "/tmp/t.db",
                           "servers": {"e": {"url": "https://e.example/mcp",
                                             "auth": {"key_env": "OTHER_TOKEN_KEY"}}}},
                          env={})
    message = "MCP_BRIDGE_TOKEN_KEY: the token encryption key is not set; OTHER_TOKEN_KEY too"
    assert config.redactor.redact(message) == message
    with_value = from_mapping({"secrets_key_env": "${KEY_VAR}"}, env={"KEY_VAR": "NAME_FROM_ENV_TOO"})
    assert "NAME_FROM_ENV_TOO" not in with_value.redactor.redact("NAME_FROM_ENV_TOO")  # from the environment: secret


# 11. -c everywhere, help everywhere, options before or after the command.

def test_check_config_takes_c_like_every_command(tmp_path: Path) -> None:
    config = tmp_path / "bridge.yaml"
    config.write_text(f"store: {tmp_path}/s.db\nservers: {{e: {{command: echo}}}}\nchat: {{console: {{}}}}\n")
    for argv in (["check-config", "-c", str(config)], ["check-config", "--config", str(config)],
                 ["check-config", str(config)]):
        done = cli(*argv, tmp=tmp_path)
        assert done.returncode == 0 and "OK (1 server" in done.stdout, (argv, done.stderr)
    neither = cli("check-config", tmp=tmp_path)
    assert neither.returncode == 2 and "give the config file" in neither.stderr, neither.stderr


def test_global_options_are_accepted_after_the_command(tmp_path: Path) -> None:
    config = tmp_path / "bridge.yaml"
    config.write_text(f"store: {tmp_path}/s.db\nservers: {{e: {{command: echo}}}}\nchat: {{console: {{}}}}\n")
    done = cli("check-config", "-c", str(config), "--log-level", "debug", "--log-json", tmp=tmp_path)
    assert done.returncode == 0, done.stderr
    after = cli("audit", "--store", str(tmp_path / "none.db"), "--log-level", "error", tmp=tmp_path)
    assert "unrecognized arguments" not in after.stderr and "does not exist" in after.stderr


def test_every_option_and_command_has_help(tmp_path: Path) -> None:
    top = cli("--help", tmp=tmp_path)
    commands = ["run", "demo", "call", "tools", "check-config", "import-servers", "schema", "audit"]
    for command in commands:
        assert f"    {command} " in top.stdout, top.stdout
    from bridge.cli.entry import parser

    def undocumented(p: object) -> list[str]:
        import argparse

        assert isinstance(p, argparse.ArgumentParser)
        found = [f"{p.prog} {a.option_strings or a.dest}" for a in p._actions
                 if a.help is None and not isinstance(a, argparse._SubParsersAction)]
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                helped = {c.dest for c in action._choices_actions if c.help}
                found += [f"{p.prog} {name}: no description" for name in action.choices if name not in helped]
                for child in action.choices.values():
                    found += undocumented(child)
        return found

    assert undocumented(parser()) == []


# 4. A dead stdio server's last output.

DIES = """\
import os, sys
print("connecting with token " + os.environ.get("API_TOKEN", "(none)"), file=sys.stderr)
print("fatal: DATABASE_URL is not set; cannot start", file=sys.stderr)
sys.exit(3)
"""


def test_call_shows_why_a_stdio_server_died_with_secrets_redacted(tmp_path: Path) -> None:
    script = tmp_path / "dies.py"
    script.write_text(DIES)
    config = tmp_path / "bridge.yaml"
    config.write_text(yaml.safe_dump({"servers": {"db": {"command": sys.executable, "args": [str(script)],
                                                         "env": {"API_TOKEN": "${API_TOKEN}"}}}}))
    done = cli("call", "-c", str(config), "db", "query", tmp=tmp_path, env={"API_TOKEN": "tok-4f1e9a77c2"})
    assert done.returncode == 2, done.stderr
    assert "fatal: DATABASE_URL is not set; cannot start" in done.stderr
    assert "Its last output:" in done.stderr and "tok-4f1e9a77c2" not in done.stderr
    assert "connecting with token [redacted]" in done.stderr
    bare = cli("call", "--stdio", f"{sys.executable} {script}", "query", tmp=tmp_path)
    assert bare.returncode == 2 and "fatal: DATABASE_URL is not set" in bare.stderr, bare.stderr
    assert "Traceback" not in done.stderr + bare.stderr


# 5. Ctrl-C during a running call.

COUNT_DOWN = '{"steps": 200, "seconds": 0.5}'


def interrupted_at_progress(argv: list[str], tmp: Path, stdin: str = "") -> tuple[str, int]:
    """Run the command, send SIGINT once the call shows progress, and return everything it printed and its code."""
    proc = subprocess.Popen([sys.executable, "-m", "bridge.cli", *argv], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "XDG_STATE_HOME": str(tmp / "state")})
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(stdin)
    proc.stdin.flush()
    seen: list[str] = []
    try:
        while "to go" not in (line := proc.stdout.readline()):  # blocks until the call reports progress
            assert line, "".join(seen)
            seen.append(line)
        seen.append(line)
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=patient(60))
    finally:
        proc.kill()
        proc.wait()
    return "".join(seen) + rest, proc.returncode


def test_ctrl_c_during_call_says_interrupted_and_exits_130(tmp_path: Path) -> None:
    output, code = interrupted_at_progress(
        ["call", "--stdio", f"{sys.executable} -m bridge.cli.demo.server", "count_down", COUNT_DOWN], tmp_path)
    assert code == 130, output
    assert "server.count_down: interrupted" in output and ": done" not in output
    assert output.rstrip().endswith("interrupted (Ctrl-C)") and "Traceback" not in output


def test_ctrl_c_during_a_console_call_says_interrupted_and_exits_130(tmp_path: Path) -> None:
    output, code = interrupted_at_progress(["demo"], tmp_path, f"!mcp call demo count_down {COUNT_DOWN}\n")
    assert code == 130, output
    assert "demo.count_down: interrupted" in output and ": done" not in output
    assert "interrupted (Ctrl-C)" in output and "Traceback" not in output

"""`import-servers`: every file shape other hosts write, turned into a block that holds no secret.

Each case runs the real command (`main`), checks that no secret value reaches stdout or stderr, that the block is a
valid config once the named variables are set, and what the person is told.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from bridge.cli.entry import main
from bridge.cli.importing import convert
from bridge.config.file import from_mapping
from bridge.errors import ConfigError

SECRETS = ("ghp_SECRET1", "cur_SECRET2", "vs_SECRET3", "ws_SECRET4", "pw_SECRET5", "k1_SECRET6", "k2_SECRET7")

VSCODE_MCP_JSON = """{
  // .vscode/mcp.json: comments, trailing commas, inputs
  "inputs": [
    {"type": "promptString", "id": "gh-token", "description": "GitHub token", "password": true,},
  ],
  "servers": {
    "github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/",
               "headers": {"Authorization": "Bearer ${input:gh-token}"}},
    "local": {
      "type": "stdio", "command": "node", "args": ["${workspaceFolder}/server.js", "--home", "${userHome}"],
      "env": {"API_KEY": "vs_SECRET3", "HOME_DIR": "${env:HOME}"},
      "envFile": "${workspaceFolder}/.env",  /* not carried over */
    },
    "legacy": {"type": "sse", "url": "https://old.example.com/sse"},
  },
}"""


def run_import(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> tuple[dict[str, Any], str]:
    path = tmp_path / "mcp.json"
    path.write_text(text)
    assert main(["import-servers", str(path)]) == 0
    out, err = capsys.readouterr()
    for secret in SECRETS:
        assert secret not in out and secret not in err
    block = yaml.safe_load(out)
    names = [line.split()[0] for line in err.split("before `run`", 1)[-1].splitlines()[1:] if line.strip()]
    from_mapping(block, dict.fromkeys(names, "set"))  # valid once the named variables are set
    return block["servers"], err


def test_claude_desktop_env_values_become_references(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    servers, err = run_import(tmp_path, capsys, json.dumps({"mcpServers": {
        "github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"],
                   "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_SECRET1"}},
        "db": {"command": "pg-mcp", "env": {"DB_PASSWORD": "pw_SECRET5"}, "disabled": True}}}))
    assert servers == {
        "github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"],
                   "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_PERSONAL_ACCESS_TOKEN}"}},
        "db": {"command": "pg-mcp", "env": {"DB_PASSWORD": "${DB_PASSWORD}"}, "disabled": True}}
    assert "  GITHUB_PERSONAL_ACCESS_TOKEN  servers.github.env.GITHUB_PERSONAL_ACCESS_TOKEN" in err
    assert "DB_PASSWORD" in err and "warning" not in err


def test_cursor_headers_keep_the_scheme_and_name_the_variable(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    servers, err = run_import(tmp_path, capsys, json.dumps({"mcpServers": {
        "remote": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer cur_SECRET2",
                                                                     "X-Team": "blue"}},
        "files": {"command": "npx", "args": ["fs", "${env:HOME}/docs"], "envFile": "/home/me/.env"}}}))
    assert servers["remote"] == {"url": "https://mcp.example.com/mcp",
                                 "headers": {"Authorization": "Bearer ${REMOTE_TOKEN}", "X-Team": "${REMOTE_X_TEAM}"}}
    assert servers["files"] == {"command": "npx", "args": ["fs", "${HOME}/docs"]}
    assert "warning: servers.files.envFile: not carried over" in err
    assert "REMOTE_TOKEN" in err and "REMOTE_X_TEAM" in err


def test_vscode_jsonc_with_inputs_env_and_sse(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    servers, err = run_import(tmp_path, capsys, VSCODE_MCP_JSON)
    assert servers["github"] == {"url": "https://api.githubcopilot.com/mcp/",
                                 "headers": {"Authorization": "Bearer ${GH_TOKEN}"}}
    assert servers["local"] == {"command": "node", "args": ["${WORKSPACE_FOLDER}/server.js", "--home", "${HOME}"],
                                "env": {"API_KEY": "${API_KEY}", "HOME_DIR": "${HOME}"}}
    assert servers["legacy"] == {"url": "https://old.example.com/sse", "disabled": True}
    assert "GH_TOKEN" in err and "VS Code input 'gh-token': GitHub token" in err
    assert "warning: servers.legacy: uses the SSE transport" in err
    assert "warning: servers.local.envFile: not carried over" in err
    assert "${input:" not in yaml.safe_dump(servers) and "${env:" not in yaml.safe_dump(servers)


def test_vscode_settings_json_mcp_block(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings = """{
      "editor.fontSize": 14, // other settings around it
      "mcp": {
        "inputs": [{"type": "promptString", "id": "key", "password": true}],
        "servers": {"search": {"command": "search-mcp", "env": {"SEARCH_KEY": "${input:key}"}},},
      },
    }"""
    servers, err = run_import(tmp_path, capsys, settings)
    assert servers == {"search": {"command": "search-mcp", "env": {"SEARCH_KEY": "${KEY}"}}}
    assert "KEY" in err and "VS Code input 'key'" in err


def test_windsurf_server_url_collisions_and_secret_looking_args(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    servers, err = run_import(tmp_path, capsys, json.dumps({"mcpServers": {
        "ws": {"serverUrl": "https://ws.example.com/mcp", "headers": {"X-Api-Key": "ws_SECRET4"}},
        "one": {"command": "a", "env": {"API_KEY": "k1_SECRET6"}},
        "two": {"command": "b", "env": {"API_KEY": "k2_SECRET7"}, "args": ["postgres://u:pw@db/x"],
                "alwaysAllow": ["read_file"], "timeout": 60}}}))
    assert servers["ws"] == {"url": "https://ws.example.com/mcp", "headers": {"X-Api-Key": "${WS_X_API_KEY}"}}
    assert servers["one"]["env"] == {"API_KEY": "${API_KEY}"}
    assert servers["two"]["env"] == {"API_KEY": "${TWO_API_KEY}"}  # same name, another value: its own variable
    assert servers["two"]["tools"] == {"approve": {"read_file": "never"}}
    assert servers["two"]["args"] == ["postgres://u:${TWO_PASSWORD}@db/x"]  # the password stays in the file
    assert "TWO_PASSWORD  servers.two.args[0]" in err
    assert "warning: servers.two.timeout: ignored" in err


def test_what_cannot_be_imported_is_refused_with_the_path() -> None:
    with pytest.raises(ConfigError, match=r"servers\.x: needs either command or url"):
        convert({"mcpServers": {"x": {}}})
    with pytest.raises(ConfigError, match="must be an object of servers"):
        convert({"mcpServers": [1]})
    renamed = convert({"servers": {"a/b": {"command": "x"}}})
    assert list(renamed.servers) == ["a-b"] and "renamed to 'a-b'" in renamed.warnings[0]

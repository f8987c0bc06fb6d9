"""Config: one YAML file, errors that name the path, ${VAR} from the environment, the mcpServers importer."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bridge.cli.entry import main
from bridge.config.file import from_mapping, load, schema
from bridge.errors import ConfigError


def problems(raw: object, env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as info:
        from_mapping(raw, env or {})
    return info.value.problems


def test_a_full_config_loads_with_defaults(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({
        "servers": {"github": {"url": "https://api.example.com/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"},
                               "elicitation": {"timeout": "2m"}},
                    "fs": {"command": "npx", "args": ["-y", "fs"], "scope": "shared", "protocol": "legacy"}},
        "chat": {"console": {}}, "sessions": {"idle_timeout": "45s"}}))
    config = load(path, env={"TOKEN": "t0k"})
    assert config.servers["github"].headers == {"Authorization": "Bearer t0k"}
    assert config.servers["github"].elicitation_timeout == 120
    assert config.servers["github"].protocol == "auto" and config.servers["github"].scope == "auto"
    assert config.servers["fs"].scope == "shared" and config.servers["fs"].protocol == "legacy"
    assert config.idle_timeout == 45 and config.conversation_scope == "thread"
    assert config.store == "./mcp-chat-bridge.db"


def test_errors_name_the_path_and_the_problem() -> None:
    found = problems({"servers": {"github": {"args": ["x"]}, "x": {"command": "a", "protocol": "2024"}},
                      "conversation_scope": "room", "chat": {"slack": {"bot_token": "xoxb"}}, "bogus": 1})
    assert "servers.github: needs either command or url" in found
    assert "servers.x.protocol: must be one of auto, legacy, 2026-07-28" in found
    assert "conversation_scope: must be one of thread, channel, user" in found
    assert "(top): unknown key bogus" in found
    assert "chat.slack: Socket Mode needs app_token (or set mode: http with signing_secret)" in found


def test_a_missing_environment_variable_is_named_without_leaking_values() -> None:
    found = problems({"servers": {"a": {"url": "https://x/mcp", "headers": {"Authorization": "Bearer ${NOPE}"}}}})
    assert found == ["servers.a.headers.Authorization: environment variable NOPE is not set"]
    found = problems({"servers": {"a": {"command": "x", "elicitation": {"timeout": "${SECRET}"}}}},
                     {"SECRET": "hunter2-secret"})
    assert all("hunter2" not in p for p in found)


def test_check_config_prints_problems_and_exits_non_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("servers:\n  github: {}\n")
    assert main(["check-config", str(bad)]) == 2
    assert "servers.github: needs either command or url" in capsys.readouterr().err
    good = tmp_path / "good.yaml"
    good.write_text("servers:\n  e: {command: echo}\nchat: {console: {}}\n")
    assert main(["check-config", str(good)]) == 0
    assert "OK (1 server," in capsys.readouterr().out


def test_the_shipped_schema_documents_every_server_key() -> None:
    server = schema()["$defs"]["server"]["properties"]
    for key in ("command", "args", "env", "cwd", "url", "headers", "protocol", "scope", "title", "approvers",
                "elicitation"):
        assert key in server


def test_values_are_never_echoed_even_inside_lists() -> None:
    found = problems({"servers": {"gh": {"url": "https://x/mcp", "headers": {"Authorization": ["Bearer SUPERSECRET"]}}},
                      "llm": {"api_key": {"k": "sk-SUPERSECRET"}}})
    assert found == ["llm.api_key: must be of type string",
                     "servers.gh.headers.Authorization: must be of type string"]


def test_a_server_s_interrupted_rounds_are_told_unless_it_opts_into_resending() -> None:
    servers = {"a": {"url": "https://a.example/mcp"}, "b": {"url": "https://b.example/mcp", "on_interrupt": "resend"}}
    config = from_mapping({"servers": servers, "chat": {"console": {}}}, {})
    assert config.servers["a"].on_interrupt == "tell" and config.servers["b"].on_interrupt == "resend"
    found = problems({"servers": {"c": {"url": "https://c.example/mcp", "on_interrupt": "twice"}},
                      "chat": {"console": {}}})
    assert any(p.startswith("servers.c.on_interrupt") for p in found), found

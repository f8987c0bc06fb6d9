"""Configuration: one YAML file, `${VAR}` from the environment, validated against the shipped JSON Schema.

Errors name the path and the problem (`servers.github: needs either command or url`), all of them at once, so a
person fixes the file in one go. Secrets come from the environment and stay out of error messages.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from jsonschema import Draft202012Validator

from bridge.errors import ConfigError
from bridge.model import ConversationScope

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_DURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s|m|h|d)?\s*$")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}

Protocol = Literal["auto", "legacy", "2026-07-28"]


def schema() -> dict[str, Any]:
    """The JSON Schema of the config file (also shipped as bridge/config.schema.json for editors)."""
    data: dict[str, Any] = json.loads(resources.files("bridge").joinpath("config.schema.json").read_text("utf-8"))
    return data


def parse_duration(value: Any) -> float:
    """Seconds from a number or a string like `90s`, `10m`, `2h`."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    match = _DURATION.match(str(value))
    if not match:
        raise ValueError("not a duration (use a number of seconds or 30s, 10m, 2h)")
    return float(match.group(1)) * _UNITS[match.group(2)]


@dataclass(frozen=True, slots=True)
class SamplingPolicy:
    approval: Literal["ask", "auto", "deny"] = "ask"
    review: bool = True
    max_tokens: int | None = None
    rate_per_minute: int | None = None
    models: tuple[str, ...] = ()
    timeout: float = 600.0


@dataclass(frozen=True, slots=True)
class RootsPolicy:
    approval: Literal["ask", "auto", "deny"] = "ask"
    defaults: tuple[tuple[str, str], ...] = ()
    timeout: float = 600.0


@dataclass(frozen=True, slots=True)
class ServerConfig:
    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, repr=False)  # may hold secrets: never in a repr or log
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    protocol: Protocol = "auto"
    scope: Literal["conversation", "shared"] = "conversation"
    title: str = ""
    approvers: tuple[str, ...] = ()
    disabled: bool = False
    elicitation_enabled: bool = True
    elicitation_timeout: float = 600.0
    sampling: SamplingPolicy = SamplingPolicy()
    roots: RootsPolicy = RootsPolicy()
    tool_rules: tuple[tuple[str, Literal["always", "never"]], ...] = ()
    tool_timeout: float = 600.0
    log_level: str = "warning"
    inprocess: Any = None
    """An in-process server object (an `mcp.server.MCPServer`), used by the demo and tests instead of a command."""


@dataclass(frozen=True, slots=True)
class HttpConfig:
    """The bridge's one HTTP server (health, metrics, OAuth callback, web forms); off when `listen` is empty."""

    listen: str = ""
    public_url: str = ""
    """The address people's browsers reach the server at (behind a proxy); links in chat are built from it."""
    form_link_lifetime: float = 900.0
    """How long a one-time web-form link works at most (it also ends with its card)."""
    form_link_secret: str = field(default="", repr=False)
    """Key that signs web-form links (from the environment); empty: a random key per run (links end at a restart)."""


@dataclass(frozen=True, slots=True)
class LLMConfig:
    provider: Literal["openai", "anthropic", "human"] = "human"
    model: str | None = None
    api_key: str | None = field(default=None, repr=False)
    base_url: str | None = None
    timeout: float = 60.0


@dataclass(frozen=True, slots=True)
class Config:
    servers: Mapping[str, ServerConfig] = field(default_factory=dict)
    store: str = field(default="./mcp-chat-bridge.db", repr=False)
    """A SQLite file, `:memory:`, or a `postgresql://` URL (which may hold a password: never logged)."""
    retention: float = 90 * 86400.0
    """Seconds finished cards are kept before they are pruned."""
    worker_lease: float = 60.0
    """Seconds a worker counts as alive on a shared store without a heartbeat."""
    conversation_scope: ConversationScope = "thread"
    idle_timeout: float = 1800.0
    max_sessions: int = 200
    llm: LLMConfig = LLMConfig()
    agent_max_rounds: int = 8
    agent_system_prompt: str = ""
    http: HttpConfig = HttpConfig()
    chat: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """One raw block per adapter (`console`, `slack`, `matrix`), validated by the schema; adapters read their own."""


def load(path: str | Path, env: Mapping[str, str] | None = None) -> Config:
    """Read, substitute, validate and build a config. Raises ConfigError listing every problem."""
    try:
        text = Path(path).read_text("utf-8")
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read: {exc.strerror}"]) from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError([f"{path}: not valid YAML: {exc}"]) from None
    return from_mapping(raw if raw is not None else {}, env)


def from_mapping(raw: Any, env: Mapping[str, str] | None = None) -> Config:
    problems: list[str] = []
    data = _substitute(raw, os.environ if env is None else env, "", problems)
    if not isinstance(data, dict):
        raise ConfigError(["(top): the config must be a mapping"])
    validator = Draft202012Validator(schema())
    for error in sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path))):
        problems.append(f"{_path(error.absolute_path)}: {_message(error)}")
    for name, server in (data.get("servers") or {}).items():
        if not isinstance(server, dict):
            continue
        where = f"servers.{name}"
        if not server.get("command") and not server.get("url"):
            problems.append(f"{where}: needs either command or url")
        if server.get("command") and server.get("url"):
            problems.append(f"{where}: has both command and url; a server is either stdio or HTTP")
        if "/" in name or not name:
            problems.append(f"{where}: server names may not contain '/'")
        for key in ("elicitation", "sampling", "roots", "tools"):
            block = server.get(key) or {}
            if isinstance(block, dict) and "timeout" in block:
                try:
                    parse_duration(block["timeout"])
                except ValueError as exc:
                    problems.append(f"{where}.{key}.timeout: {exc}")
    slack = (data.get("chat") or {}).get("slack")
    if isinstance(slack, dict):
        if slack.get("mode", "socket") == "socket" and not slack.get("app_token"):
            problems.append("chat.slack: Socket Mode needs app_token (or set mode: http with signing_secret)")
        if slack.get("mode") == "http" and not slack.get("signing_secret"):
            problems.append("chat.slack: mode http needs signing_secret")
    matrix = (data.get("chat") or {}).get("matrix")
    if isinstance(matrix, dict) and not (matrix.get("password") or matrix.get("access_token")):
        problems.append("chat.matrix: needs password (first login) or access_token")
    if problems:
        raise ConfigError(problems)
    return _build(data)


def _build(data: dict[str, Any]) -> Config:
    servers = {name: _server(name, s) for name, s in (data.get("servers") or {}).items()}
    sessions = data.get("sessions") or {}
    llm = data.get("llm") or {}
    agent = data.get("agent") or {}
    return Config(
        servers=servers,
        store=data.get("store", "./mcp-chat-bridge.db"),
        retention=parse_duration(data.get("retention", "90d")),
        worker_lease=parse_duration((data.get("workers") or {}).get("lease", "60s")),
        conversation_scope=data.get("conversation_scope", "thread"),
        idle_timeout=parse_duration(sessions.get("idle_timeout", "30m")),
        max_sessions=int(sessions.get("max_sessions", 200)),
        llm=LLMConfig(provider=llm.get("provider", "human"), model=llm.get("model"), api_key=llm.get("api_key"),
                      base_url=llm.get("base_url"), timeout=parse_duration(llm.get("timeout", 60))),
        agent_max_rounds=int(agent.get("max_rounds", 8)),
        agent_system_prompt=str(agent.get("system_prompt", "")),
        http=_http(data.get("http") or {}),
        chat=dict(data.get("chat") or {}),
    )


def _http(h: dict[str, Any]) -> HttpConfig:
    return HttpConfig(listen=str(h.get("listen", "")), public_url=str(h.get("public_url", "")),
                      form_link_lifetime=parse_duration(h.get("form_link_lifetime", "15m")),
                      form_link_secret=str(h.get("form_link_secret", "")))


def _server(name: str, s: dict[str, Any]) -> ServerConfig:
    elicitation = s.get("elicitation") or {}
    sampling = s.get("sampling") or {}
    roots = s.get("roots") or {}
    tools = s.get("tools") or {}
    return ServerConfig(
        name=name, command=s.get("command"), args=tuple(s.get("args", ())), env=dict(s.get("env") or {}),
        cwd=s.get("cwd"), url=s.get("url"), headers=dict(s.get("headers") or {}), protocol=s.get("protocol", "auto"),
        scope=s.get("scope", "conversation"), title=s.get("title", ""), approvers=tuple(s.get("approvers", ())),
        disabled=bool(s.get("disabled", False)),
        elicitation_enabled=bool(elicitation.get("enabled", True)),
        elicitation_timeout=parse_duration(elicitation.get("timeout", "10m")),
        sampling=SamplingPolicy(
            approval=sampling.get("approval", "ask"), review=bool(sampling.get("review", True)),
            max_tokens=sampling.get("max_tokens"), rate_per_minute=sampling.get("rate_per_minute"),
            models=tuple(sampling.get("models", ())), timeout=parse_duration(sampling.get("timeout", "10m"))),
        roots=RootsPolicy(
            approval=roots.get("approval", "ask"),
            defaults=tuple((r["uri"], r.get("name", "")) for r in roots.get("defaults", ())),
            timeout=parse_duration(roots.get("timeout", "10m"))),
        tool_rules=tuple((str(k), v) for k, v in (tools.get("approve") or {}).items()),
        tool_timeout=parse_duration(tools.get("timeout", "10m")),
        log_level=(s.get("logging") or {}).get("level", "warning"),
    )


def _substitute(value: Any, env: Mapping[str, str], path: str, problems: list[str]) -> Any:
    if isinstance(value, str):
        def repl(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name in env:
                return env[name]
            if default is not None:
                return default
            problems.append(f"{path or '(top)'}: environment variable {name} is not set")
            return ""
        return _ENV.sub(repl, value)
    if isinstance(value, dict):
        return {k: _substitute(v, env, f"{path}.{k}" if path else str(k), problems) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, env, f"{path}[{i}]", problems) for i, v in enumerate(value)]
    return value


def _path(parts: Any) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top)"


def _message(error: Any) -> str:
    if error.validator == "additionalProperties":
        extra = re.findall(r"'([^']+)'", error.message.split("(")[-1])
        return f"unknown key {', '.join(extra) or error.message}" if extra else error.message
    if error.validator == "enum":
        return f"must be one of {', '.join(map(str, error.validator_value))}"
    if error.validator == "oneOf" and "duration" in str(error.schema.get("description", "")):
        return "must be a duration like 30s, 10m or 2h"
    if error.validator == "required":
        return str(error.message).replace("is a required property", "is required")
    # jsonschema's own messages quote the offending value, which may be a secret pasted in the wrong place.
    if error.validator == "type":
        expected = error.validator_value
        return f"must be of type {' or '.join(expected) if isinstance(expected, list) else expected}"
    if error.validator == "pattern":
        return f"does not match the pattern {error.validator_value}"
    if error.validator in ("minimum", "exclusiveMinimum", "maximum"):
        return f"is out of range ({error.validator} {error.validator_value})"
    if error.validator == "oneOf":
        return "is not a valid value here"
    return f"is not valid ({error.validator})"


def import_servers(mcp_servers_json: Mapping[str, Any]) -> str:
    """Turn a Claude/Cursor/VS Code style `mcpServers` JSON into our YAML `servers:` block."""
    servers = mcp_servers_json.get("mcpServers", mcp_servers_json.get("servers", mcp_servers_json))
    if not isinstance(servers, Mapping):
        raise ConfigError(["mcpServers: must be an object of servers"])
    out: dict[str, Any] = {}
    problems: list[str] = []
    for name, entry in servers.items():
        if not isinstance(entry, Mapping):
            problems.append(f"mcpServers.{name}: must be an object")
            continue
        item: dict[str, Any] = {}
        for key in ("command", "args", "env", "cwd", "url", "headers"):
            if key in entry:
                item[key] = entry[key]
        if "serverUrl" in entry and "url" not in item:
            item["url"] = entry["serverUrl"]
        if "disabled" in entry:
            item["disabled"] = bool(entry["disabled"])
        if not item.get("command") and not item.get("url"):
            problems.append(f"mcpServers.{name}: needs either command or url")
            continue
        out[str(name)] = item
    if problems:
        raise ConfigError(problems)
    return yaml.safe_dump({"servers": out}, sort_keys=False, allow_unicode=True)

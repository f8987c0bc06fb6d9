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

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_DURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s|m|h|d)?\s*$")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}

Protocol = Literal["auto", "legacy", "2026-07-28"]
Identity = Literal["shared", "per_user", "service", "none"]


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
class AuthConfig:
    """OAuth for a url server (`servers.<name>.auth`). Secrets are kept out of every repr."""

    identity: Identity = "shared"
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    token_endpoint_auth_method: Literal["client_secret_basic", "client_secret_post", "none"] | None = None
    private_key: str | None = field(default=None, repr=False)
    signing_algorithm: str = "RS256"
    issuer: str | None = None
    scopes: tuple[str, ...] = ()
    client_metadata_url: str | None = None
    client_name: str = "mcp-chat-bridge"
    redirect_uri: str | None = None
    key_env: str | None = None
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
    auth: AuthConfig = AuthConfig()
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
class LLMConfig:
    provider: Literal["openai", "anthropic", "human"] = "human"
    model: str | None = None
    api_key: str | None = field(default=None, repr=False)
    base_url: str | None = None
    timeout: float = 60.0


@dataclass(frozen=True, slots=True)
class Config:
    servers: Mapping[str, ServerConfig] = field(default_factory=dict)
    store: str = "./mcp-chat-bridge.db"
    secrets_key_env: str | None = None
    """The environment variable holding the key that encrypts stored OAuth tokens."""
    token_store: str | None = None
    """Where encrypted OAuth tokens are kept; None: beside `store` (in memory when that is `:memory:`)."""
    conversation_scope: Literal["thread", "channel", "user"] = "thread"
    idle_timeout: float = 1800.0
    max_sessions: int = 200
    llm: LLMConfig = LLMConfig()
    agent_max_rounds: int = 8
    agent_system_prompt: str = ""
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
        problems.extend(_auth_problems(where, server, data, env if env is not None else os.environ))
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
        secrets_key_env=data.get("secrets_key_env"),
        token_store=data.get("token_store") or default_token_store(data.get("store", "./mcp-chat-bridge.db")),
        conversation_scope=data.get("conversation_scope", "thread"),
        idle_timeout=parse_duration(sessions.get("idle_timeout", "30m")),
        max_sessions=int(sessions.get("max_sessions", 200)),
        llm=LLMConfig(provider=llm.get("provider", "human"), model=llm.get("model"), api_key=llm.get("api_key"),
                      base_url=llm.get("base_url"), timeout=parse_duration(llm.get("timeout", 60))),
        agent_max_rounds=int(agent.get("max_rounds", 8)),
        agent_system_prompt=str(agent.get("system_prompt", "")),
        chat=dict(data.get("chat") or {}),
    )


def _server(name: str, s: dict[str, Any]) -> ServerConfig:
    elicitation = s.get("elicitation") or {}
    sampling = s.get("sampling") or {}
    roots = s.get("roots") or {}
    tools = s.get("tools") or {}
    return ServerConfig(
        name=name, command=s.get("command"), args=tuple(s.get("args", ())), env=dict(s.get("env") or {}),
        cwd=s.get("cwd"), url=s.get("url"), headers=dict(s.get("headers") or {}), auth=_auth(s.get("auth") or {}),
        protocol=s.get("protocol", "auto"),
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


def default_token_store(store: str) -> str | None:
    """Beside the store: `./mcp-chat-bridge.db` keeps its tokens in `./mcp-chat-bridge.tokens.db`."""
    if store == ":memory:":
        return None
    path = Path(store)
    return str(path.with_name(f"{path.stem}.tokens.db"))


def _auth(a: dict[str, Any]) -> AuthConfig:
    return AuthConfig(
        identity=a.get("identity", "shared"), client_id=a.get("client_id"), client_secret=a.get("client_secret"),
        token_endpoint_auth_method=a.get("token_endpoint_auth_method"), private_key=a.get("private_key"),
        signing_algorithm=a.get("signing_algorithm", "RS256"), issuer=a.get("issuer"),
        scopes=tuple(a.get("scopes", ())), client_metadata_url=a.get("client_metadata_url"),
        client_name=a.get("client_name", "mcp-chat-bridge"), redirect_uri=a.get("redirect_uri"),
        key_env=a.get("key_env"), timeout=parse_duration(a.get("timeout", "10m")))


def _auth_problems(where: str, server: dict[str, Any], data: dict[str, Any], env: Mapping[str, str]) -> list[str]:
    """What an `auth:` block needs beyond its schema; never quotes a value (it may be a secret)."""
    auth = server.get("auth")
    if not isinstance(auth, dict):
        return []
    problems: list[str] = []
    if server.get("command") and not server.get("url"):
        problems.append(f"{where}.auth: OAuth is for url servers; a stdio server gets its credentials from env")
    identity = auth.get("identity", "shared")
    if identity == "service" and not auth.get("client_id"):
        problems.append(f"{where}.auth: identity service needs client_id")
    if identity == "service" and not (auth.get("client_secret") or auth.get("private_key")):
        problems.append(f"{where}.auth: identity service needs client_secret or private_key")
    if auth.get("client_secret") and auth.get("private_key"):
        problems.append(f"{where}.auth: give client_secret or private_key, not both")
    if identity == "per_user":
        key_env = auth.get("key_env") or data.get("secrets_key_env")
        if not key_env:
            problems.append(f"{where}.auth: per_user keeps each person's tokens, which must be encrypted: set "
                            "secrets_key_env (or auth.key_env) to the name of an environment variable holding a key")
        elif not env.get(key_env):
            problems.append(f"{where}.auth: per_user needs the token encryption key, but the environment variable "
                            f"{key_env} is not set")
    if "timeout" in auth:
        try:
            parse_duration(auth["timeout"])
        except ValueError as exc:
            problems.append(f"{where}.auth.timeout: {exc}")
    return problems


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

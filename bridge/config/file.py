"""Configuration: one YAML file, `${VAR}` from the environment, validated against the shipped JSON Schema.

Errors name the path and the problem (`servers.github: needs either command or url`), all of them at once, so a
person fixes the file in one go. Secrets come from the environment and stay out of error messages.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from jsonschema import Draft202012Validator

from bridge import DEFAULT_STORE
from bridge.config import approvers as approver_entries
from bridge.config import yaml_text
from bridge.config.auth import (
    AuthConfig,
    IdentityProviderConfig,
    auth_problems,
    build_auth,
    build_identity_provider,
    default_token_store,
)
from bridge.config.problems import error_message, error_path, substitute
from bridge.config.team import ApproverRule, BudgetLimits, ChannelPolicy, GrantScope, Group
from bridge.door.model import ConversationScope
from bridge.errors import ConfigError
from bridge.observe.tracing import TelemetryConfig, telemetry_config
from bridge.safety import limits
from bridge.safety.limits import Limits
from bridge.safety.receipts.keys import DEFAULT_ISSUER, ReceiptKeys, ReceiptSettings
from bridge.safety.redaction import Redactor
from bridge.safety.secret_names import looks_secret
from bridge.web.guard import ConnectionLimits

_DURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s|m|h|d)?\s*$")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}

ProtocolEra = Literal["auto", "legacy", "2026-07-28"]



def schema() -> dict[str, Any]:
    """The JSON Schema of the config file (also shipped as bridge/config/schema.json for editors)."""
    data: dict[str, Any] = json.loads(resources.files("bridge.config").joinpath("schema.json").read_text("utf-8"))
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
    approvers: ApproverRule | None = None
    grants: tuple[GrantScope, ...] = ()


@dataclass(frozen=True, slots=True)
class RootsPolicy:
    approval: Literal["ask", "auto", "deny"] = "ask"
    defaults: tuple[tuple[str, str], ...] = ()
    timeout: float = 600.0
    approvers: ApproverRule | None = None


@dataclass(frozen=True, slots=True)
class ServerConfig:
    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, repr=False)  # may hold secrets: never in a repr or log
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    auth: AuthConfig = field(default_factory=AuthConfig)
    protocol: ProtocolEra = "auto"
    scope: Literal["auto", "conversation", "shared"] = "auto"
    pool_size: int = 0
    """Pooled sessions at most (a 2026-07-28 server under `scope: auto`); 0: the `sessions.pool_size`."""
    title: str = ""
    approvers: ApproverRule = field(default_factory=ApproverRule)
    disabled: bool = False
    elicitation_enabled: bool = True
    elicitation_timeout: float = 600.0
    elicitation_approvers: ApproverRule | None = None
    sampling: SamplingPolicy = SamplingPolicy()
    roots: RootsPolicy = RootsPolicy()
    tool_rules: tuple[tuple[str, Literal["always", "never"]], ...] = ()
    tool_timeout: float = 600.0
    tool_approvers: tuple[tuple[str, ApproverRule], ...] = ()
    """Tool-name globs whose calls always ask these approvers (the first match wins, before `tools_approvers`)."""
    tools_approvers: ApproverRule | None = None
    tool_grants: tuple[GrantScope, ...] = ()
    log_level: str = "warning"
    prestart: bool = False  # spawned as `run` starts, for the first session to adopt (bridge.servers.prestart)
    on_interrupt: Literal["tell", "resend"] = "tell"
    """A 2026 round whose answers may have reached the server when its worker died: told, not sent again (`tell`),
    or sent again by the worker taking over, for servers whose tools are idempotent (`resend`)."""
    receipts: bool = True
    """Whether this server's approved requests carry signed receipts (when a receipt key is set)."""
    apps: bool | None = None
    """Whether the bridge offers this server the MCP Apps extension (`bridge.web.apps`); None: when it can show apps (an
    HTTP server with a public address)."""
    tasks: Literal["required", "prefer"] = "required"
    """Which tools run as tasks: those that require it, or also those that allow it (`prefer`)."""
    inprocess: Any = None
    """An in-process server object (an `mcp.server.MCPServer`), used by the demo and tests instead of a command."""

    def __post_init__(self) -> None:
        if not isinstance(self.approvers, ApproverRule):  # a plain list, as code written before rules passes it
            object.__setattr__(self, "approvers", ApproverRule(tuple(self.approvers)))


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
    app_sandbox_url: str = ""
    """Where browsers reach the same server under a second origin, for MCP Apps' sandbox (`bridge.web.apps`); empty: the
    public address with `localhost` and `127.0.0.1` swapped, when it is one of them."""
    app_link_lifetime: float = 3600.0
    """How long a link to an MCP App works at most."""
    connections: ConnectionLimits = field(default_factory=ConnectionLimits)
    """Deadlines and caps that shed slow and idle clients."""


@dataclass(frozen=True, slots=True)
class AuditConfig:
    """The audit log's checkpoints (`bridge.storage.checkpoints`); its keys come from the environment
    (`bridge.storage.audit_keys`)."""

    checkpoint_every: int = 100
    checkpoint_file: str | None = None


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
    store: str = field(default=DEFAULT_STORE, repr=False)
    """A SQLite file, `:memory:`, or a `postgresql://` URL (which may hold a password: never logged)."""
    secrets_key_env: str | None = None  # the environment variable with the key that encrypts stored OAuth tokens
    token_store: str | None = None  # where encrypted OAuth tokens are kept; None: in memory (with a `:memory:` store)
    identity_provider: IdentityProviderConfig | None = None
    """The company's OpenID Connect provider, for `enterprise` servers (`bridge.auth.company`)."""
    retention: float = 90 * 86400.0
    """Seconds finished cards are kept before they are pruned."""
    worker_lease: float = 60.0
    """Seconds a worker counts as alive on a shared store without a heartbeat."""
    conversation_scope: ConversationScope = "thread"
    idle_timeout: float = 1800.0
    max_sessions: int = 200
    pool_size: int = 4
    """Sessions a 2026-07-28 server's pool grows to at most, as calls run at once (`servers.<name>.pool_size`)."""
    llm: LLMConfig = LLMConfig()
    agent_max_rounds: int = 8
    agent_system_prompt: str = ""
    http: HttpConfig = HttpConfig()
    chat: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """One raw block per adapter (`console`, `slack`, `matrix`), validated by the schema; adapters read their own."""
    limits: Limits = field(default_factory=Limits)
    """Bounds that keep a shared host alive (`bridge.safety.limits`)."""
    redactor: Redactor = field(default_factory=Redactor, repr=False, compare=False)
    """Replaces every configured secret (`${VAR}` values, headers, server env, tokens) in logs and chat."""
    groups: Mapping[str, Group] = field(default_factory=dict)
    channels: Mapping[str, ChannelPolicy] = field(default_factory=dict)
    """Per-channel policy by `<platform>:<channel id>` (globs allowed: `slack:D*` is every Slack DM)."""
    budgets: BudgetLimits = field(default_factory=BudgetLimits)
    telemetry: TelemetryConfig = field(default_factory=TelemetryConfig)
    audit: AuditConfig = AuditConfig()
    receipts: ReceiptSettings = field(default_factory=ReceiptSettings, repr=False)
    """Signed receipts of decisions (`bridge.safety.receipts`): the key ring comes from the environment."""


def load(path: str | Path, env: Mapping[str, str] | None = None) -> Config:
    """Read, substitute, validate and build a config. Raises ConfigError listing every problem."""
    raw = yaml_text.read(path)
    return from_mapping(raw if raw is not None else {}, env)


def store_path(path: str | Path, env: Mapping[str, str] | None = None) -> str:
    """Only the `store:` of a config file: for readers of the store (`audit`), who need none of its secrets set."""
    value = _only(path, "store", DEFAULT_STORE, env)
    if not isinstance(value, str):
        raise ConfigError(["store: must be a string"])
    return value


def audit_config(path: str | Path, env: Mapping[str, str] | None = None) -> AuditConfig:
    """Only the `audit:` block of a config file (for `audit --verify`: where its checkpoints are)."""
    value = _only(path, "audit", {}, env)
    return _audit(value) if isinstance(value, dict) else AuditConfig()


def budgets_config(path: str | Path, env: Mapping[str, str] | None = None) -> BudgetLimits:
    """Only the `budgets:` block of a config file (for the operator's `usage`)."""
    value = _only(path, "budgets", {}, env)
    value = value if isinstance(value, dict) else {}
    return BudgetLimits(*((value.get(who) or {}).get("tokens_per_day") for who in ("per_user", "per_conversation")))


def _only(path: str | Path, key: str, default: Any, env: Mapping[str, str] | None) -> Any:
    raw = yaml_text.read(path) or {}
    problems: list[str] = []
    value = substitute(raw.get(key, default) if isinstance(raw, dict) else default,
                       os.environ if env is None else env, key, problems, set())
    if problems:
        raise ConfigError(problems)
    return value


def from_mapping(raw: Any, env: Mapping[str, str] | None = None) -> Config:
    problems: list[str] = []
    unset: set[str] = set()
    from_env: list[str] = []
    data = substitute(raw, os.environ if env is None else env, "", problems, unset, from_env)
    if not isinstance(data, dict):
        raise ConfigError(["(top): the config must be a mapping"])
    validator = Draft202012Validator(schema())
    for error in sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path))):
        where = error_path(error.absolute_path)
        if where not in unset:  # an unset variable is named as such, not again as a bad value
            problems.append(f"{where}: {error_message(error)}")
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
        problems.extend(auth_problems(where, server, data, os.environ if env is None else env))
    problems.extend(approver_entries.problems(data))
    for key in (data.get("channels") or {}):
        if ":" not in str(key):
            problems.append(f"channels.{key}: name a channel as <platform>:<channel id>, e.g. slack:C0123")
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
    config = _build(data)
    problems.extend(_team_problems(config))
    try:
        block = data.get("receipts") or {}
        config = replace(config, receipts=ReceiptSettings(
            ReceiptKeys.from_env(env), str(block.get("issuer", DEFAULT_ISSUER)),
            parse_duration(block.get("lifetime", "5m"))))
    except ConfigError as exc:
        problems.extend(exc.problems)
    if problems:
        raise ConfigError(problems)
    return replace(config, redactor=Redactor([*from_env, *secret_values(data)]))


def _team_problems(config: Config) -> list[str]:
    """Approver rules that can never be met, unknown groups and servers, and quorums the console cannot hold."""
    problems: list[str] = []
    for name, server in config.servers.items():
        rules: list[tuple[str, ApproverRule | None, bool]] = [
            ("approvers", server.approvers, True), ("tools.approvers", server.tools_approvers, True),
            ("sampling.approvers", server.sampling.approvers, True), ("roots.approvers", server.roots.approvers, False),
            ("elicitation.approvers", server.elicitation_approvers, False),
            *((f"tools.approve.{glob}.approvers", rule, True) for glob, rule in server.tool_approvers)]
        for where, rule, quorum_ok in rules:
            if rule is None:
                continue
            at = f"servers.{name}.{where}"
            problems.extend(f"{at}: there is no group {g!r} under groups" for g in rule.groups
                            if g not in config.groups)
            if rule.required > 1 and not quorum_ok:
                problems.append(f"{at}: one answer decides forms, links and roots; required must be 1")
            elif rule.required > len(rule.people) + (1 if rule.requester else 0) and not rule.groups:
                problems.append(f"{at}: required is {rule.required} but only {len(rule.people)} people are named")
            elif rule.required > 1 and "console" in config.chat:
                problems.append(f"{at}: the console has one person, so required {rule.required} can never be met "
                                "(chat.console is configured)")
    for key, channel in config.channels.items():
        problems.extend(f"channels.{key}.servers: there is no server {s!r}" for s in channel.servers or ()
                        if s not in config.servers)
    return problems


def secret_values(data: Any) -> list[str]:
    """Values that are secrets by their place, wherever they came from: every header and server env value (and the
    credential after a header's scheme, `Bearer <token>`), and any value whose key names a secret (`bot_token`,
    `api_key`, `password`, `signing_secret`, ...; `bridge.safety.secret_names` decides)."""
    out: list[str] = []

    def walk(node: Any, key: str, parent: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, str(k), key)
        elif isinstance(node, list):
            for v in node:
                walk(v, key, parent)
        elif isinstance(node, str) and (parent in ("env", "headers") or looks_secret(key)) and \
                not (parent not in ("env", "headers") and _names_a_variable(key)):
            out.append(node)
            if parent == "headers" and " " in node.strip():
                out.append(node.strip().rsplit(" ", 1)[1])

    walk(data, "", "")
    return out


def _names_a_variable(key: str) -> bool:
    """`secrets_key_env`, `auth.key_env`: the value is the name of a variable, which messages must be able to say."""
    return key == "key_env" or key.endswith("_key_env")


def _build(data: dict[str, Any]) -> Config:
    servers = {name: _server(name, s) for name, s in (data.get("servers") or {}).items()}
    sessions = data.get("sessions") or {}
    llm = data.get("llm") or {}
    agent = data.get("agent") or {}
    return Config(
        servers=servers,
        store=data.get("store", DEFAULT_STORE),
        secrets_key_env=data.get("secrets_key_env"),
        token_store=data.get("token_store") or default_token_store(data.get("store", DEFAULT_STORE)),
        identity_provider=build_identity_provider(data.get("identity_provider"), parse_duration),
        retention=parse_duration(data.get("retention", "90d")),
        worker_lease=parse_duration((data.get("workers") or {}).get("lease", "60s")),
        conversation_scope=data.get("conversation_scope", "thread"),
        idle_timeout=parse_duration(sessions.get("idle_timeout", "30m")),
        max_sessions=int(sessions.get("max_sessions", 200)),
        pool_size=int(sessions.get("pool_size", 4)),
        llm=LLMConfig(provider=llm.get("provider", "human"), model=llm.get("model"), api_key=llm.get("api_key"),
                      base_url=llm.get("base_url"), timeout=parse_duration(llm.get("timeout", 60))),
        agent_max_rounds=int(agent.get("max_rounds", 8)),
        agent_system_prompt=str(agent.get("system_prompt", "")),
        http=_http(data.get("http") or {}),
        chat=dict(data.get("chat") or {}),
        limits=limits.from_mapping(data.get("limits") or {}),
        groups={name: _group(g) for name, g in (data.get("groups") or {}).items()},
        channels={key: _channel(c) for key, c in (data.get("channels") or {}).items()},
        budgets=BudgetLimits(*(((data.get("budgets") or {}).get(who) or {}).get("tokens_per_day")
                               for who in ("per_user", "per_conversation"))),
        telemetry=telemetry_config(data.get("telemetry") or {}),
        audit=_audit(data.get("audit") or {}),
    )


def _audit(a: dict[str, Any]) -> AuditConfig:
    return AuditConfig(int(a.get("checkpoint_every", 100)), a.get("checkpoint_file"))


def _http(h: dict[str, Any]) -> HttpConfig:
    return HttpConfig(listen=str(h.get("listen", "")), public_url=str(h.get("public_url", "")),
                      form_link_lifetime=parse_duration(h.get("form_link_lifetime", "15m")),
                      form_link_secret=str(h.get("form_link_secret", "")), connections=connection_limits(h),
                      app_sandbox_url=str(h.get("app_sandbox_url", "")),
                      app_link_lifetime=parse_duration(h.get("app_link_lifetime", "1h")))


def connection_limits(h: Mapping[str, Any]) -> ConnectionLimits:
    """The connection limits of a listener's block (`http:`, `chat.slack.http:`); the schema checked their shape."""
    default = ConnectionLimits()
    return ConnectionLimits(
        idle_timeout=parse_duration(h.get("idle_timeout", default.idle_timeout)),
        read_timeout=parse_duration(h.get("read_timeout", default.read_timeout)),
        max_connections=int(h.get("max_connections", default.max_connections)),
        max_per_client=int(h.get("max_connections_per_client", default.max_per_client)))


def _rule(raw: Any) -> ApproverRule | None:
    """`approvers:` as a plain list (the requester decides too) or as `{people, groups, required, notify}`."""
    if raw is None:
        return None
    if isinstance(raw, list):
        return ApproverRule(tuple(map(str, raw)))
    return ApproverRule(tuple(map(str, raw.get("people", ()))), tuple(map(str, raw.get("groups", ()))),
                        int(raw.get("required", 1)), raw.get("notify", "thread"), bool(raw.get("requester", False)))


def _grants(raw: Any) -> tuple[GrantScope, ...]:
    scopes: list[GrantScope] = []
    for scope in ("conversation", "channel"):
        if scope in (raw or {}):
            ttl = raw[scope]
            scopes.append(GrantScope(scope, None if ttl == "until revoked" else parse_duration(ttl)))
    return tuple(scopes)


def _group(raw: Any) -> Group:
    if isinstance(raw, list):
        return Group(tuple(map(str, raw)))
    return Group(tuple(map(str, raw.get("people", ()))), str(raw.get("slack_usergroup", "")))


def _channel(raw: dict[str, Any]) -> ChannelPolicy:
    servers = raw.get("servers")
    rules = (raw.get("tools") or {}).get("approve") or {}
    return ChannelPolicy(tool_rules=tuple((str(k), v) for k, v in rules.items()),
                         servers=tuple(map(str, servers)) if servers is not None else None,
                         agent=raw.get("agent", "on") in ("on", True))


def _server(name: str, s: dict[str, Any]) -> ServerConfig:
    elicitation, sampling = s.get("elicitation") or {}, s.get("sampling") or {}
    roots, tools = s.get("roots") or {}, s.get("tools") or {}
    approve: dict[str, Any] = tools.get("approve") or {}
    return ServerConfig(
        name=name, command=s.get("command"), args=tuple(s.get("args", ())), env=dict(s.get("env") or {}),
        cwd=s.get("cwd"), url=s.get("url"), headers=dict(s.get("headers") or {}),
        auth=build_auth(s.get("auth") or {}, parse_duration), protocol=s.get("protocol", "auto"),
        scope=s.get("scope", "auto"), pool_size=int(s.get("pool_size", 0)), title=s.get("title", ""),
        approvers=_rule(s.get("approvers")) or ApproverRule(), disabled=bool(s.get("disabled", False)),
        elicitation_enabled=bool(elicitation.get("enabled", True)),
        elicitation_timeout=parse_duration(elicitation.get("timeout", "10m")),
        elicitation_approvers=_rule(elicitation.get("approvers")),
        sampling=SamplingPolicy(
            approval=sampling.get("approval", "ask"), review=bool(sampling.get("review", True)),
            max_tokens=sampling.get("max_tokens"), rate_per_minute=sampling.get("rate_per_minute"),
            models=tuple(sampling.get("models", ())), timeout=parse_duration(sampling.get("timeout", "10m")),
            approvers=_rule(sampling.get("approvers")), grants=_grants(sampling.get("grants"))),
        roots=RootsPolicy(
            approval=roots.get("approval", "ask"),
            defaults=tuple((r["uri"], r.get("name", "")) for r in roots.get("defaults", ())),
            timeout=parse_duration(roots.get("timeout", "10m")), approvers=_rule(roots.get("approvers"))),
        # A rule with approvers always asks, those people.
        tool_rules=tuple((str(k), "never" if v == "never" else "always") for k, v in approve.items()),
        tool_timeout=parse_duration(tools.get("timeout", "10m")),
        tool_approvers=tuple((str(k), rule) for k, v in approve.items()
                             if isinstance(v, dict) and (rule := _rule(v.get("approvers"))) is not None),
        tools_approvers=_rule(tools.get("approvers")), tool_grants=_grants(tools.get("grants")),
        log_level=(s.get("logging") or {}).get("level", "warning"), prestart=bool(s.get("prestart", False)),
        on_interrupt="resend" if s.get("on_interrupt") == "resend" else "tell",
        apps=None if s.get("apps") is None else bool(s.get("apps")),
        receipts=bool(s.get("receipts", True)),
        tasks="prefer" if s.get("tasks") == "prefer" else "required",
    )

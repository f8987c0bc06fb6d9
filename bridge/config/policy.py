"""Pure decisions: which tool calls need a person's approval, who decides a request, what a channel may use, and how
arguments are shown on a card."""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from mcp.types import ToolAnnotations

from bridge.config.file import Config, ServerConfig
from bridge.config.team import ApproverRule, ChannelPolicy
from bridge.door.model import ConversationKey, Kind
from bridge.safety.secret_names import looks_secret
from bridge.text.plain import shorten

MASK = "••••••"
MAX_VALUE = 300


def needs_approval(rules: Sequence[tuple[str, Literal["always", "never"]]], tool: str,
                   annotations: ToolAnnotations | None) -> bool:
    """The first rule whose glob matches the tool name decides; with none, a tool that declares itself destructive
    (and not read-only) asks. Annotations are the server's claims: rules are how a team overrides them."""
    by_rule = rule_verdict(rules, tool)
    if by_rule is not None:
        return by_rule
    if annotations is None:
        return False
    return annotations.destructive_hint is True and annotations.read_only_hint is not True


def rule_verdict(rules: Sequence[tuple[str, Literal["always", "never"]]], tool: str) -> bool | None:
    """Whether the configured rules alone decide that `tool` needs approval (True/False), or None when none matches
    and the tool's own annotations decide."""
    for pattern, verdict in rules:
        if fnmatch.fnmatchcase(tool, pattern):
            return verdict == "always"
    return None


QUORUM_KINDS = frozenset({Kind.TOOL, Kind.SAMPLING})
"""Where `required` counts: tool approvals and sampling approvals. Other requests go to the same people and one answer
decides (a form is someone's data, a review someone's edit)."""
NO_CHANNEL = ChannelPolicy()


def approver_rule(server: ServerConfig, kind: Kind, tool: str = "") -> ApproverRule:
    """The rule for one request: a tool's own rule (first matching glob), else the kind's, else the server's."""
    if kind is Kind.TOOL:
        for pattern, rule in server.tool_approvers:
            if fnmatch.fnmatchcase(tool, pattern):
                return rule
    # Asked for every card and every tool call: a chain of tests, not a table built per call.
    if kind is Kind.FORM or kind is Kind.URL:
        by_kind = server.elicitation_approvers
    elif kind is Kind.TOOL:
        by_kind = server.tools_approvers
    elif kind is Kind.ROOTS:
        by_kind = server.roots.approvers
    else:  # sampling and its review
        by_kind = server.sampling.approvers
    return by_kind or server.approvers


def channel_policy(config: Config, conversation: ConversationKey) -> ChannelPolicy:
    """The policy of the conversation's channel: its exact `<platform>:<channel>` entry, else the first glob that
    matches, else none (everything the servers allow)."""
    if not config.channels:
        return NO_CHANNEL  # asked on every call: most configs have no channel policies at all
    key = f"{conversation.platform}:{conversation.channel}"
    exact = config.channels.get(key)
    if exact is not None:
        return exact
    return next((p for pattern, p in config.channels.items() if fnmatch.fnmatchcase(key, pattern)), NO_CHANNEL)


def server_allowed(config: Config, conversation: ConversationKey, server: str) -> bool:
    allowed = channel_policy(config, conversation).servers
    return allowed is None or server in allowed


def tool_needs_approval(config: Config, conversation: ConversationKey, server: ServerConfig, tool: str,
                        annotations: ToolAnnotations | None) -> bool:
    """The channel's rules (on `tool` or `server.tool`) first, then the server's, then the annotations. A tool with
    approvers of its own, or whose rule needs several approvers, always asks: no channel rule widens those."""
    by_rule = configured_verdict(config, conversation, server, tool)
    return by_rule if by_rule is not None else needs_approval((), tool, annotations)


def configured_verdict(config: Config, conversation: ConversationKey, server: ServerConfig, tool: str) -> bool | None:
    """Whether the configuration alone (approver rules, the channel's rules, the server's) decides that `tool` needs
    approval, or None when none does and the tool's own annotations decide."""
    if server.tool_approvers and any(fnmatch.fnmatchcase(tool, pattern) for pattern, _ in server.tool_approvers):
        return True
    if approver_rule(server, Kind.TOOL, tool).required > 1:
        return True
    for pattern, verdict in channel_policy(config, conversation).tool_rules:
        if fnmatch.fnmatchcase(tool, pattern) or fnmatch.fnmatchcase(f"{server.name}.{tool}", pattern):
            return verdict == "always"
    return rule_verdict(server.tool_rules, tool)


def mask_arguments(arguments: Mapping[str, Any]) -> str:
    """Arguments as readable JSON for a card: secret-looking values masked, long values shortened."""
    return json.dumps(_mask(arguments), ensure_ascii=False, indent=1)


def _mask(value: Any, key: str = "") -> Any:
    if key and looks_secret(key) and not isinstance(value, dict | list):
        return MASK
    if isinstance(value, Mapping):
        return {str(k): _mask(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v, key) for v in value[:50]] + (["…"] if len(value) > 50 else [])
    if isinstance(value, str):
        return shorten(value, MAX_VALUE)
    return value

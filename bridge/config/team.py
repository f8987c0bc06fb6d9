"""The config values of team decisions (pure): approver rules and groups, grant scopes, channel policy, budgets.

`bridge.config` reads them from the file and validates them; `bridge.config.policy` picks the rule that applies to a
request; the broker's `bridge.cards.recipients` expands groups and reaches approvers; `bridge.requests.grants` and
`bridge.requests.budgets` enforce the rest. Identities are actor keys, `platform:user_id`, everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bridge.door.model import Notify

GrantScopeName = Literal["conversation", "channel"]


@dataclass(frozen=True, slots=True)
class ApproverRule:
    """Who decides a request and how many of them must approve.

    The plain list form of the config (`approvers: [slack:U1]`) is `people` with `requester` true: the person who
    asked decides too, as before. The object form (`{people, groups, required, notify}`) names the deciders exactly;
    `requester: true` lets the person who asked count as one of them.
    """

    people: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    required: int = 1
    notify: Notify = "thread"
    requester: bool = True

    @property
    def configured(self) -> bool:
        return bool(self.people or self.groups)


@dataclass(frozen=True, slots=True)
class Group:
    """A named list of people (actor keys), optionally with the members of a Slack user group (`S…`) added."""

    people: tuple[str, ...] = ()
    slack_usergroup: str = ""


@dataclass(frozen=True, slots=True)
class GrantScope:
    """A scope "Allow for …" may offer: `conversation` or `channel`, for `ttl` seconds or (None) until revoked."""

    scope: GrantScopeName
    ttl: float | None

    def label(self) -> str:
        where = "in this conversation" if self.scope == "conversation" else "in this channel"
        return f"Allow {where} " + ("until revoked" if self.ttl is None else f"for {duration_text(self.ttl)}")


@dataclass(frozen=True, slots=True)
class ChannelPolicy:
    """What one channel (`<platform>:<channel id>`, globs allowed) may use: its own tool approval rules (checked
    before the servers'), the servers it sees (None: all), and whether the agent answers there."""

    tool_rules: tuple[tuple[str, Literal["always", "never"]], ...] = ()
    servers: tuple[str, ...] | None = None
    agent: bool = True


@dataclass(frozen=True, slots=True)
class BudgetLimits:
    """Daily token limits (UTC days) for the agent and sampling together; None means no limit."""

    per_user: int | None = None
    per_conversation: int | None = None


def duration_text(seconds: float) -> str:
    """`1 h`, `30 min`, `2 d`, `45 s`: a duration as people read it."""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)} {unit}"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{round(seconds / 60)} min"
    return f"{round(seconds)} s"

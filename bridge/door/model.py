"""Platform-neutral values that cross the boundary between the core and the adapters.

Adapters translate platform events into these types and render these types into platform payloads; the core never
sees a Slack or Matrix payload. Everything here is a frozen dataclass or an enum, so it can be compared in tests
and passed between tasks without copying.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from bridge.door.forms import Form

JSONValue = str | int | float | bool | None | list[Any] | dict[str, Any]


@dataclass(frozen=True, slots=True)
class ConversationKey:
    """What one conversation is: where messages about one piece of work go back and forth.

    `thread` is the platform's thread id (Slack thread ts, Matrix thread root event id) or "" when the conversation
    is a whole channel. `user` is set only for `conversation_scope: user`, where each person has their own
    conversation in a shared channel.
    """

    platform: str
    workspace: str
    channel: str
    thread: str = ""
    user: str = ""

    def id(self) -> str:
        """A stable string form, used as a key in the store and in logs (no secrets in it)."""
        return "/".join((self.platform, self.workspace, self.channel, self.thread, self.user))

    @classmethod
    def from_id(cls, text: str) -> ConversationKey:
        platform, workspace, channel, thread, user = text.split("/", 4)
        return cls(platform, workspace, channel, thread, user)


def shown_conversation(conversation_id: str) -> str:
    """A conversation's id as people read it: without the empty thread and person parts (`console/local/terminal`,
    not `console/local/terminal//`); a thread without a person keeps its thread."""
    return conversation_id.rstrip("/")


ConversationScope = Literal["thread", "channel", "user"]
"""What one conversation is in a channel (the config's `conversation_scope`)."""


def conversation_key(scope: ConversationScope, platform: str, workspace: str, channel: str, *, thread: str,
                     user: str) -> ConversationKey:
    """The conversation a message belongs to, the same way on every platform.

    `thread` is the thread the message is in, or the one it starts (the adapter decides: a Slack DM outside a
    thread starts none); with scope `channel` the whole channel is one conversation, with `user` each person has
    their own conversation in it.
    """
    if scope == "thread":
        return ConversationKey(platform, workspace, channel, thread)
    if scope == "user":
        return ConversationKey(platform, workspace, channel, "", user)
    return ConversationKey(platform, workspace, channel)


@dataclass(frozen=True, slots=True)
class Actor:
    """A person on a platform. `user_id` is the stable id that approver lists match, never the display name."""

    platform: str
    user_id: str
    display_name: str = ""
    key: str = field(init=False, repr=False, compare=False)
    """`platform:user_id`: made once, where a property made it again on every check of who decides (several a
    decision). Not compared: it follows from the two fields that are."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", f"{self.platform}:{self.user_id}")

    def label(self) -> str:
        return self.display_name or self.user_id


@dataclass(frozen=True, slots=True)
class ServerLabel:
    """Which MCP server asks: its configured name (trusted, ours) and the title it reports (untrusted, theirs)."""

    name: str
    title: str = ""

    def text(self) -> str:
        return f"{self.name} ({self.title})" if self.title and self.title != self.name else self.name


class Kind(enum.StrEnum):
    """What a person is asked to decide."""

    FORM = "form"
    """An elicitation form: typed fields, answered field by field or in a dialog."""
    URL = "url"
    """A URL-mode elicitation: consent to open a link outside the chat."""
    SAMPLING = "sampling"
    """A server wants the host's model to answer a prompt."""
    SAMPLING_REVIEW = "sampling_review"
    """The model answered; a person checks (and may edit) the answer before it goes back."""
    ROOTS = "roots"
    """A server asks which directories it may see."""
    TOOL = "tool"
    """A risky tool call waits for approval before it runs."""


class Status(enum.StrEnum):
    """Where an interaction stands. Everything but OPEN is final."""

    OPEN = "open"
    ACCEPTED = "accepted"
    DECLINED = "declined"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    FAILED = "failed"

    @property
    def final(self) -> bool:
        return self is not Status.OPEN


Action = Literal["accept", "decline", "cancel"]


@dataclass(frozen=True, slots=True)
class Detail:
    """One labelled piece of context on a card (a sampling message, tool arguments, a root). Text is untrusted."""

    label: str
    text: str
    full_length: int = 0
    """Length of the text before it was shortened, or 0 when it was not shortened."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """How an interaction ended."""

    status: Status
    content: Mapping[str, JSONValue] | None = None
    by: Actor | None = None
    reason: str = ""
    approvals: tuple[Actor, ...] = ()
    """On a card that needed several approvers: everyone who approved, in order (`by` decided last)."""
    grant: str = ""
    """The scope the approver allowed beyond this one call (a `GrantOption.scope`), or ''."""

    @property
    def action(self) -> Action:
        """The elicitation action this outcome maps to: expiry and failure are a cancel (nobody said no)."""
        if self.status is Status.ACCEPTED:
            return "accept"
        if self.status is Status.DECLINED:
            return "decline"
        return "cancel"


@dataclass(frozen=True, slots=True)
class GrantOption:
    """A wider "Allow for …" an approval card offers: the same tool (or sampling) approved for later too."""

    scope: str
    """`conversation` or `channel`: where the grant holds."""
    label: str
    """What the button or reply says, e.g. "Allow in this channel until revoked"."""


Notify = Literal["thread", "dm"]
"""Where approvers are asked: in the conversation (and privately if they are not in it), or always privately."""


@dataclass(frozen=True, slots=True)
class Interaction:
    """One thing a person must decide, posted as a card in a conversation.

    Every kind is expressed the same way so that each adapter has one renderer: a message, some details, a form
    (possibly empty) whose defaults are pre-filled, and labels for the accept and decline choices. Approvals with
    `quick_accept` may be accepted as shown (the defaults), all others need the form filled in.
    """

    id: str
    kind: Kind
    server: ServerLabel
    conversation: ConversationKey
    requester: Actor | None
    approvers: frozenset[str]
    """Actor keys allowed to decide; empty means anyone in the conversation may."""
    message: str
    form: Form
    expires_at: float
    """Wall-clock time (time.time()) after which the interaction expires."""
    details: tuple[Detail, ...] = ()
    url: str = ""
    accept_label: str = "Accept"
    decline_label: str = "Decline"
    quick_accept: bool = False
    tool: str = ""
    """For tool approvals and tool-caused requests: the tool being run."""
    required: int = 1
    """Distinct approvers needed before an accept counts (a quorum); one decline or cancel ends it at once."""
    approvals: tuple[Actor, ...] = ()
    """Approvals counted so far on a quorum card, in order."""
    groups: tuple[str, ...] = ()
    """Configured groups whose members may decide too (their members join `approvers` when the card is posted)."""
    notify: Notify = "thread"
    asked: tuple[str, ...] = ()
    """Actor keys the card was also sent to privately (approvers outside the conversation, or `notify: dm`)."""
    origin: ConversationKey | None = None
    """On a private copy of a card: the conversation the request was made in (the copy lives in a direct message)."""
    grants: tuple[GrantOption, ...] = ()
    """Wider scopes an approver may allow with the accept (tool and sampling approvals)."""
    private: bool = False
    """Shown to its one approver only (a person's Connect prompt): a platform that can show one person a card inside
    a conversation does so (`ChatPort.private_cards`, Slack's ephemeral messages); otherwise the core posts it in a
    direct message with them, and the console, which has one person, prints it on stderr."""
    request: str = ""
    """The digest of the request this card decides (`bridge.safety.receipts.canonical`), which its receipt names."""

    def may_decide(self, actor: Actor) -> bool:
        return not self.approvers or actor.key in self.approvers

    def still_may(self) -> list[str]:
        """Actor keys of the approvers who have not approved yet (quorum cards)."""
        done = {a.key for a in self.approvals}
        return sorted(k for k in self.approvers if k not in done)


@dataclass(frozen=True, slots=True)
class CardRef:
    """Where a card was posted, as the adapter needs it to update the card later.

    `data` is opaque to the core (Slack channel and ts, Matrix event ids, ...) and is stored as JSON so that a card
    can still be finished after a restart.
    """

    interaction_id: str
    data: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class MessageRef:
    """A plain message the bridge posted and may edit (status lines for progress)."""

    conversation: ConversationKey
    data: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StatusView:
    """A running tool call's status line: edited in place as progress arrives."""

    call_id: str
    server: ServerLabel
    tool: str
    text: str
    progress: float | None = None
    total: float | None = None
    done: bool = False
    stoppable: bool = True


@dataclass(frozen=True, slots=True)
class AppOffer:
    """A tool result that comes with an app (MCP Apps): chat shows an Open button or link, and each person who opens
    it gets a link of their own (`AppLinks.app_link`)."""

    view_id: str
    server: ServerLabel
    tool: str
    requester: Actor | None = None
    title: str = ""
    """The tool's title as the server gives it (untrusted), or empty."""


@dataclass(frozen=True, slots=True)
class MessageIn:
    """A message from a person: a command, or a turn for the agent."""

    conversation: ConversationKey
    actor: Actor
    text: str
    addressed: bool = True
    """True when the message is meant for the bot (a mention, a DM, a command, a reply in its thread)."""
    explicit_command: bool = False
    """True when the person used the command prefix (`!mcp`, `/mcp`): the text must be a command. Otherwise a
    message whose first word is a command name is a command, and anything else is a turn for the agent."""


@dataclass(frozen=True, slots=True)
class DecisionIn:
    """A person's decision on an interaction: a click, a submission, a vote, a reply, a reaction."""

    interaction_id: str
    actor: Actor
    action: Action
    content: Mapping[str, JSONValue] | None = None
    grant: str = ""
    """With an accept: the wider scope chosen from the card's `grants` ("Allow in this channel…"), or ''."""


class Verdict(enum.StrEnum):
    """What became of a decision, for the adapter to show (Slack modal errors, a reaction, nothing)."""

    CLAIMED = "claimed"
    COUNTED = "counted"
    """An approval on a quorum card counted; the card stays open for the others."""
    REFUSED = "refused"
    INVALID = "invalid"
    LATE = "late"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class DecisionResult:
    verdict: Verdict
    errors: Mapping[str, str] = field(default_factory=dict)
    """Per-field reasons when the verdict is INVALID."""
    message: str = ""
    web_link: str = ""
    """From a check that asked for one (`Inbound.check(..., web_link=True)`), when the person may answer: their
    one-time address to fill the card's form in a browser ('' when web forms are off or the card has no form)."""

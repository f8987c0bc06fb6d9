"""Who and where a server request is for, how it travels to the handler, and the one way an interaction is built.

A `RequestContext` ties a server request (elicitation, sampling, roots, a tool approval) to the call and conversation
it belongs to. The 2026 input-required driver sets it in `CURRENT` around each input request it dispatches (a
context variable: tasks started from there inherit it); legacy server requests arrive in the SDK's own tasks, so the
tool-call owner finds theirs from the session (`ContextSource`). Every `Interaction` is built by `new_interaction`.
"""

from __future__ import annotations

import contextvars
import os
import time
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from mcp.client import ClientRequestContext
from mcp.types import ErrorData

from bridge.config.file import ServerConfig
from bridge.config.policy import QUORUM_KINDS, approver_rule
from bridge.door.forms.model import Form
from bridge.door.model import Actor, ConversationKey, Detail, GrantOption, Interaction, Kind, Outcome, ServerLabel
from bridge.errors import INVALID_REQUEST
from bridge.servers.session_keys import personal


@dataclass(frozen=True, slots=True)
class RequestContext:
    """A server request tied to the call and conversation it belongs to."""

    conversation: ConversationKey
    server: ServerLabel
    requester: Actor | None
    approvers: frozenset[str]
    """Actor keys allowed to decide when no rule of `config` says otherwise: the requester plus the server's people."""
    tool: str = ""
    pending_call: str | None = None
    """The stored 2026 call this request is part of (durable), or None for a legacy callback."""
    input_key: str | None = None
    url_elicitations: dict[str, str] | None = None
    """Where a legacy session records the server's URL-elicitation ids (for notifications/elicitation/complete)."""
    config: ServerConfig | None = None
    """The server's config, whose approver rules say who decides each kind of request (and how many)."""
    park: bool = False
    """Post the card and raise `bridge.cards.broker.Parked` instead of waiting (a 2026 elicitation whose call can be
    continued from its stored state once the card is answered)."""
    note: str = ""
    """Why this request is asked again, shown on its card (the server lost the call's state, say)."""
    task: str = ""
    """The task this request belongs to (a tool call running as a task, `relatedTask`), shown on its card."""

    def deadline(self, timeout: float) -> float:
        return time.time() + timeout

    def step(self, name: str) -> RequestContext:
        """The context of one step of a multi-card request (sampling's approval and review), durable separately."""
        key = f"{self.input_key}#{name}" if self.input_key is not None else None
        # Never parked: a later step depends on this one's outcome within the same handler run.
        return RequestContext(self.conversation, self.server, self.requester, self.approvers, self.tool,
                              self.pending_call, key, self.url_elicitations, self.config, note=self.note,
                              task=self.task)

    def deciders(self, kind: Kind) -> tuple[frozenset[str], tuple[str, ...], int, str]:
        """Who decides a request of this kind: people, groups, approvals required, and where they are asked.

        The plain-list form keeps the requester among the deciders; the rule form names them exactly (with
        `requester: true` adding the requester). Forms and links are the requester's own to answer whatever the rule,
        and on a `per_user` server (the requester's own account) theirs alone.
        """
        if self.config is None:
            return self.approvers, (), 1, "thread"
        if personal(self.config) and self.requester is not None and kind in (Kind.FORM, Kind.URL):
            return frozenset({self.requester.key}), (), 1, "thread"
        rule = approver_rule(self.config, kind, self.tool)
        people = set(rule.people)
        if self.requester is not None and (rule.requester or kind in (Kind.FORM, Kind.URL)):
            people.add(self.requester.key)
        required = rule.required if kind in QUORUM_KINDS else 1
        return frozenset(people), rule.groups, required, rule.notify


CURRENT: contextvars.ContextVar[RequestContext | None] = contextvars.ContextVar("bridge_request", default=None)
"""The request being answered in this task (set by the 2026 input-required driver)."""


class ContextSource(Protocol):
    """Finds the context of a server request the SDK hands to a handler."""

    def resolve(self, context: ClientRequestContext) -> RequestContext | None: ...


class Asker(Protocol):
    """Posts a card and waits for its outcome (the broker)."""

    async def ask(self, interaction: Interaction, *, pending_call: str | None = None,
                  input_key: str | None = None, park: bool = False) -> Outcome: ...


NOBODY_TO_ASK = "No conversation is waiting on this server to ask in"
"""The one answer to a server request that belongs to no call and no conversation (a shared session, idle)."""

P = TypeVar("P")
R = TypeVar("R")


class RequestHandler(Generic[P, R]):
    """One kind of server request (elicitation, sampling, roots, tool approval), answered by `answer(ctx, params)`.

    Calling the object is the SDK's callback signature. The SDK routes legacy server->client requests and the 2026
    driver's input requests (`ClientSession.dispatch_input_request`) through the same callback, so one instance,
    registered once per session, answers both eras.
    """

    def __init__(self, contexts: ContextSource, asker: Asker) -> None:
        self._contexts = contexts
        self._asker = asker

    async def __call__(self, context: ClientRequestContext, params: P) -> R | ErrorData:
        ctx = CURRENT.get() or self._contexts.resolve(context)
        if ctx is None:
            return ErrorData(code=INVALID_REQUEST, message=NOBODY_TO_ASK)
        return await self.answer(ctx, params)

    async def answer(self, ctx: RequestContext, params: P) -> R | ErrorData:
        raise NotImplementedError

    async def ask(self, ctx: RequestContext, interaction: Interaction) -> Outcome:
        """Post a card for this request, durable when it is part of a stored 2026 call (and parked when the context
        says so: then this raises `bridge.cards.broker.Parked` once the card is posted)."""
        return await self._asker.ask(interaction, pending_call=ctx.pending_call, input_key=ctx.input_key,
                                     park=ctx.park)


def new_id() -> str:
    """An id people can still type (`cancel 3f9a1c2e07b4`): 48 random bits, so collisions stay out of reach for
    millions of stored interactions (and the store refuses a duplicate rather than overwrite). `secrets.token_hex(6)`,
    read straight from the same source (three calls fewer, two ids a decision)."""
    return os.urandom(6).hex()


def new_interaction(ctx: RequestContext, kind: Kind, message: str, *, timeout: float, form: Form | None = None,
                    details: tuple[Detail, ...] = (), url: str = "", accept_label: str = "Accept",
                    decline_label: str = "Decline", quick_accept: bool = False,
                    grants: tuple[GrantOption, ...] = (), request: str = "") -> Interaction:
    """The one factory of interactions: id, people, server and deadline always come from the request's context.
    Wider grants are offered only where one approval decides. `request`: the digest of what it decides, for its
    receipt (`bridge.requests.receipting`)."""
    if ctx.note:
        details = (Detail("Asked again", ctx.note), *details)
    if ctx.task:
        details = (Detail("Task", ctx.task), *details)
    people, groups, required, notify = ctx.deciders(kind)
    return Interaction(
        id=new_id(), kind=kind, server=ctx.server, conversation=ctx.conversation, requester=ctx.requester,
        approvers=people, message=message, form=form or Form(), expires_at=ctx.deadline(timeout),
        details=details, url=url, accept_label=accept_label, decline_label=decline_label, quick_accept=quick_accept,
        tool=ctx.tool, required=required, groups=groups, notify="dm" if notify == "dm" else "thread",
        grants=grants if required == 1 else (), request=request)

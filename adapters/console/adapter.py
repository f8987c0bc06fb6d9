"""The console adapter: a terminal chat with one conversation, scriptable through a pipe.

Cards are shown one at a time and answered field by field (`bridge.text.questions`). Input comes from an injected line
source, never from `sys.stdin` directly, so tests and shell scripts drive it the same way. Lines are used only when
something waits for them: while a command is still working and no card is shown, the next line waits (read, not yet
used), so a script can pipe a command and its answers in one go; only a `cancel` coming next is used at once, to stop
the running call.

Piped-mode rules: each answer is one line, in the order asked; an empty line takes the default (or skips an optional
field); an option may be given by number, value or title; a multi-select is a comma-separated list; booleans take
yes/no/true/false/y/n; lines starting with `!mcp` are commands; end of input cancels whatever is pending.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TextIO

import anyio
from anyio.abc import TaskGroup

from adapters.console import render, terminal
from bridge.config.file import Config
from bridge.door.model import (
    Action,
    Actor,
    AppOffer,
    CardRef,
    ConversationKey,
    DecisionIn,
    Interaction,
    MessageIn,
    MessageRef,
    Outcome,
    StatusView,
    Verdict,
)
from bridge.door.ports import Completions, Inbound, app_link
from bridge.text.questions import Dialog, Step, StepKind

logger = logging.getLogger(__name__)

PREFIX = "!mcp"
MAX_HELD = 1000
"""Lines read ahead while a command works, at most (a script piped in whole waits in the pipe beyond that)."""

LineSource = Callable[[], AsyncIterator[str]]


async def stream_lines(stream: TextIO) -> AsyncIterator[str]:
    """Lines from a blocking text stream (stdin), read by a daemon thread so the event loop keeps running.

    Not anyio's worker threads: one blocked in `readline` would keep the process alive after SIGTERM until someone
    pressed Enter. A daemon thread dies with the process. Lines still reach the console strictly in order, and only
    when it asks for the next one.
    """
    send, receive = anyio.create_memory_object_stream[str](1)
    token = anyio.lowlevel.current_token()

    def pump() -> None:
        try:
            for line in iter(stream.readline, ""):
                anyio.from_thread.run(send.send, line.rstrip("\n"), token=token)
        except (RuntimeError, anyio.BrokenResourceError, anyio.ClosedResourceError, ValueError):
            return  # the event loop or the reader is gone, or the stream was closed: nothing left to deliver
        with contextlib.suppress(RuntimeError):
            anyio.from_thread.run_sync(send.close, token=token)

    threading.Thread(target=pump, name="console-input", daemon=True).start()
    async with receive:
        async for line in receive:
            yield line


class Screen(Protocol):
    """Where the console prints: a text stream, or one that prints above the prompt (`terminal.AbovePrompt`)."""

    def write(self, text: str, /) -> int: ...
    def flush(self) -> None: ...


@dataclass
class _Card:
    interaction: Interaction
    dialog: Dialog
    web_link: str = ""
    """The person's one-time web-form address, made when the card is posted (`Inbound.check`)."""


class ConsoleAdapter:
    """A chat port for one terminal user."""

    platform = "console"
    private_cards = False  # one person: a private card is shown where it is, on stderr (`err`)

    def __init__(self, host: Inbound, lines: AsyncIterator[str], out: Screen, *, user: str = "you",
                 accept_commands: bool = True, err: Screen | None = None) -> None:
        self._host = host
        self._lines = lines
        self._out = out
        self._err: Screen = err if err is not None else sys.stderr
        self.actor = Actor("console", user, user)
        self.conversation = ConversationKey("console", "local", "terminal")
        self._accept_commands = accept_commands
        self._cards: list[_Card] = []
        self._busy = 0
        self._closed = False
        self._held: deque[str | None] = deque()
        self._changed = anyio.Event()

    # -- output --------------------------------------------------------------------------------------------------

    def _print(self, *lines: str, private: bool = False) -> None:
        """Print on stdout, or for a private card (a sign-in link) on stderr, out of the chat's transcript."""
        stream = self._err if private else self._out
        for line in lines:
            print(line, file=stream)
        stream.flush()

    def _poke(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    # -- ChatPort ------------------------------------------------------------------------------------------------

    async def post_card(self, interaction: Interaction) -> CardRef:
        link = ""
        if self._host.web_forms_enabled() and interaction.may_decide(self.actor):
            link = (await self._host.check(interaction.id, self.actor, web_link=True)).web_link
        card = _Card(interaction, Dialog(interaction), link)
        self._cards.append(card)
        if len(self._cards) == 1:
            self._show(card, card.dialog.start(), first=True)
        else:
            self._print(f"(another request is waiting: {render.clean(interaction.server.text())} "
                        f"[{interaction.id}], after this one)")
        if self._closed:
            # Input has ended: nobody can answer, so the request is cancelled as the rules say.
            await self._decide(card, "cancel")
        self._poke()
        return CardRef(interaction.id)

    async def finish_card(self, ref: CardRef, interaction: Interaction, outcome: Outcome) -> None:
        self._print(render.finished(interaction, outcome), private=interaction.private)
        self._drop(interaction.id)

    def _drop(self, interaction_id: str) -> None:
        """Stop asking for a card (decided here, or ended otherwise) and move on to the next one."""
        was_active = bool(self._cards) and self._cards[0].interaction.id == interaction_id
        self._cards = [c for c in self._cards if c.interaction.id != interaction_id]
        if was_active and self._cards:
            self._show(self._cards[0], self._cards[0].dialog.start(), first=True)
        self._poke()

    async def send(self, conversation: ConversationKey, text: str) -> MessageRef:
        self._print(render.clean(text))
        return MessageRef(conversation)

    async def notify(self, conversation: ConversationKey, actor: Actor, text: str) -> None:
        self._print(f"(note) {render.clean(text)}")

    async def post_status(self, conversation: ConversationKey, status: StatusView) -> MessageRef:
        self._print(render.status(status))
        return MessageRef(conversation, {"call": status.call_id})

    async def update_status(self, ref: MessageRef, status: StatusView) -> None:
        self._print(render.status(status))

    async def offer_app(self, conversation: ConversationKey, offer: AppOffer) -> None:
        # One person at the terminal: their own link is printed at once, with the result.
        url = app_link(self._host, offer.view_id, self.actor)
        if url is not None:
            self._print(render.app_offer(offer, url))

    async def update_card(self, ref: CardRef, interaction: Interaction) -> None:
        self._print(*render.progress(interaction))

    async def direct(self, user_id: str) -> ConversationKey | None:
        return None  # one terminal: the person it has is already in the conversation

    async def members(self, conversation: ConversationKey) -> frozenset[str] | None:
        return frozenset({self.actor.user_id})

    async def group_members(self, group: str) -> frozenset[str]:
        return frozenset()

    # -- input ---------------------------------------------------------------------------------------------------

    async def readiness(self) -> str | None:
        return None  # a terminal is always there

    async def serve(self) -> None:
        """Read lines until the input ends, then cancel whatever is still waiting."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._read_ahead)
            while (line := await self._next_line()) is not None:
                await self._on_line(line, tg)
            self._closed = True
            for card in list(self._cards):
                await self._decide(card, "cancel")
            # Commands already started finish on their own (their cards are cancelled as they appear).
        self._poke()

    async def _read_ahead(self) -> None:
        """Keep reading while commands run (so `cancel` can reach a running call); lines wait in `_held` until they
        are wanted, in order. None marks the end of the input."""
        async for line in self._lines:
            while len(self._held) >= MAX_HELD:
                await self._changed.wait()
            self._held.append(line)
            self._poke()
        self._held.append(None)
        self._poke()

    async def _next_line(self) -> str | None:
        """The next line once it is wanted: a card is shown, or (in chat mode) no command is still working. A
        `cancel` or `stop` that comes next while a command works is wanted at once: that is what it is for."""
        while True:
            if self._held:
                head = self._held[0]
                if self._ready() or (head is not None and self._interrupts(head)):
                    return self._held.popleft()
            await self._changed.wait()

    def _ready(self) -> bool:
        return bool(self._cards) or (self._accept_commands and self._busy == 0)

    def _interrupts(self, line: str) -> bool:
        # In `call` (no commands) the one call is always running while no card is shown.
        if self._cards or (self._accept_commands and self._busy == 0):
            return False
        words = line.strip().split()
        if words and words[0] == PREFIX:
            words = words[1:]
        return bool(words) and words[0].lower() in ("cancel", "stop")

    async def _on_line(self, line: str, tg: TaskGroup) -> None:
        stripped = line.strip()
        if stripped.startswith(PREFIX) and (len(stripped) == len(PREFIX) or stripped[len(PREFIX)].isspace()):
            self._start(MessageIn(self.conversation, self.actor, stripped[len(PREFIX):].strip(),
                                  explicit_command=True), tg)
            return
        if self._cards:
            await self._answer(self._cards[0], line)
            return
        if stripped and self._accept_commands:
            self._start(MessageIn(self.conversation, self.actor, stripped), tg)
        elif self._interrupts(stripped):
            # `call`'s running tool: the chat command `cancel` stops the newest call of this conversation.
            self._start(MessageIn(self.conversation, self.actor, "cancel", explicit_command=True), tg)

    def _start(self, message: MessageIn, tg: TaskGroup) -> None:
        self._busy += 1
        # A command typed while a card asks something (`show`, `pending`): its answer is printed below the question,
        # so the question is asked again after it.
        asking = self._cards[0] if self._cards else None

        async def run() -> None:
            try:
                await self._host.handle_message(message, wait=True)
            finally:
                self._busy -= 1
                if asking is not None and self._cards and self._cards[0] is asking:
                    self._show(asking, Step(StepKind.ASK, asking.dialog.question()))
                self._poke()

        tg.start_soon(run)

    async def _answer(self, card: _Card, line: str) -> None:
        step = card.dialog.answer(line)
        if step.kind is StepKind.DONE:
            assert step.action is not None
            await self._decide(card, step.action, step.content, step.grant)
            return
        self._show(card, step)

    async def _decide(self, card: _Card, action: Action, content: Mapping[str, Any] | None = None,
                      grant: str = "") -> None:
        result = await self._host.decide(DecisionIn(card.interaction.id, self.actor, action, content, grant))
        if result.verdict is Verdict.INVALID:
            self._show(card, card.dialog.rejected(result.errors))
        else:
            # Decided (or no longer open): the next line belongs to whatever comes next, not to this card.
            self._drop(card.interaction.id)

    def _show(self, card: _Card, step: Step, *, first: bool = False) -> None:
        private = card.interaction.private
        if first:
            self._print(*render.card_header(card.interaction), private=private)
            if card.web_link:  # the console is one person's, so printing the link here is private
                self._print(f"│ Or fill it in on the web: {card.web_link}", private=private)
        if step.kind is StepKind.REASK:
            self._print(f"│ ✗ {render.clean(step.message)}", private=private)
        question = step.question
        if question is None:
            return
        if question.field is None and card.dialog.answers and step.kind is StepKind.ASK:
            self._print(f"│ {card.dialog.summary_label()}", *render.summary(card.dialog), private=private)
        self._print(*render.question(question), private=private)


def create(host: Inbound, settings: Mapping[str, Any], config: Config) -> ConsoleAdapter:
    """The console on this process's stdin and stdout: with line editing at a terminal, plain lines from a pipe."""
    user = str(settings.get("user", "you"))
    if not terminal.is_terminal(sys.stdin, sys.stdout):
        return ConsoleAdapter(host, stream_lines(sys.stdin), sys.stdout, user=user)
    holder: list[ConsoleAdapter] = []

    async def next_words(before: list[str]) -> list[str]:
        if not isinstance(host, Completions):
            return []  # a host without completions: the prompt still edits lines, Tab offers nothing
        console = holder[0]
        return await host.next_words(console.conversation, console.actor, before)

    session = terminal.prompt_session(terminal.CommandCompleter(next_words))
    console = ConsoleAdapter(host, terminal.terminal_lines(session), terminal.AbovePrompt(sys.stdout), user=user,
                             err=terminal.AbovePrompt(sys.stderr))
    holder.append(console)
    return console

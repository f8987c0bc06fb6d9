"""Line editing for a person at a terminal: arrow keys, history, and Tab completion of commands, server and tool names.

prompt_toolkit reads the keys inside the event loop (`PromptSession.prompt_async`), and everything the bridge prints
while the prompt is shown goes through its stdout proxy, which draws it above the prompt instead of through the
line being typed. Only used when stdin and stdout are both terminals: a pipe keeps the plain line reader
(`adapters.console.adapter.stream_lines`), whose rules scripts rely on.

Ctrl-C at the prompt is a key press, not a signal, in prompt_toolkit's raw mode; it is turned back into SIGINT so
the bridge stops the way it does for Ctrl-C anywhere else. Ctrl-D ends the input like the end of a pipe.
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import TextIO

from prompt_toolkit import PromptSession
from prompt_toolkit.application import get_app_or_none, run_in_terminal
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import InMemoryHistory

PROMPT = "mcp> "

NextWords = Callable[[list[str]], Awaitable[Sequence[str]]]
"""What may follow the complete words typed so far (the core's answer: `bridge.door.ports.Completions.next_words`)."""


def words_before(text: str) -> tuple[list[str], str]:
    """The complete words before the cursor (without the `!mcp` prefix) and the word being typed."""
    parts = text.split()
    current = parts.pop() if parts and not text[-1].isspace() else ""
    if parts and parts[0] == "!mcp":
        parts = parts[1:]
    return parts, current


class CommandCompleter(Completer):
    """Command words, then a server's name, then (after `call SERVER`) one of its tools, asked of the core."""

    def __init__(self, next_words: NextWords) -> None:
        self._next_words = next_words

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterable[Completion]:
        return ()  # only asked for asynchronously (prompt_async)

    async def get_completions_async(self, document: Document,
                                    complete_event: CompleteEvent) -> AsyncGenerator[Completion, None]:
        before, current = words_before(document.text_before_cursor)
        if not before and current.startswith("!"):
            if "!mcp".startswith(current):
                yield Completion("!mcp", start_position=-len(current))
            return
        for word in await self._next_words(before):
            if word.startswith(current):
                yield Completion(word, start_position=-len(current))


def is_terminal(stdin: TextIO, stdout: TextIO) -> bool:
    try:
        return stdin.isatty() and stdout.isatty()
    except ValueError:  # a closed stream
        return False


async def terminal_lines(session: PromptSession[str]) -> AsyncIterator[str]:
    """Lines typed at the prompt until Ctrl-D; Ctrl-C stops the bridge as the signal would."""
    while True:
        try:
            # Not prompt_toolkit's own SIGINT handler: it would replace the bridge's, and remove it after each line.
            line = await session.prompt_async(PROMPT, handle_sigint=False, set_exception_handler=False)
        except EOFError:
            return
        except KeyboardInterrupt:
            os.kill(os.getpid(), signal.SIGINT)
            return
        yield line


def prompt_session(completer: Completer) -> PromptSession[str]:
    # Completions while typing would cover the output the person is reading; Tab shows them.
    return PromptSession(history=InMemoryHistory(), completer=completer, complete_while_typing=False)


class AbovePrompt:
    """A text stream that prints above the prompt while one is shown (else straight through), whole lines at a time.

    Written to from the event loop only (the adapter's output); `flush` hands the buffered text on. Not
    prompt_toolkit's `StdoutProxy`: its writer thread would lose what is printed as the process ends.
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._buffer: list[str] = []

    def write(self, text: str) -> int:
        self._buffer.append(text)
        return len(text)

    def flush(self) -> None:
        text, self._buffer = "".join(self._buffer), []
        if not text:
            return

        def out() -> None:
            self._stream.write(text)
            self._stream.flush()

        app = get_app_or_none()
        if app is not None and app.is_running:
            # Ordered: prompt_toolkit runs each of these after the one before.
            run_in_terminal(out, in_executor=False)
        else:
            out()

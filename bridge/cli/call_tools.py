"""`call` and `tools`: one server, from a terminal, once.

Both connect the way the bridge does (the same host, session pool and handlers), with the console adapter answering
whatever a server asks on stderr, and OAuth signed in at the terminal (`bridge.auth.terminal`). The result goes to
stdout (its text, or the whole result with `--json`); everything a server sent is cleaned (`bridge.safety.sanitize`) of
terminal control characters, bidi overrides and zero-width characters before it is printed, on stdout as on stderr.

Exit codes: 0 done, 1 the tool reported an error, 2 usage, config, connection or protocol errors. Whatever goes wrong
ends as one clean line on stderr, never a traceback: usage and config problems are raised as `ConfigError` for the
CLI's one failure printer (`bridge.cli.failures`); what the SDK raises about a server's answers is worded here.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import shlex
import signal
import sys
import unicodedata
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio
from mcp import MCPError
from mcp.client.auth import OAuthFlowError, OAuthRegistrationError, OAuthTokenError
from mcp.types import CallToolResult, Tool
from pydantic import ValidationError

from bridge.auth.oauth import OAuthClients
from bridge.auth.terminal import TerminalConsent
from bridge.cli.failures import EXIT_INTERRUPTED, leaves
from bridge.config.file import Config, ServerConfig, load, parse_duration
from bridge.errors import CommandError, ConfigError, SessionError
from bridge.host import Host
from bridge.safety import redaction
from bridge.safety.redaction import Redactor
from bridge.safety.sanitize import clean
from bridge.storage import open_store
from bridge.text.grammar import count
from bridge.text.plain import result_text, session_error_text

logger = logging.getLogger(__name__)

EXIT_OK, EXIT_TOOL_ERROR, EXIT_USAGE = 0, 1, 2
SECRETS_KEY_ENV = "MCP_CHAT_BRIDGE_SECRETS_KEY"
"""With `--url`, tokens are kept (encrypted) only when this variable holds a key; otherwise for this run only."""
SERVER = "server"
CALL_USAGE = "usage: call (--url URL | --stdio CMD | -c FILE SERVER) TOOL [JSON]"
TOOLS_USAGE = "usage: tools (--url URL | --stdio CMD | -c FILE SERVER) [--json]"
@dataclass(frozen=True)
class Target:
    config: Config
    server: str
    rest: list[str]


def default_token_store() -> str:
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return str(Path(state) / "mcp-chat-bridge" / "tokens.db")


def target(args: argparse.Namespace, command: str) -> Target:
    """The config and server a command line names (`--url`/`--stdio` make one, `-c FILE SERVER` picks one), with the
    words after it; or a ConfigError saying why not."""
    rest: list[str] = list(getattr(args, "target", None) or [])
    if args.url and args.stdio:
        raise ConfigError([f"{command}: give --url or --stdio, not both"])
    if args.url or args.stdio:
        try:
            words = shlex.split(args.stdio) if args.stdio else []
        except ValueError as exc:
            raise ConfigError([f"--stdio: cannot split the command: {exc}"]) from None
        if args.stdio is not None and not words:
            raise ConfigError(["--stdio: the command is empty"])
        if args.url and not args.url.startswith(("http://", "https://")):
            raise ConfigError(["--url: must start with http:// or https://"])
        server = ServerConfig(name=SERVER, url=args.url, command=words[0] if words else None, args=tuple(words[1:]))
        config = Config(servers={SERVER: server}, store=":memory:",
                        secrets_key_env=SECRETS_KEY_ENV if os.environ.get(SECRETS_KEY_ENV) else None,
                        token_store=default_token_store())
        name = SERVER
    else:
        if not args.config:
            raise ConfigError([f"{command}: give -c FILE SERVER TOOL [JSON], or --url/--stdio with TOOL [JSON]"
                               if command == "call" else TOOLS_USAGE])
        if not rest:
            raise ConfigError([CALL_USAGE if command == "call" else TOOLS_USAGE])
        config = replace(load(args.config), store=":memory:")
        name = rest.pop(0)
        if name not in config.servers:
            raise ConfigError([f"{command}: no server named {name!r} in {args.config}"])
    try:
        timeout = parse_duration(args.timeout) if getattr(args, "timeout", None) else None
    except ValueError as exc:
        raise ConfigError([f"--timeout: {exc}"]) from None
    if timeout is not None and timeout <= 0:
        raise ConfigError(["--timeout: must be more than 0 seconds"])
    config = replace(config, servers={n: adjusted(s, args.protocol, timeout) for n, s in config.servers.items()})
    return Target(config, name, rest)


def call_plan(args: argparse.Namespace) -> tuple[Target, str, dict[str, Any]]:
    """What `call` was asked to do (target, tool, arguments), or a ConfigError saying why not."""
    spec = target(args, "call")
    if not spec.rest:
        raise ConfigError([CALL_USAGE])
    if len(spec.rest) > 2:
        raise ConfigError(["call: too many arguments: give the tool's arguments as one JSON object (quote it)"])
    try:
        arguments = json.loads(spec.rest[1]) if len(spec.rest) > 1 else {}
    except json.JSONDecodeError as exc:
        raise ConfigError([f"error: the arguments are not valid JSON: {exc}"]) from None
    if not isinstance(arguments, dict):
        raise ConfigError(["error: the arguments must be a JSON object"])
    return spec, spec.rest[0], arguments


def adjusted(server: ServerConfig, protocol: str | None, timeout: float | None) -> ServerConfig:
    """`--protocol/--timeout`: the era to speak, and how long every kind of answer (and a sign-in) may take."""
    if protocol:
        server = replace(server, protocol=protocol)  # type: ignore[arg-type]
    if timeout is not None:
        server = replace(server, elicitation_timeout=timeout, tool_timeout=timeout,
                         sampling=replace(server.sampling, timeout=timeout),
                         roots=replace(server.roots, timeout=timeout), auth=replace(server.auth, timeout=timeout))
    return server


@dataclass
class Terminal:
    host: Host
    console: Any


@asynccontextmanager
async def terminal(config: Config) -> AsyncIterator[Terminal]:
    """A host with the console on stdin/stderr and OAuth signed in at this terminal."""
    # Loaded by name like every adapter: the core never imports adapters statically.
    console_module = importlib.import_module("adapters.console")
    redaction.install(config.redactor)
    store = await open_store(":memory:")
    try:
        async with TerminalConsent(sys.stderr, clean) as consent:
            clients = OAuthClients(config, consent)
            try:
                # Signed in at this terminal, as its one person (the console's). No restart hint: one call, then the
                # process ends, so nothing is started again.
                host = Host(config, store, restart_hint=False,
                            auth=lambda session: clients.for_server(session.server, console.actor.key))
                console = console_module.ConsoleAdapter(host, console_module.stream_lines(sys.stdin), sys.stderr,
                                                        accept_commands=False)
                host.attach(console)
                async with host:
                    yield Terminal(host, console)
            finally:
                await clients.aclose()
    finally:
        await store.aclose()


def server_failure(exc: BaseException) -> str | None:
    """One line for what the SDK raises about a server's answers (None: not such an error); never a token. A server
    that failed to start or died is shown with its last output, as `run` shows it in chat."""
    if isinstance(exc, SessionError):
        return session_error_text(exc, again=False)
    if isinstance(exc, MCPError):
        return f"the server answered with error {exc.code}: {exc.error.message}"
    if isinstance(exc, ValidationError):
        problems = exc.errors()
        first = (".".join(str(p) for p in problems[0]["loc"]) + ": " + problems[0]["msg"]) if problems else "invalid"
        return f"the server sent an answer that is not valid MCP ({count(len(problems), 'problem')}; first: {first})"
    if isinstance(exc, OAuthFlowError | OAuthTokenError | OAuthRegistrationError):
        return f"authorization failed: {exc}"
    return None


async def _guarded(body: Callable[[], Awaitable[int]], redactor: Redactor) -> int:
    """Run a command's body; a server's bad answer is one clean line and exit 2, anything else goes to the CLI.
    `redactor`: the config's secrets, kept out of what a server printed (its env holds them)."""
    try:
        return await body()
    except Exception as exc:
        lines = [server_failure(leaf) for leaf in leaves(exc)]
        if not lines or any(line is None for line in lines):
            raise
        logger.debug("the command failed", exc_info=True)
        for line in dict.fromkeys(lines):
            _err("error: " + clean(redactor.redact(str(line))))
        return EXIT_USAGE


async def fresh_tools(term: Terminal, server: str) -> list[Tool]:
    tools: list[Tool] = await term.host.pool.list_tools(term.console.conversation, server, fresh=True,
                                                         person=term.console.actor)
    return tools


def _err(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _json(data: Any) -> str:
    return escaped_json(json.dumps(data, indent=2, ensure_ascii=False))


def escaped_json(text: str) -> str:
    """JSON for a terminal: the data unchanged, but bidi controls and invisible characters written as `\\uXXXX`
    escapes, so they cannot reorder or hide what is printed. Only non-ASCII ones: ASCII controls are already escaped
    inside strings, and outside them are the layout's own newlines."""
    if text.isascii():
        return text
    return "".join(f"\\u{ord(c):04x}" if ord(c) > 0x7e and unicodedata.category(c) in _ESCAPED
                   and ord(c) < 0x10000 else c for c in text)


_ESCAPED = frozenset({"Cc", "Cf", "Zl", "Zp"})


async def call(args: argparse.Namespace) -> int:
    spec, tool, arguments = call_plan(args)
    result: CallToolResult | None = None

    async with terminal(spec.config) as term:
        async def run() -> int:
            nonlocal result
            tools = {t.name: t for t in await fresh_tools(term, spec.server)}
            if tool not in tools:
                # The list is fresh, so the server does not offer it (or the SDK dropped it as invalid): refuse
                # here rather than send a call the server cannot have meant.
                names = ", ".join(sorted(tools)) or "none"
                raise CommandError(f"{spec.server} has no tool named {tool!r} (its tools: {names})")
            # The person is at this terminal: once they say a link is done, the call runs again on the same session.
            result = await term.host.calls.run(term.console.conversation, term.console.actor, spec.server, tool,
                                               arguments, retry_after_links=True)
            return EXIT_OK

        code = await _with_console(term, lambda: _guarded(run, spec.config.redactor))
    if code != EXIT_OK:
        return code
    if result is None:
        return EXIT_USAGE  # the conversation said why, on stderr
    if args.json:
        print(_json(result.model_dump(mode="json", by_alias=True, exclude_none=True)))
    else:
        # Server text on a terminal: no escape sequences, bidi controls or invisible characters (the one cleaner).
        print(clean(result_text(result, limit=spec.config.limits.tool_result_size)))
    return EXIT_TOOL_ERROR if result.is_error else EXIT_OK


async def tools(args: argparse.Namespace) -> int:
    spec = target(args, "tools")
    if spec.rest:
        raise ConfigError([TOOLS_USAGE])
    listed: list[Tool] = []
    async with terminal(spec.config) as term:
        async def run() -> int:
            listed.extend(await fresh_tools(term, spec.server))
            return EXIT_OK

        code = await _guarded(run, spec.config.redactor)
    if code != EXIT_OK:
        return code
    if args.json:
        print(_json([t.model_dump(mode="json", by_alias=True, exclude_unset=True) for t in listed]))
    else:
        print(clean(_listing(listed)))
    return EXIT_OK


def _listing(tools: list[Tool]) -> str:
    if not tools:
        return "(no tools)"
    blocks = []
    for tool in tools:
        head = tool.name + (f" ({tool.title})" if tool.title and tool.title != tool.name else "")
        lines = [head]
        if tool.description:
            lines.extend(f"  {line}" for line in tool.description.strip().splitlines())
        lines.append("  input: " + _json(tool.input_schema).replace("\n", "\n  "))
        if tool.output_schema:
            lines.append("  output: " + _json(tool.output_schema).replace("\n", "\n  "))
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


async def _with_console(term: Terminal, body: Callable[[], Awaitable[int]]) -> int:
    """Run `body` while the console answers on stdin; end both when `body` is done."""
    code = EXIT_USAGE

    async def run() -> None:
        nonlocal code
        code = await body()
        tg.cancel_scope.cancel()

    async def interrupted() -> None:
        # Ctrl-C ends the call wherever it is. asyncio's own SIGINT handling cancels the main task, and a step of the
        # call that is shielded at that moment (a store write, the status line's last edit) can absorb that, so the
        # call would run on to its end.
        nonlocal code
        with anyio.open_signal_receiver(signal.SIGINT) as signals:
            async for _ in signals:
                code = EXIT_INTERRUPTED
                tg.cancel_scope.cancel()
                return

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        tg.start_soon(term.console.serve)
        tg.start_soon(interrupted)
    return code

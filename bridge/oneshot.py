"""`call` and `tools`: one server, from a terminal, once.

Both connect the way the bridge does (the same host, session pool and callbacks), with the console adapter answering
whatever a server asks on stderr, and OAuth signed in at the terminal (`bridge.auth.terminal`). Whatever goes wrong
ends as one clean line on stderr and exit code 2, never a traceback; everything a server sent is stripped of terminal
control characters, bidi overrides and zero-width characters before it is printed (with the console's own sanitiser).
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import shlex
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio
from mcp import MCPError
from mcp.client.auth import OAuthFlowError, OAuthRegistrationError, OAuthTokenError
from mcp.shared.exceptions import UrlElicitationRequiredError
from mcp.types import CallToolResult, Tool
from pydantic import ValidationError

from bridge import elicitation
from bridge.auth.oauth import OAuthClients
from bridge.auth.terminal import TerminalConsent
from bridge.config import Config, ServerConfig, load, parse_duration
from bridge.context import RequestContext
from bridge.errors import BridgeError, CommandError, ConfigError, SessionError
from bridge.host import Host
from bridge.model import Actor, ConversationKey, Status
from bridge.store import Store
from bridge.text import result_text, shorten

logger = logging.getLogger(__name__)

EXIT_OK, EXIT_TOOL_ERROR, EXIT_USAGE = 0, 1, 2
SECRETS_KEY_ENV = "MCP_CHAT_BRIDGE_SECRETS_KEY"
"""With `--url`, tokens are kept (encrypted) only when this variable holds a key; otherwise for this run only."""
SERVER = "server"


class Usage(Exception):
    """A command line that cannot run as typed; the message is the one line to print."""


@dataclass(frozen=True)
class Target:
    config: Config
    server: str
    rest: list[str]


def default_token_store() -> str:
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return str(Path(state) / "mcp-chat-bridge" / "tokens.db")


def target(args: argparse.Namespace, usage: str) -> Target:
    """The config and server a command line names: `--url`/`--stdio` make one, `-c FILE SERVER` picks one."""
    rest: list[str] = list(getattr(args, "target", None) or [])
    if args.url or args.stdio:
        if args.url and args.stdio:
            raise Usage("give --url or --stdio, not both")
        command = shlex.split(args.stdio) if args.stdio else []
        server = ServerConfig(name=SERVER, url=args.url, command=command[0] if command else None,
                              args=tuple(command[1:]))
        config = Config(servers={SERVER: server}, store=":memory:",
                        secrets_key_env=SECRETS_KEY_ENV if os.environ.get(SECRETS_KEY_ENV) else None,
                        token_store=default_token_store())
        name = SERVER
    else:
        if not rest or not args.config:
            raise Usage(f"usage: {usage}")
        config = replace(load(args.config), store=":memory:")
        name = rest.pop(0)
        if name not in config.servers:
            raise Usage(f"error: no server named {name!r} in {args.config}")
    timeout = parse_duration(args.timeout) if getattr(args, "timeout", None) else None
    config = replace(config, servers={n: _adjusted(s, args.protocol, timeout) for n, s in config.servers.items()})
    return Target(config, name, rest)


def _adjusted(server: ServerConfig, protocol: str | None, timeout: float | None) -> ServerConfig:
    """`--protocol/--timeout`: the era to speak, and how long every kind of answer may take."""
    if protocol:
        server = replace(server, protocol=protocol)  # type: ignore[arg-type]
    if timeout is not None:
        server = replace(server, elicitation_timeout=timeout, tool_timeout=timeout,
                         sampling=replace(server.sampling, timeout=timeout),
                         roots=replace(server.roots, timeout=timeout), auth=replace(server.auth, timeout=timeout))
    return server


class TerminalHost(Host):
    """The host for a one-shot `call`: after a -32042 URL-required answer (a legacy server that needs a link
    visited before it can run the tool) each link is shown, and once the person says they are done the caller runs
    the call again on the same session, so a one-shot call can finish."""

    links_done = False

    async def _url_required(self, conversation: ConversationKey, requester: Actor | None, server: str, tool: str,
                            exc: MCPError) -> None:
        self.links_done = False
        try:
            links = UrlElicitationRequiredError.from_error(exc.error).elicitations
        except (ValueError, TypeError, KeyError):
            links = []
        if not links:
            await self.say(conversation, f"{server}.{tool} needs a link visited first, but sent no usable link.")
            return
        ctx = RequestContext(conversation, self.label(server, self.pool.find(conversation, server)), requester,
                             self.approvers(server, requester), tool)
        await self.say(conversation, f"{server}.{tool} needs {len(links)} link(s) visited before it can run; it runs "
                                     "again once you say they are done.")
        timeout = self.config.servers[server].elicitation_timeout
        outcomes = [await self.broker.ask(elicitation.url_interaction(ctx, params, timeout)) for params in links]
        self.links_done = all(o.status is Status.ACCEPTED for o in outcomes)


@dataclass
class Terminal:
    host: TerminalHost
    console: Any
    clean: Callable[[str], str]


@asynccontextmanager
async def terminal(config: Config) -> AsyncIterator[Terminal]:
    """A host with the console on stdin/stderr and OAuth signed in at this terminal."""
    # Loaded by name like every adapter: the core never imports adapters statically.
    console_module = importlib.import_module("adapters.console")
    clean: Callable[[str], str] = importlib.import_module("adapters.console.render").clean
    store = Store(":memory:")
    try:
        async with TerminalConsent(sys.stderr, clean) as consent:
            clients = OAuthClients(config, consent)
            try:
                host = TerminalHost(config, store)
                console = console_module.ConsoleAdapter(host, console_module.stream_lines(sys.stdin), sys.stderr,
                                                        accept_commands=False)
                host.attach(console)
                person = console.actor.key
                host.pool.auth = lambda session: clients.for_server(session.server, person)
                async with host:
                    yield Terminal(host, console, clean)
            finally:
                clients.close()
    finally:
        store.close()


def describe_failure(exc: BaseException) -> str:
    """One line for anything that stopped a command; never a traceback, never a token."""
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return describe_failure(exc.exceptions[0])
    if isinstance(exc, SessionError):
        return str(exc) + (f"\nIts last output:\n{shorten(exc.stderr_tail, 1500)}" if exc.stderr_tail else "")
    if isinstance(exc, MCPError):
        return f"the server answered with error {exc.code}: {exc.error.message}"
    if isinstance(exc, ValidationError):
        problems = exc.errors()
        first = (".".join(str(p) for p in problems[0]["loc"]) + ": " + problems[0]["msg"]) if problems else "invalid"
        return f"the server sent an answer that is not valid MCP ({len(problems)} problem(s); first: {first})"
    if isinstance(exc, OAuthFlowError | OAuthTokenError | OAuthRegistrationError):
        return f"authorization failed: {exc}"
    if isinstance(exc, ConfigError):
        return "; ".join(exc.problems)
    if isinstance(exc, BridgeError | OSError):
        return str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def needs_task(tool: Tool) -> bool:
    """Tools a server runs only as a task (task augmentation): the SDK has no tasks runtime, so they cannot run."""
    return tool.execution is not None and tool.execution.task_support == "required"


TASK_NOTE = "it runs only as a task (task augmentation), which this bridge does not support yet"


async def fresh_tools(term: Terminal, server: str) -> list[Tool]:
    return await term.host.list_tools(term.console.conversation, server, fresh=True)


async def _guarded(term: Terminal, body: Callable[[], Awaitable[int]]) -> int:
    try:
        return await body()
    except (CommandError, Usage) as exc:
        _err(term.clean(str(exc)))
    except Exception as exc:  # the top of a one-shot command: whatever it was, one clean line and exit 2
        logger.debug("the command failed", exc_info=True)
        _err("error: " + term.clean(describe_failure(exc)))
    return EXIT_USAGE


def _err(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _json(data: Any) -> str:
    # ensure_ascii: the same JSON, with every non-ASCII character (bidi overrides, zero-width ones) as an escape.
    return json.dumps(data, indent=2, ensure_ascii=True)


async def call(args: argparse.Namespace) -> int:
    spec = target(args, "call -c FILE SERVER TOOL [JSON] | call --url URL TOOL [JSON] | call --stdio CMD TOOL [JSON]")
    if not spec.rest:
        raise Usage("usage: call (--url URL | --stdio CMD | -c FILE SERVER) TOOL [JSON]")
    tool = spec.rest[0]
    try:
        arguments = json.loads(spec.rest[1]) if len(spec.rest) > 1 else {}
    except json.JSONDecodeError as exc:
        raise Usage(f"error: the arguments are not valid JSON: {exc}") from None
    if not isinstance(arguments, dict):
        raise Usage("error: the arguments must be a JSON object")
    result: CallToolResult | None = None

    async with terminal(spec.config) as term:
        async def run() -> int:
            nonlocal result
            tools = {t.name: t for t in await fresh_tools(term, spec.server)}
            if tool not in tools:
                # The list is fresh, so the server does not offer it (or the SDK dropped it as invalid): refuse
                # here rather than send a call the server cannot have meant.
                names = ", ".join(sorted(tools)) or "none"
                raise CommandError(f"error: {spec.server} has no tool named {tool!r} (its tools: {names})")
            if needs_task(tools[tool]):
                raise CommandError(f"error: {spec.server}.{tool} was not called: {TASK_NOTE}")
            for _ in range(2):
                term.host.links_done = False
                result = await term.host.run_call(term.console.conversation, term.console.actor, spec.server, tool,
                                                  arguments)
                if result is not None or not term.host.links_done:
                    break
            return EXIT_OK

        code = await _with_console(term, lambda: _guarded(term, run))
        if code != EXIT_OK:
            return code
        if result is None:
            return EXIT_USAGE  # the host said why on stderr
        if args.json:
            print(_json(result.model_dump(mode="json", by_alias=True, exclude_none=True)))
        else:
            print(term.clean(result_text(result, limit=1_000_000)))
        return EXIT_TOOL_ERROR if result.is_error else EXIT_OK


async def tools(args: argparse.Namespace) -> int:
    spec = target(args, "tools -c FILE SERVER | tools --url URL | tools --stdio CMD")
    if spec.rest:
        raise Usage("usage: tools (--url URL | --stdio CMD | -c FILE SERVER) [--json]")
    async with terminal(spec.config) as term:
        listed: list[Tool] = []

        async def run() -> int:
            listed.extend(await fresh_tools(term, spec.server))
            return EXIT_OK

        code = await _guarded(term, run)
        if code != EXIT_OK:
            return code
        hidden = [t for t in listed if needs_task(t)]
        shown = [t for t in listed if not needs_task(t)]
        if args.json:
            print(_json([t.model_dump(mode="json", by_alias=True, exclude_unset=True) for t in shown]))
        else:
            print(term.clean(_listing(shown)))
        if hidden:
            names = ", ".join(t.name for t in hidden)
            _err(term.clean(f"(not shown: {names}: {TASK_NOTE})"))
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

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        tg.start_soon(term.console.serve)
    return code

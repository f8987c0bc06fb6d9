"""`mcp-chat-bridge call`: one tool call from a shell, with the console answering whatever the server asks.

Prompts go to stderr; the result goes to stdout (its text, or the whole result with `--json`). Exit codes: 0 done,
1 the tool reported an error, 2 usage, config or connection errors.
"""

from __future__ import annotations

import argparse
import importlib
import json
import shlex
import sys
import unicodedata
from dataclasses import replace
from typing import Any

import anyio
from mcp.types import CallToolResult

from bridge import redaction
from bridge.config import Config, ServerConfig, load, parse_duration
from bridge.errors import ConfigError
from bridge.host import Host
from bridge.sanitize import clean
from bridge.store import Store
from bridge.text import result_text

EXIT_OK, EXIT_TOOL_ERROR, EXIT_USAGE = 0, 1, 2


def plan(args: argparse.Namespace) -> tuple[Config, str, str, dict[str, Any], float | None]:
    """What `call` was asked to do (config, server, tool, arguments, timeout), or a ConfigError saying why not."""
    target: list[str] = list(args.target)
    if args.url and args.stdio:
        raise ConfigError(["call: give --url or --stdio, not both"])
    if args.url or args.stdio:
        try:
            command = shlex.split(args.stdio) if args.stdio else []
        except ValueError as exc:
            raise ConfigError([f"--stdio: cannot split the command: {exc}"]) from None
        if args.stdio is not None and not command:
            raise ConfigError(["--stdio: the command is empty"])
        if args.url and not args.url.startswith(("http://", "https://")):
            raise ConfigError(["--url: must start with http:// or https://"])
        server = ServerConfig(name="server", url=args.url, command=command[0] if command else None,
                              args=tuple(command[1:]))
        config = Config(servers={"server": server}, store=":memory:")
        server_name = "server"
    else:
        if not args.config:
            raise ConfigError(["call: give -c FILE SERVER TOOL [JSON], or --url/--stdio with TOOL [JSON]"])
        if len(target) < 2:
            raise ConfigError(["call: give SERVER TOOL [JSON] after -c FILE"])
        config = replace(load(args.config), store=":memory:")
        server_name = target.pop(0)
        if server_name not in config.servers:
            raise ConfigError([f"call: no server named {server_name!r} in {args.config}"])
    if len(target) > 2:
        raise ConfigError(["call: too many arguments: give the tool's arguments as one JSON object (quote it)"])
    tool = target[0]
    try:
        arguments = json.loads(target[1]) if len(target) > 1 else {}
    except json.JSONDecodeError as exc:
        raise ConfigError([f"error: the arguments are not valid JSON: {exc}"]) from None
    if not isinstance(arguments, dict):
        raise ConfigError(["error: the arguments must be a JSON object"])
    try:
        timeout = parse_duration(args.timeout) if args.timeout else None
    except ValueError as exc:
        raise ConfigError([f"--timeout: {exc}"]) from None
    if timeout is not None and timeout <= 0:
        raise ConfigError(["--timeout: must be more than 0 seconds"])
    return config, server_name, tool, arguments, timeout


async def call(args: argparse.Namespace) -> int:
    # Loaded by name like every adapter: the core never imports adapters statically.
    console_module = importlib.import_module("adapters.console")
    config, server_name, tool, arguments, timeout = plan(args)
    config = replace(config, servers={n: adjusted(s, args.protocol, timeout) for n, s in config.servers.items()})
    redaction.install(config.redactor)

    store = Store(":memory:")
    result: CallToolResult | None = None
    failed = False
    async with Host(config, store) as host:
        host.calls.restart_hint = False  # one call, then the process ends: nothing is started again
        console = console_module.ConsoleAdapter(host, console_module.stream_lines(sys.stdin), sys.stderr,
                                                accept_commands=False)
        host.attach(console)

        async def run() -> None:
            nonlocal result, failed
            result = await host.calls.run(console.conversation, console.actor, server_name, tool, arguments)
            failed = result is None
            tg.cancel_scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            tg.start_soon(console.serve)
    store.close()
    if result is None:
        return EXIT_USAGE if failed else EXIT_TOOL_ERROR
    if args.json:
        print(escaped_json(result.model_dump_json(by_alias=True, exclude_none=True, indent=2)))
    else:
        # Server text on a terminal: no escape sequences, bidi controls or invisible characters (the one cleaner).
        print(clean(result_text(result, limit=config.limits.tool_result_size)))
    return EXIT_TOOL_ERROR if result.is_error else EXIT_OK


def escaped_json(text: str) -> str:
    """JSON for a terminal: the data unchanged, but bidi controls and invisible characters written as `\\uXXXX`
    escapes, so they cannot reorder or hide what is printed. Only non-ASCII ones: ASCII controls are already escaped
    inside strings, and outside them are the layout's own newlines."""
    if text.isascii():
        return text
    return "".join(f"\\u{ord(c):04x}" if ord(c) > 0x7e and unicodedata.category(c) in _ESCAPED
                   and ord(c) < 0x10000 else c for c in text)


_ESCAPED = frozenset({"Cc", "Cf", "Zl", "Zp"})


def adjusted(server: ServerConfig, protocol: str | None, timeout: float | None) -> ServerConfig:
    """`call --protocol/--timeout`: the era to speak, and how long every kind of answer may take."""
    if protocol:
        server = replace(server, protocol=protocol)  # type: ignore[arg-type]
    if timeout is not None:
        server = replace(server, elicitation_timeout=timeout, tool_timeout=timeout,
                         sampling=replace(server.sampling, timeout=timeout),
                         roots=replace(server.roots, timeout=timeout))
    return server

"""The `mcp-chat-bridge` command: run, demo, call, check-config, import-servers.

Adapters are loaded by name (`adapters.<name>`) when the config has a `chat.<name>` block, so the core never
imports them (import-linter keeps it so) and a missing extra only matters to those who configure that platform.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import logging
import shlex
import signal
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

import anyio
from mcp.types import CallToolResult

from bridge import __version__
from bridge.config import Config, ServerConfig, import_servers, load, parse_duration
from bridge.errors import ConfigError, StoreError
from bridge.host import Host
from bridge.ports import Adapter
from bridge.storage import AsyncStore, open_store
from bridge.text import result_text

logger = logging.getLogger("bridge")

EXIT_OK, EXIT_TOOL_ERROR, EXIT_USAGE = 0, 1, 2
STORE_READY_TIMEOUT = 3.0


class _JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        data = {"time": self.formatTime(record), "level": record.levelname, "logger": record.name,
                "message": record.getMessage()}
        if record.exc_info:
            data["exc"] = self.formatException(record.exc_info)
        return json.dumps(data)


def setup_logging(level: str, json_lines: bool, stream: TextIO | None = None) -> None:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(_JSONFormatter() if json_lines else
                         logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # The SDK and HTTP libraries are chatty at INFO; their warnings still show.
    for name in ("mcp", "httpx2", "httpcore2", "aiohttp.access", "nio"):
        logging.getLogger(name).setLevel(max(logging.WARNING, root.level))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mcp-chat-bridge", description="An MCP host that lives in team chat.")
    p.add_argument("--version", action="version", version=f"mcp-chat-bridge {__version__}")
    p.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    p.add_argument("--log-json", action="store_true", help="log JSON lines instead of plain text")
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="serve every adapter configured under chat: until SIGINT/SIGTERM")
    run.add_argument("-c", "--config", required=True)
    run.add_argument("--worker-id", default=None,
                     help="this worker's name on a shared (Postgres) store; default: hostname:pid")
    demo = sub.add_parser("demo", help="the console chat with the bundled demo server")
    demo.add_argument("--protocol", default="auto", choices=["auto", "legacy", "2026-07-28"])
    call = sub.add_parser("call", help="call one tool; the console answers any request; print the result")
    call.add_argument("-c", "--config")
    call.add_argument("--url", help="a streamable HTTP server instead of a configured one")
    call.add_argument("--stdio", help='a stdio server command instead of a configured one, e.g. "npx -y pkg"')
    call.add_argument("--protocol", default=None, choices=["auto", "legacy", "2026-07-28"])
    call.add_argument("--timeout", default=None, help="how long to wait for each answer, e.g. 10m")
    call.add_argument("--json", action="store_true", help="print the whole result as JSON")
    call.add_argument("target", nargs="+", help="SERVER TOOL [JSON] (or TOOL [JSON] with --url/--stdio)")
    check = sub.add_parser("check-config", help="validate a config file")
    check.add_argument("file")
    imp = sub.add_parser("import-servers", help="print a servers: block from an mcpServers JSON file")
    imp.add_argument("file")
    sub.add_parser("schema", help="print the config file's JSON Schema")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    setup_logging(args.log_level, args.log_json)
    try:
        if args.command == "check-config":
            config = load(args.file)
            print(f"{args.file}: OK ({len(config.servers)} servers, chat: {', '.join(config.chat) or 'none'})")
            return EXIT_OK
        if args.command == "import-servers":
            print(import_servers(json.loads(Path(args.file).read_text("utf-8"))), end="")
            return EXIT_OK
        if args.command == "schema":
            from bridge.config import schema

            print(json.dumps(schema(), indent=2))
            return EXIT_OK
        if args.command == "run":
            return anyio.run(_run, load(args.config), args.worker_id)
        if args.command == "demo":
            return anyio.run(_run, demo_config(args.protocol))
        if args.command == "call":
            return anyio.run(_call, args)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return EXIT_USAGE
    except StoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (OSError, json.JSONDecodeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    return EXIT_USAGE


def demo_config(protocol: str = "auto") -> Config:
    from bridge.demo_server import server

    store = Path(tempfile.mkdtemp(prefix="mcp-chat-bridge-demo-")) / "demo.db"
    demo = ServerConfig(name="demo", title="Demo server", inprocess=server, protocol=protocol,  # type: ignore[arg-type]
                        approvers=("console:you",))
    return Config(servers={"demo": demo}, store=str(store), chat={"console": {}})


def load_adapter(name: str, host: Host, settings: Any, config: Config) -> Adapter:
    try:
        module = importlib.import_module(f"adapters.{name}")
    except ImportError as exc:
        raise ConfigError([f"chat.{name}: the {name} adapter is not installed "
                           f"(pip install 'mcp-chat-bridge[{name}]'): {exc}"]) from None
    adapter: Adapter = module.create(host, settings or {}, config)
    return adapter


async def _run(config: Config, worker_id: str | None = None) -> int:
    if not config.chat:
        raise ConfigError(["chat: configure at least one adapter (console, slack or matrix)"])
    store = await open_store(config.store, worker_id=worker_id, lease=config.worker_lease)
    logger.info("store open (%s), worker %s", "shared" if store.shared else "this process only", store.worker_id)
    try:
        async with Host(config, store) as host, anyio.create_task_group() as tg:
            adapters = [load_adapter(name, host, settings, config) for name, settings in config.chat.items()]
            for adapter in adapters:
                host.attach(adapter)
            tg.start_soon(_stop_on_signal, tg.cancel_scope, host)
            if config.http.listen:
                # Only when configured: starlette, uvicorn and the form templates cost start time.
                from bridge.http_server import HttpServer
                from bridge.webform import web_forms

                http = HttpServer(config.http.listen, config.http.public_url)
                http.readiness("store", functools.partial(store_ready, store))
                forms = web_forms(config.http, http, host)
                if forms is not None:
                    host.offer_web_forms(forms)
                await tg.start(http.serve)
            if "console" in config.chat and len(adapters) == 1:
                print(_banner(config), file=sys.stdout, flush=True)

            async def serve(adapter: Adapter) -> None:
                await adapter.serve()
                if adapter.platform == "console":
                    tg.cancel_scope.cancel()  # the terminal closed: nothing left to serve

            for adapter in adapters:
                tg.start_soon(serve, adapter)
    finally:
        await store.aclose()
    return EXIT_OK


async def store_ready(store: AsyncStore) -> str | None:
    """The /readyz check of the store: one round trip within a few seconds."""
    with anyio.move_on_after(STORE_READY_TIMEOUT):
        try:
            await store.ping()
        except StoreError as exc:
            return str(exc)
        return None
    return f"no answer within {STORE_READY_TIMEOUT:g}s"


def _banner(config: Config) -> str:
    names = ", ".join(config.servers)
    example = "!mcp call demo plan_trip" if "demo" in config.servers else "!mcp tools"
    return (f"mcp-chat-bridge {__version__} on the console. Servers: {names}.\n"
            f"Type `!mcp help` for commands; try `{example}`. End with Ctrl-D.")


async def _stop_on_signal(scope: anyio.CancelScope, host: Host) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            logger.info("received %s, shutting down", signal.Signals(signum).name)
            host.stopping()  # before cancelling: adapters' tasks own calls whose cards must end as 'shut down'
            scope.cancel()
            return


async def _call(args: argparse.Namespace) -> int:
    # Loaded by name like every adapter: the core never imports adapters statically.
    console_module = importlib.import_module("adapters.console")
    target: list[str] = list(args.target)
    if args.url or args.stdio:
        if not target:
            print("usage: call --url URL TOOL [JSON]", file=sys.stderr)
            return EXIT_USAGE
        command = shlex.split(args.stdio) if args.stdio else []
        server = ServerConfig(name="server", url=args.url, command=command[0] if command else None,
                              args=tuple(command[1:]))
        config = Config(servers={"server": server}, store=":memory:")
        server_name = "server"
    else:
        if len(target) < 2 or not args.config:
            print("usage: call -c FILE SERVER TOOL [JSON]", file=sys.stderr)
            return EXIT_USAGE
        config = replace(load(args.config), store=":memory:")
        server_name = target.pop(0)
        if server_name not in config.servers:
            print(f"error: no server named {server_name!r} in {args.config}", file=sys.stderr)
            return EXIT_USAGE
    tool = target[0]
    try:
        arguments = json.loads(target[1]) if len(target) > 1 else {}
    except json.JSONDecodeError as exc:
        print(f"error: the arguments are not valid JSON: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not isinstance(arguments, dict):
        print("error: the arguments must be a JSON object", file=sys.stderr)
        return EXIT_USAGE
    timeout = parse_duration(args.timeout) if args.timeout else None
    config = replace(config, servers={n: _adjusted(s, args.protocol, timeout) for n, s in config.servers.items()})

    store = await open_store(":memory:")
    result: CallToolResult | None = None
    failed = False
    async with Host(config, store, owns_store=True) as host:
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
    if result is None:
        return EXIT_USAGE if failed else EXIT_TOOL_ERROR
    if args.json:
        print(result.model_dump_json(by_alias=True, exclude_none=True, indent=2))
    else:
        print(result_text(result, limit=1_000_000))
    return EXIT_TOOL_ERROR if result.is_error else EXIT_OK


def _adjusted(server: ServerConfig, protocol: str | None, timeout: float | None) -> ServerConfig:
    """`call --protocol/--timeout`: the era to speak, and how long every kind of answer may take."""
    if protocol:
        server = replace(server, protocol=protocol)  # type: ignore[arg-type]
    if timeout is not None:
        server = replace(server, elicitation_timeout=timeout, tool_timeout=timeout,
                         sampling=replace(server.sampling, timeout=timeout),
                         roots=replace(server.roots, timeout=timeout))
    return server


def _main() -> None:  # pragma: no cover - console entry point
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

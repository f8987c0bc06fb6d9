"""The `mcp-chat-bridge` command: run, demo, call, tools, check-config, import-servers.

Adapters are loaded by name (`adapters.<name>`) when the config has a `chat.<name>` block, so the core never
imports them (import-linter keeps it so) and a missing extra only matters to those who configure that platform.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import signal
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import anyio

from bridge import __version__, oneshot
from bridge.auth.oauth import NoConsent, OAuthClients
from bridge.config import Config, ServerConfig, import_servers, load
from bridge.errors import ConfigError
from bridge.host import Host
from bridge.ports import Adapter
from bridge.store import Store

logger = logging.getLogger("bridge")

EXIT_OK, EXIT_TOOL_ERROR, EXIT_USAGE = 0, 1, 2


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


class _NoAuthTracebacks(logging.Filter):
    """The SDK logs its OAuth failures with a traceback; the bridge says what failed in one line instead (a sign-in
    that is needed is routine, not a crash). `--log-level debug` keeps them."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.startswith("mcp.client.auth") and record.exc_info:
            record.exc_info = None
            record.exc_text = None
            return record.getMessage() != "OAuth flow error"
        return True


def quiet_auth_tracebacks(level: str) -> None:
    if level != "debug":
        for handler in logging.getLogger().handlers:
            handler.addFilter(_NoAuthTracebacks())


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mcp-chat-bridge", description="An MCP host that lives in team chat.")
    p.add_argument("--version", action="version", version=f"mcp-chat-bridge {__version__}")
    p.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    p.add_argument("--log-json", action="store_true", help="log JSON lines instead of plain text")
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="serve every adapter configured under chat: until SIGINT/SIGTERM")
    run.add_argument("-c", "--config", required=True)
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
    tools = sub.add_parser("tools", help="print a server's tool definitions as it sends them (names, schemas)")
    tools.add_argument("-c", "--config")
    tools.add_argument("--url", help="a streamable HTTP server instead of a configured one")
    tools.add_argument("--stdio", help="a stdio server command instead of a configured one")
    tools.add_argument("--protocol", default=None, choices=["auto", "legacy", "2026-07-28"])
    tools.add_argument("--timeout", default=None, help="how long to wait for a sign-in, e.g. 10m")
    tools.add_argument("--json", action="store_true", help="print the definitions as JSON")
    tools.add_argument("target", nargs="*", help="SERVER (with -c)")
    check = sub.add_parser("check-config", help="validate a config file")
    check.add_argument("file")
    imp = sub.add_parser("import-servers", help="print a servers: block from an mcpServers JSON file")
    imp.add_argument("file")
    sub.add_parser("schema", help="print the config file's JSON Schema")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    setup_logging(args.log_level, args.log_json)
    quiet_auth_tracebacks(args.log_level)
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
            return anyio.run(_run, load(args.config), args.config)
        if args.command == "demo":
            return anyio.run(_run, demo_config(args.protocol))
        if args.command in ("call", "tools"):
            return anyio.run(oneshot.call if args.command == "call" else oneshot.tools, args)
    except oneshot.Usage as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
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


async def _run(config: Config, path: str = "FILE") -> int:
    if not config.chat:
        raise ConfigError(["chat: configure at least one adapter (console, slack or matrix)"])
    store = Store(config.store)
    # Shared and service accounts work in chat already (stored tokens are used and refreshed); a sign-in must be
    # done once from a terminal until per-person sign-in in chat lands.
    clients = OAuthClients(config, NoConsent(path))
    host = Host(config, store)
    # Before the host starts: resuming stored calls may start sessions at once.
    host.pool.auth = lambda session: clients.for_server(session.server, None)
    try:
        async with host, anyio.create_task_group() as tg:
            adapters = [load_adapter(name, host, settings, config) for name, settings in config.chat.items()]
            for adapter in adapters:
                host.attach(adapter)
            tg.start_soon(_stop_on_signal, tg.cancel_scope, host)
            if "console" in config.chat and len(adapters) == 1:
                print(_banner(config), file=sys.stdout, flush=True)

            async def serve(adapter: Adapter) -> None:
                await adapter.serve()
                if adapter.platform == "console":
                    tg.cancel_scope.cancel()  # the terminal closed: nothing left to serve

            for adapter in adapters:
                tg.start_soon(serve, adapter)
    finally:
        clients.close()
        store.close()
    return EXIT_OK


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


def _main() -> None:  # pragma: no cover - console entry point
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

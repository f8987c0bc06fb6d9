"""The `mcp-chat-bridge` command: run, demo, call, tools, check-config, import-servers, schema, audit, receipts.

Adapters are loaded by name (`adapters.<name>`) when the config has a `chat.<name>` block, so the core never
imports them (import-linter keeps it so) and a missing extra only matters to those who configure that platform.

Each command imports what it needs when it runs, not before: `--version` loads nothing of the bridge's, and
`check-config` neither the MCP SDK nor anyio (tests/cli/test_start.py keeps it so). Start time is the first thing
a person meets.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import logging
import signal
import sys
from collections.abc import Sequence
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from bridge import DEFAULT_STORE, __version__
from bridge.cli import receipts
from bridge.cli.failures import (
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    brief,
    full_traceback,
    leaves,
    quiet_auth_tracebacks,
    report,
)
from bridge.errors import ConfigError
from bridge.safety import redaction
from bridge.text.grammar import count, listing

if TYPE_CHECKING:
    import anyio
    from anyio.abc import TaskGroup

    from bridge.cli import audit_report
    from bridge.config.file import Config
    from bridge.door.ports import Adapter
    from bridge.host import Host
    from bridge.servers.prestart import Prestarts
    from bridge.storage import AsyncStore

logger = logging.getLogger("bridge")

EXIT_OK, EXIT_TOOL_ERROR = 0, 1


class _JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        data = {"time": self.formatTime(record), "level": record.levelname, "logger": record.name,
                "message": record.getMessage()}
        if record.exc_info:
            data["exc"] = self.formatException(record.exc_info)
        return json.dumps(data)


class _BriefFormatter(logging.Formatter):
    """Plain lines whose exceptions are one line too: tracebacks are for `--debug`."""

    def formatException(self, ei: Any) -> str:
        return f"  ({brief(ei[1])})" if ei and ei[1] is not None else ""

    def formatStack(self, stack_info: str) -> str:
        return ""


def setup_logging(level: str, json_lines: bool, stream: TextIO | None = None, debug: bool = False) -> None:
    handler = logging.StreamHandler(stream or sys.stderr)
    plain = "%(asctime)s %(levelname)s %(name)s: %(message)s"
    handler.setFormatter(_JSONFormatter() if json_lines else
                         logging.Formatter(plain) if debug else _BriefFormatter(plain))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    redaction.quiet_payload_loggers(root.level)
    # The SDK and HTTP libraries are chatty at INFO; their warnings still show.
    for name in ("mcp", "httpx2", "httpcore2", "aiohttp.access", "nio"):
        logging.getLogger(name).setLevel(max(logging.WARNING, root.level))
    # A checkpoint of the audit log is a record meant to be kept (shipped with the logs), whatever the level.
    logging.getLogger("bridge.audit.checkpoint").setLevel(min(logging.INFO, root.level))
    # nio warns at every retry of a failed request ("Timed out, sleeping for 0s"); the adapter reports the failure.
    logging.getLogger("nio.client.async_client").setLevel(max(logging.ERROR, root.level))


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line, like every other error of this command."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


LOG_LEVELS = ["debug", "info", "warning", "error"]


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="mcp-chat-bridge", description="An MCP host that lives in team chat.")
    p.add_argument("--version", action="version", version=f"mcp-chat-bridge {__version__}")
    p.add_argument("--log-level", default="warning", choices=LOG_LEVELS,
                   help="how much to log on stderr (default: warning)")
    p.add_argument("--log-json", action="store_true", help="log JSON lines instead of plain text")
    p.add_argument("--debug", action="store_true", help="show tracebacks of errors (in logs and on failure)")
    # The same options are accepted after the command (`run -c x --debug`); SUPPRESS keeps the subcommand from
    # resetting what was given before it.
    common = _Parser(add_help=False)
    common.add_argument("--log-level", default=argparse.SUPPRESS, choices=LOG_LEVELS,
                        help="how much to log on stderr (default: warning)")
    common.add_argument("--log-json", action="store_true", default=argparse.SUPPRESS,
                        help="log JSON lines instead of plain text")
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show tracebacks of errors (in logs and on failure)")
    config_help = "the bridge's config file (YAML)"
    protocol_help = ("the MCP protocol era to speak: auto (what the server offers), legacy (2025-11-25 and before), "
                     "or 2026-07-28")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, summary: str, *parents: _Parser) -> argparse.ArgumentParser:
        made: argparse.ArgumentParser = sub.add_parser(name, parents=[common, *parents], help=summary,
                                                       description=summary[:1].upper() + summary[1:] + ".")
        return made

    run = command("run", "serve every adapter configured under chat: until SIGTERM")
    run.add_argument("-c", "--config", required=True, help=config_help)
    run.add_argument("--worker-id", default=None,
                     help="this worker's name on a shared (Postgres) store; default: hostname:pid")
    demo_cmd = command("demo", "the console chat with the bundled demo server")
    demo_cmd.add_argument("--protocol", default="auto", choices=["auto", "legacy", "2026-07-28"], help=protocol_help)
    # call and tools reach a server the same ways: a configured one, or one named on the command line.
    source = _Parser(add_help=False)
    source.add_argument("-c", "--config", help=config_help + ": its servers are the ones named")
    source.add_argument("--url", help="a streamable HTTP server instead of a configured one")
    source.add_argument("--stdio", help='a stdio server command instead of a configured one, e.g. "npx -y pkg"')
    source.add_argument("--protocol", default=None, choices=["auto", "legacy", "2026-07-28"],
                        help=protocol_help + " (default: the server's protocol: in the config, else auto)")
    call = command("call", "call one tool; the console answers any request; print the result", source)
    call.add_argument("--timeout", default=None, help="how long to wait for each answer, e.g. 10m")
    call.add_argument("--json", action="store_true", help="print the whole result as JSON")
    call.add_argument("target", nargs="+", help="SERVER TOOL [JSON] (or TOOL [JSON] with --url/--stdio)")
    tools = command("tools", "print a server's tool definitions as it sends them (names, schemas)", source)
    tools.add_argument("--timeout", default=None, help="how long to wait for a sign-in, e.g. 10m")
    tools.add_argument("--json", action="store_true", help="print the definitions as JSON")
    tools.add_argument("target", nargs="*", help="SERVER (with -c)")
    check = command("check-config", "validate a config file and make every check run makes before it starts")
    check.add_argument("-c", "--config", dest="config", help=config_help)
    check.add_argument("file", nargs="?", help="the config file (the same as -c FILE)")
    imp = command("import-servers", "print a servers: block from an mcpServers JSON file, or add it to a config")
    imp.add_argument("file", help="the other host's config (Claude Desktop, Cursor, VS Code, Windsurf)")
    imp.add_argument("--into", metavar="CONFIG",
                     help="add the servers to this config file's servers: block (a name it has already is refused)")
    command("schema", "print the config file's JSON Schema")
    audit = command("audit", "read the audit log, or --verify it")
    audit.add_argument("-c", "--config", help="the bridge's config file: its store is read (default store: "
                                              f"{DEFAULT_STORE})")
    audit.add_argument("--store", help="the store itself (a SQLite file or a postgresql:// URL), instead of -c")
    audit.add_argument("--since", help="only rows this recent: a duration (1d, 12h) or a date (2026-11-01)")
    audit.add_argument("--server", help="only this server's requests")
    audit.add_argument("--kind", help="only this kind: form, url, sampling, sampling_review, roots, tool")
    audit.add_argument("--who", help="only rows where this person decided or asked (id or name, any part)")
    shape = audit.add_mutually_exclusive_group()
    shape.add_argument("--json", action="store_true", help="one JSON object per line")
    shape.add_argument("--csv", action="store_true", help="CSV with a header row")
    audit.add_argument("--verify", action="store_true",
                       help="check the keys, the hash chain and the signed checkpoints; name the first row that "
                            "cannot be vouched for")
    audit.add_argument("--checkpoints", action="append", metavar="FILE",
                       help="a checkpoint file shipped away from the bridge (audit.checkpoint_file); repeatable")
    audit.add_argument("--public-key", help="the checkpoints' Ed25519 public key (base64, PEM, or a file); default: "
                                            "MCP_BRIDGE_AUDIT_PUBLIC_KEY, or derived from MCP_BRIDGE_AUDIT_SIGNING_KEY")
    audit.add_argument("--public-key-of-signing-key", action="store_true",
                       help="print the public key of MCP_BRIDGE_AUDIT_SIGNING_KEY (for those who only verify)")
    receipts.add_parser(sub, common)
    from bridge.cli import operator

    operator.register(sub, [common])
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    setup_logging(args.log_level, args.log_json, debug=args.debug)
    quiet_auth_tracebacks(args.log_level)
    try:
        code = _dispatch(args)
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001 - the one place every error becomes a line for the user
        if args.debug:
            print(full_traceback(exc), file=sys.stderr, end="")
        lines, code = report(exc)
        if any(isinstance(leaf, KeyboardInterrupt) for leaf in leaves(exc)):
            code = EXIT_INTERRUPTED
        else:
            for line in lines:
                print(line, file=sys.stderr)
    if code == EXIT_INTERRUPTED:
        print("interrupted (Ctrl-C)", file=sys.stderr)
    return code


def _dispatch(args: argparse.Namespace) -> int:
    if getattr(args, "handler", None) is not None:  # commands that register their own (bridge.cli.entry.receipts)
        return int(args.handler(args))
    if args.command == "check-config":
        from bridge.cli import preflight
        from bridge.config.file import load

        if args.config and args.file and args.config != args.file:
            raise ConfigError(["check-config: give the config file once (-c FILE or FILE)"])
        path = args.config or args.file
        if not path:
            raise ConfigError(["check-config: give the config file: check-config -c FILE"])
        config = load(path)
        problems = preflight.problems(config)
        if problems:
            raise ConfigError(problems)
        for warning in _audit_warnings():
            print(f"warning: {warning}", file=sys.stderr)
        print(f"{path}: OK ({count(len(config.servers), 'server')}, chat: {', '.join(config.chat)})")
        return EXIT_OK
    if args.command == "import-servers":
        return _import_servers(args.file, args.into)
    if args.command == "schema":
        from bridge.config.file import schema

        print(json.dumps(schema(), indent=2))
        return EXIT_OK
    if args.command == "audit":
        return _audit(args)
    from bridge.cli import operator

    if args.command in operator.COMMANDS:
        return operator.run(args)
    import anyio

    if args.command == "run":
        from bridge.config.file import load

        return anyio.run(_run, load(args.config), args.worker_id, args.config, True)
    if args.command == "demo":
        return anyio.run(_run, demo_config(args.protocol))
    if args.command in ("call", "tools"):
        from bridge.cli import call_tools

        return anyio.run(call_tools.call if args.command == "call" else call_tools.tools, args)
    return EXIT_USAGE


def _audit(args: argparse.Namespace) -> int:
    import anyio

    from bridge.cli import audit_report
    from bridge.config.file import store_path
    from bridge.storage import audit_keys

    if args.public_key_of_signing_key:
        signer = audit_keys.signing_key()
        if signer is None:
            raise ConfigError([f"{audit_keys.SIGNING_KEY_ENV} is not set"])
        print(audit_keys.public_text(signer.public_key()))
        return EXIT_OK
    filters = audit_report.Filters(
        since=audit_report.since(args.since) if args.since else None, server=args.server,
        kind=audit_report.kind(args.kind) if args.kind else None, who=args.who)
    target = args.store or (store_path(args.config) if args.config else DEFAULT_STORE)
    return anyio.run(_audit_store, args, target, filters, _verifying(args) if args.verify else None)


def _verifying(args: argparse.Namespace) -> audit_report.Verifying:
    from pathlib import Path

    from bridge.cli import audit_report
    from bridge.config.file import audit_config
    from bridge.storage import audit_keys

    files = [Path(f) for f in args.checkpoints or ()]
    notes = []
    configured = audit_config(args.config).checkpoint_file if args.config else None
    if configured and Path(configured).is_file():
        files.append(Path(configured))
    elif configured:
        notes.append(f"the checkpoint file {configured} (audit.checkpoint_file) is not here; pass the copy you "
                     "shipped away with --checkpoints")
    shipped, problems = audit_report.read_checkpoints(files)
    return audit_report.Verifying(audit_keys.ring(), audit_keys.verifying_key(args.public_key), shipped,
                                  notes + problems)


async def _audit_store(args: argparse.Namespace, target: str, filters: audit_report.Filters,
                       verifying: audit_report.Verifying | None) -> int:
    from bridge.cli import audit_report

    async with audit_report.opened(target) as log:
        if verifying is not None:
            ok, lines = await audit_report.verify_all(log, verifying)
            for line in lines:
                print(line, file=sys.stdout if ok else sys.stderr)
            return EXIT_OK if ok else EXIT_TOOL_ERROR
        items = await audit_report.entries(log, filters)
    write = audit_report.write_json if args.json else audit_report.write_csv if args.csv else audit_report.write_table
    write(items, sys.stdout)
    return EXIT_OK


def _audit_warnings() -> list[str]:
    """What is missing from the audit log's protection (the keys are read, so a bad one fails here too)."""
    from bridge.storage.audit_keys import AuditSettings

    return AuditSettings.from_env().warnings()


def _import_servers(path: str, into: str | None = None) -> int:
    from bridge.cli import importing

    imported = importing.convert(importing.read(path), path)
    if into is None:
        print(imported.yaml(), end="")
    else:
        importing.write_into(into, imported)
        print(f"{into}: added {', '.join(imported.servers)}", file=sys.stderr)
    for warning in imported.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if imported.variables:
        print(f"The block reads these from the environment; export them before `run` (the values are where they "
              f"were, in {path}):", file=sys.stderr)
        width = max(len(v.name) for v in imported.variables)
        for variable in imported.variables:
            print(f"  {variable.name:<{width}}  {variable.source}", file=sys.stderr)
    return EXIT_OK


def demo_config(protocol: str = "auto") -> Config:
    from bridge.cli.demo import setup as demo

    config = demo.config(protocol)
    print(f"The demo keeps its store in {config.store} (delete the folder to start afresh).", file=sys.stderr)
    return config


def load_adapter(name: str, host: Host, settings: Any, config: Config) -> Adapter:
    from bridge.cli import preflight

    problem = preflight.adapter_import_problem(name)
    if problem:
        raise ConfigError([problem])
    module = importlib.import_module(f"adapters.{name}")
    adapter: Adapter = module.create(host, settings or {}, config)
    return adapter


async def open_store(config: Config, worker_id: str | None = None, warn: bool = False) -> AsyncStore:
    """The configured store, migrated, this worker registered. A SQLite file is locked to this process first (a
    second `run` on the same file would close the first's live cards at start-up and resume its 2026 calls a second
    time; the kernel drops the lock however this process dies); with Postgres several workers are the point. `warn`:
    say once, at the first audit row, what protection the audit log lacks (not for the demo's scratch store)."""
    from bridge.safety.addresses import shown
    from bridge.storage import open_store as open_async_store
    from bridge.storage.audit_keys import AuditSettings

    audit = AuditSettings.from_env(config.audit.checkpoint_every, config.audit.checkpoint_file, warn=warn)
    try:
        return await open_async_store(config.store, worker_id=worker_id, lease=config.worker_lease, audit=audit)
    except OSError as exc:  # the folder is missing or not writable
        raise ConfigError([f"store: cannot open {shown(config.store)}: {exc.strerror or exc}"]) from None


async def _run(config: Config, worker_id: str | None = None, path: str = "FILE", warn: bool = False) -> int:
    from bridge.cli import preflight

    problems = preflight.problems(config)
    if problems:
        raise ConfigError(problems)
    redaction.install(config.redactor)  # first: every later log line is redacted
    return await _serve(config, worker_id, path, warn)


async def _serve(config: Config, worker_id: str | None, path: str, warn: bool) -> int:
    from bridge.servers.prestart import Prestarts

    store = await open_store(config, worker_id, warn)
    logger.info("store open (%s), worker %s", "shared" if store.shared else "this process only", store.worker_id)
    prestarts = Prestarts()
    try:
        # Before the MCP SDK is loaded: servers that start as slowly as the bridge start alongside it.
        await prestarts.start(config.servers.values())
        return await _serve_store(config, store, prestarts, path)
    finally:
        await prestarts.aclose()
        await store.aclose()


async def _serve_store(config: Config, store: AsyncStore, prestarts: Prestarts, path: str) -> int:
    import anyio

    from bridge.host import Host
    from bridge.observe import tracing

    if "console" in config.chat:
        # A terminal's cards end with the process: a 2026 request still open from before a restart is shown again.
        await store.forget_cards("console")
    with ExitStack() as watching:  # what observes the bridge (metrics, traces) stops after the host has closed
        watching.enter_context(tracing.traces(config.telemetry))
        host = Host(config, store, prestarts=prestarts)
        # Shared accounts are signed in by an admin at a terminal (the message that asks names this file);
        # per-person ones in chat, the redirect coming back to the HTTP server (routed before the host starts:
        # resumed calls may need a sign-in at once).
        host.accounts.set_config_path(path)
        http = None
        if config.http.listen:
            # Only when configured: starlette, uvicorn, prometheus-client and the form templates cost start time.
            from bridge.web.server import HttpServer

            http = HttpServer(config.http.listen, config.http.public_url, config.http.connections)
            host.accounts.serve_redirects(http)
            receipts.serve_keys(http, config.receipts)
        async with host, anyio.create_task_group() as tg:
            adapters = [load_adapter(name, host, settings, config) for name, settings in config.chat.items()]
            for adapter in adapters:
                host.attach(adapter)
            stopped_by: list[int] = []
            tg.start_soon(_stop_on_signal, tg, host, stopped_by)
            if http is not None:
                from bridge.cli import monitoring
                from bridge.servers import apps_extension
                from bridge.web.forms import web_forms

                watching.enter_context(monitoring.install(http, host, adapters, store.worker_id))
                forms = web_forms(config.http, http, host)
                if forms is not None:
                    host.offer_web_forms(forms)
                if apps_extension.possible(config) or any(s.apps for s in config.servers.values()):
                    from bridge.web.apps.routes import app_pages

                    pages = app_pages(host.apps, host, host.pool, host.outbound, http,
                                      key=config.http.form_link_secret,
                                      sandbox_url=apps_extension.sandbox_url(config.http))
                    if pages is not None:
                        host.offer_apps(pages)
                await tg.start(http.serve)
            if "console" in config.chat and len(adapters) == 1:
                print(_banner(config), file=sys.stdout, flush=True)

            async def serve(adapter: Adapter) -> None:
                await adapter.serve()
                if adapter.platform == "console":
                    # The terminal closed: nothing left to serve once the calls its last answers continue are done.
                    await host.drain()
                    tg.cancel_scope.cancel()

            # Everything made at start-up lives as long as the process: keep it out of the garbage collector's
            # full collections, which otherwise stall every ack under load (measured in bench/slack_ack.py).
            gc.freeze()
            for adapter in adapters:
                tg.start_soon(serve, adapter)
    # Ctrl-C is an interruption (what was running was cut off), as for any command; SIGTERM is the way to stop.
    return EXIT_INTERRUPTED if stopped_by == [signal.SIGINT] else EXIT_OK


def _banner(config: Config) -> str:
    names = listing(list(config.servers), "none configured")
    example = ("`!mcp tools demo`, then e.g. `!mcp call demo plan_trip`" if "demo" in config.servers
               else "`!mcp tools`")
    return (f"mcp-chat-bridge {__version__} on the console. Servers: {names}.\n"
            f"Type `!mcp help` for commands; try {example}. End with Ctrl-D.")


async def _stop_on_signal(tg: TaskGroup, host: Host, stopped_by: list[int]) -> None:
    import anyio

    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            stopped_by.append(signum)
            logger.info("received %s, shutting down", signal.Signals(signum).name)
            # Before cancelling: adapters' tasks own calls whose cards must end as 'shut down'.
            if signum == signal.SIGTERM and len(stopped_by) == 1:
                # Calls continuing after their cards finish first, the adapters still serving their results.
                host.stopping()
                tg.start_soon(_drain_then_stop, tg.cancel_scope, host)
                continue
            host.stopping(cut_short=True)  # Ctrl-C, or a second signal: at once
            tg.cancel_scope.cancel()
            return


async def _drain_then_stop(scope: anyio.CancelScope, host: Host) -> None:
    await host.drain()
    scope.cancel()


def _main() -> None:  # pragma: no cover - console entry point
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

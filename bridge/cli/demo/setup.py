"""Where `mcp-chat-bridge demo` keeps its things, and the config it runs with.

The demo's store (so a 2026 request asked before Ctrl-C can be answered after a restart) and its requestState key
live in one named folder: `$XDG_STATE_HOME/mcp-chat-bridge/` (by default `~/.local/state/mcp-chat-bridge/`). The key
is made once, readable by its owner only; `MCP_CHAT_BRIDGE_DEMO_KEY` (64 hex digits) overrides it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from bridge.cli.demo.server import build
from bridge.cli.demo.state import request_state_key, state_dir
from bridge.config.file import Config, RootsPolicy, ServerConfig
from bridge.config.team import ApproverRule
from bridge.safety.receipts.keys import ReceiptKeys, ReceiptSettings

STORE_FILE = "demo.db"


def config(protocol: str = "auto", env: Mapping[str, str] | None = None) -> Config:
    """The demo: the bundled server in-process, on the console, with its store and key in `state_dir()`."""
    folder = state_dir(env)
    # Receipts with the operator's key when one is set, else with a key made for this run (the demo's own server
    # checks them, in-process: nothing else needs the key).
    keys = ReceiptKeys.from_env(env)
    keys = keys if keys.signer is not None else ReceiptKeys.generate()
    server = build([request_state_key(folder, env)], keys.public())
    roots = RootsPolicy(defaults=((folder.as_uri(), "the demo's own folder"), (Path.cwd().as_uri(), "where you are")))
    demo = ServerConfig(name="demo", title="Demo server", inprocess=server, protocol=protocol,  # type: ignore[arg-type]
                        approvers=ApproverRule(("console:you",)), roots=roots)
    return Config(servers={"demo": demo}, store=str(folder / STORE_FILE), chat={"console": {}},
                  receipts=ReceiptSettings(keys, "mcp-chat-bridge demo"))

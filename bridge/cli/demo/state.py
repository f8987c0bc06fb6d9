"""Where the demo keeps its state: the store and the demo server's requestState key (persistent, so a 2026 request
open when the demo stops can still be answered after it starts again)."""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path

from bridge.errors import ConfigError

KEY_ENV = "MCP_CHAT_BRIDGE_DEMO_KEY"
KEY_FILE = "demo-request-state.key"


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    """`$XDG_STATE_HOME/mcp-chat-bridge`, or `~/.local/state/mcp-chat-bridge` (the XDG base directory default)."""
    env = os.environ if env is None else env
    base = env.get("XDG_STATE_HOME") or ""
    root = Path(base) if os.path.isabs(base) else Path.home() / ".local" / "state"  # relative values are ignored
    return root / "mcp-chat-bridge"


def request_state_key(folder: Path, env: Mapping[str, str] | None = None) -> str:
    """The demo server's requestState key: from the environment, else from its file (made on first use, mode 0600)."""
    env = os.environ if env is None else env
    if env.get(KEY_ENV):
        key = env[KEY_ENV].strip()
        if len(key) < 64:
            raise ConfigError([f"{KEY_ENV}: must be at least 64 hex digits (python -c 'import secrets; "
                               "print(secrets.token_hex(32))')"])
        return key
    path = folder / KEY_FILE
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            # O_EXCL: two demos starting at once cannot both write a key; the loser reads the winner's.
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "w") as out:
                out.write(secrets.token_hex(32) + "\n")
        if stat.S_IMODE(path.stat().st_mode) & 0o077:
            raise ConfigError([f"{path}: readable by others; make it private with chmod 600 {path}"])
        key = path.read_text("ascii").strip()
    except OSError as exc:
        raise ConfigError([f"demo: cannot keep the request-state key in {path}: {exc.strerror or exc}"]) from None
    if len(key) < 64:
        raise ConfigError([f"{path}: not a key (delete it and a new one is made)"])
    return key

"""The checks `run` makes before it starts anything, shared with `check-config` so the two never disagree.

The config file itself was validated when it was loaded (`bridge.config.file.load`); these are the checks that need the
installed software: at least one chat adapter configured, and each configured adapter importable (its extra
installed); and the HTTP server that `per_user` sign-ins come back to.
"""

from __future__ import annotations

import importlib

from bridge.config.file import Config
from bridge.servers.session_keys import personal

ADAPTERS = ("console", "slack", "matrix")


def problems(config: Config) -> list[str]:
    """Every reason `run` would refuse this config, as "path: problem" lines."""
    found: list[str] = []
    if not config.chat:
        found.append(f"chat: configure at least one adapter ({', '.join(ADAPTERS[:-1])} or {ADAPTERS[-1]})")
    for name in config.chat:
        problem = adapter_import_problem(name)
        if problem:
            found.append(problem)
    if config.chat and not config.http.listen:
        found.extend(f"servers.{name}.auth: per_user in chat needs http.listen: each person's sign-in comes back to "
                     "the bridge's HTTP server (<http.public_url>/oauth/callback)"
                     for name, server in config.servers.items() if personal(server) and not server.disabled)
    return found


def adapter_import_problem(name: str) -> str | None:
    """Why `adapters.<name>` cannot be imported, or None. Imported by name: the core never imports adapters."""
    try:
        importlib.import_module(f"adapters.{name}")
    except ImportError as exc:
        missing = f" ({exc.name} is missing)" if exc.name and exc.name != f"adapters.{name}" else ""
        return (f"chat.{name}: the {name} adapter's dependencies are not installed{missing}: install the bridge with "
                f"its {name} extra, e.g. pip install '.[{name}]' in a clone (see Installing in the README)")
    return None

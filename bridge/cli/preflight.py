"""The checks `run` makes before it starts anything, shared with `check-config` so the two never disagree.

The config file itself was validated when it was loaded (`bridge.config.file.load`); these are the checks that need the
installed software and the environment: at least one chat adapter configured, and each configured adapter importable
(its extra installed); the model provider's SDK and the Postgres driver installed when configured (looked up, not
imported: `check-config` stays quick); the key that encrypts stored OAuth tokens set wherever a token store will be
opened; and the HTTP server that `per_user` sign-ins come back to.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Mapping

from bridge.config.file import Config
from bridge.servers.session_keys import personal

ADAPTERS = ("console", "slack", "matrix")


_POSTGRES = ("postgresql://", "postgres://")


def problems(config: Config, env: Mapping[str, str] | None = None) -> list[str]:
    """Every reason `run` would refuse this config, as "path: problem" lines."""
    env = os.environ if env is None else env
    found: list[str] = []
    if not config.chat:
        found.append(f"chat: configure at least one adapter ({', '.join(ADAPTERS[:-1])} or {ADAPTERS[-1]})")
    for name in config.chat:
        problem = adapter_import_problem(name)
        if problem:
            found.append(problem)
    if config.chat and not config.http.listen:
        found.extend(f"servers.{name}.auth: {server.auth.identity} in chat needs http.listen: each person's sign-in "
                     "comes back to the bridge's HTTP server (<http.public_url>/oauth/callback)"
                     for name, server in config.servers.items() if personal(server) and not server.disabled)
    if config.chat and config.identity_provider is not None and config.identity_provider.id_token is not None:
        found.append("identity_provider.id_token: one ID token is one person; in chat everyone would use that "
                     "person's accounts. Leave it out: each person signs in with the company themselves")
    if config.llm.provider in ("openai", "anthropic") and not _installed(config.llm.provider):
        found.append(f"llm.provider: {config.llm.provider} needs its SDK, which is not installed: install the bridge "
                     "with its llm extra, e.g. pip install '.[llm]' in a clone (see Installing in the README)")
    for key, target in (("store", config.store), ("token_store", config.token_store or "")):
        if target.startswith(_POSTGRES) and not (_installed("psycopg") and _installed("psycopg_pool")):
            found.append(f"{key}: a Postgres store needs psycopg, which is not installed: install the bridge with its "
                         "postgres extra, e.g. pip install '.[postgres]' in a clone (see Installing in the README)")
            break
    found.extend(_token_key_problems(config, env))
    return found


def _token_key_problems(config: Config, env: Mapping[str, str]) -> list[str]:
    """A url server whose tokens go to an encrypted store opens it with the key in its variable: named when unset."""
    found: list[str] = []
    for name, server in config.servers.items():
        key_env = server.auth.key_env or config.secrets_key_env
        if (server.url and not server.disabled and server.auth.identity != "none" and key_env
                and config.token_store and not env.get(key_env, "").strip()):
            found.append(f"servers.{name}.auth: its OAuth tokens are kept encrypted in the token store, but the "
                         f"environment variable {key_env} (the key) is not set (32 random bytes, base64: "
                         "`openssl rand -base64 32`)")
    return found


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def adapter_import_problem(name: str) -> str | None:
    """Why `adapters.<name>` cannot be imported, or None. Imported by name: the core never imports adapters."""
    try:
        importlib.import_module(f"adapters.{name}")
    except ImportError as exc:
        missing = f" ({exc.name} is missing)" if exc.name and exc.name != f"adapters.{name}" else ""
        return (f"chat.{name}: the {name} adapter's dependencies are not installed{missing}: install the bridge with "
                f"its {name} extra, e.g. pip install '.[{name}]' in a clone (see Installing in the README)")
    return None

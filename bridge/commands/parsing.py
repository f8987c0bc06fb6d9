"""Chat commands: the same words on every platform, parsed here without I/O.

`!mcp call everything echo {"message": "hi"}` on the console and Matrix, `/mcp call ...` or a mention on Slack: the
adapter strips its own prefix or mention and passes the rest. Parsing never raises for bad input: it returns a
`Command` whose `error` says what to type instead.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from typing import Any

HELP = """Commands (prefix them with !mcp, or /mcp on Slack):
  help                               this list
  servers                            configured servers, their state and protocol version
  tools [server] [tool]              tools of one server (or of all), with their arguments; one tool in full
  call <server> <tool> [json]        run a tool, e.g. call demo echo {"message": "hi"}
  pending                            requests waiting for someone in this conversation
  cancel [id]                        cancel a waiting request (the newest if no id), or a running call
  stop [id]                          stop a running call or task (the newest if no id); a task is cancelled at
                                     its server, which says how it ended
  prompts [server]                   prompts a server offers
  prompt <server> <name> [k=v ...]   get a prompt (asks for missing arguments)
  resources [server]                 resources a server offers
  read <server> <uri>                read a resource
  roots | roots add <uri> [name] | roots remove <uri>
                                     the folders servers may see in this conversation
  show <id>                          everything a waiting request shows, in full
  reset                              forget this conversation's agent history
  grants                             approvals that hold here beyond one call (Allow for …)
  revoke <grant id>                  end a grant
  usage                              your and this conversation's model tokens today, against the budgets
  accounts                           the servers you connected your own account to
  logout <server>                    forget (and revoke) your own account's sign-in for a server
  logout --all                       sign out everywhere (the company sign-in and every server's access)"""

NAMES = ("help", "servers", "tools", "call", "pending", "cancel", "stop", "prompts", "prompt", "resources", "read",
         "roots", "reset", "show", "grants", "revoke", "usage", "accounts", "logout")


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    args: tuple[str, ...] = ()
    arguments: dict[str, Any] = field(default_factory=dict)
    """Parsed JSON (or key=value) arguments, for `call` and `prompt`."""
    error: str = ""


def parse(text: str) -> Command:
    """Parse a command line (without the platform's prefix)."""
    stripped = text.strip()
    if not stripped:
        return Command("help")
    head, _, rest = stripped.partition(" ")
    name = head.lower()
    if name not in NAMES:
        return Command(name, error=f"Unknown command {head!r}. Try `help`.")
    rest = rest.strip()
    if name == "call":
        return _parse_call(rest)
    if name == "prompt":
        return _parse_prompt(rest)
    try:
        args = tuple(shlex.split(rest))
    except ValueError as exc:
        return Command(name, error=f"Could not read the arguments: {exc}.")
    if name in ("read",) and len(args) != 2:
        return Command(name, error="Usage: read <server> <uri>")
    if name == "revoke" and len(args) != 1:
        return Command(name, error="Usage: revoke <grant id> (see `grants`)")
    if name == "logout" and len(args) != 1:
        return Command(name, error="Usage: logout <server> or logout --all (see `accounts`)")
    if name == "roots" and args and args[0] not in ("add", "remove"):
        return Command(name, error="Usage: roots | roots add <uri> [name] | roots remove <uri>")
    if name == "roots" and args and len(args) < 2:
        return Command(name, error=f"Usage: roots {args[0]} <uri>" + (" [name]" if args[0] == "add" else ""))
    return Command(name, args)


def _parse_call(rest: str) -> Command:
    parts = rest.split(None, 2)
    if len(parts) < 2:
        return Command("call", error="Usage: call <server> <tool> [json-arguments]")
    server, tool = parts[0], parts[1]
    raw = parts[2].strip() if len(parts) == 3 else ""
    if not raw:
        return Command("call", (server, tool))
    try:
        arguments = json.loads(raw)
    except json.JSONDecodeError as exc:
        return Command("call", (server, tool),
                       error=f"The arguments are not valid JSON ({exc.msg} at column {exc.colno}). "
                             'Write them as an object, e.g. {"message": "hi"}.')
    if not isinstance(arguments, dict):
        return Command("call", (server, tool), error='The arguments must be a JSON object, e.g. {"message": "hi"}.')
    return Command("call", (server, tool), arguments)


def _parse_prompt(rest: str) -> Command:
    try:
        parts = shlex.split(rest)
    except ValueError as exc:
        return Command("prompt", error=f"Could not read the arguments: {exc}.")
    if len(parts) < 2:
        return Command("prompt", error="Usage: prompt <server> <name> [key=value ...]")
    arguments: dict[str, Any] = {}
    for item in parts[2:]:
        key, eq, value = item.partition("=")
        if not eq or not key:
            return Command("prompt", (parts[0], parts[1]), error=f"Prompt arguments are key=value; got {item!r}.")
        arguments[key] = value
    return Command("prompt", (parts[0], parts[1]), arguments)

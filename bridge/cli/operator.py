"""The operator's commands: `pending`, `grants`, `revoke`, `accounts` and `usage`, read from the store a bridge
uses (its config's `store:`), with the words and queries the chat commands use (`bridge.commands.listings`,
`bridge.requests.grants`, `.budgets`), across every conversation instead of one. `--json` prints one JSON document.

The store is opened without registering a worker (nothing is resumed, nobody's lease changes). A SQLite store is
one process's: these commands wait for no lock and say so when the bridge holds it (stop it, or use the chat
commands); a Postgres store is read beside the running workers.
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from bridge import DEFAULT_STORE

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from bridge.door.model import ConversationKey
    from bridge.storage import AsyncStore

COMMANDS = ("pending", "grants", "revoke", "accounts", "usage")
EXIT_OK, EXIT_NOT_FOUND = 0, 1

_HELP = {
    "pending": "list the requests waiting for someone, in every conversation (chat: pending)",
    "grants": "list the grants that hold now, everywhere (chat: grants)",
    "revoke": "end a grant by its id (chat: revoke)",
    "accounts": "list who connected their own account to which server (chat: accounts)",
    "usage": "today's model tokens per person and conversation, against the budgets (chat: usage)",
}


def register(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Add the operator's subcommands to the CLI's subparsers."""
    for name in COMMANDS:
        cmd = sub.add_parser(name, parents=parents, help=_HELP[name], description=_HELP[name])
        cmd.add_argument("-c", "--config", help=f"the bridge's config file: its store is read (default store: "
                                                f"{DEFAULT_STORE})")
        cmd.add_argument("--store", help="the store itself (a SQLite file or a postgresql:// URL), instead of -c")
        cmd.add_argument("--json", action="store_true", help="print JSON instead of lines")
        if name == "revoke":
            cmd.add_argument("grant", help="the grant's id, as `grants` shows it")


def run(args: argparse.Namespace) -> int:
    import anyio

    from bridge.config.file import store_path

    target = args.store or (store_path(args.config) if args.config else DEFAULT_STORE)
    return anyio.run(_COMMANDS[args.command], args, target)


@asynccontextmanager
async def opened(target: str) -> AsyncIterator[AsyncStore]:
    """The store's rows through the code `run` uses, its schema brought up to date, no worker registered."""
    from bridge.storage import is_postgres
    from bridge.storage.driver import Driver
    from bridge.storage.migrations import migrate
    from bridge.storage.sqlstore import SqlStore

    if is_postgres(target):
        from bridge.storage.postgres import PostgresDriver

        driver: Driver = await PostgresDriver.open(target, max_size=2)
    else:
        from bridge.storage.sqlite import SqliteDriver

        driver = await SqliteDriver.open(target)
    try:
        await migrate(driver)
        yield SqlStore(driver, f"operator:{getpass.getuser()}")
    finally:
        await driver.aclose()


def _print_json(value: Any) -> None:
    json.dump(value, sys.stdout, indent=2)
    print()


async def _pending(args: argparse.Namespace, target: str) -> int:
    from bridge.commands import listings

    async with opened(target) as store:
        rows = [row.interaction for row in await store.open_interactions()]
    if args.json:
        _print_json([listings.pending_json(i) for i in rows])
        return EXIT_OK
    if not rows:
        print("Nothing is waiting for anyone.")
        return EXIT_OK
    now = time.time()
    for conversation in dict.fromkeys(i.conversation.id() for i in rows):
        print(f"{conversation}:")
        for i in rows:
            if i.conversation.id() == conversation:
                print(f"  {listings.pending_line(i, now)}")
    return EXIT_OK


async def _grants(args: argparse.Namespace, target: str) -> int:
    from bridge.commands import listings
    from bridge.requests.grants import Grants

    async with opened(target) as store:
        grants = Grants(store, _no_chat)
        held = await grants.everywhere()
    if args.json:
        _print_json([listings.grant_json(g) for g in held])
        return EXIT_OK
    if not held:
        print("No grants hold anywhere.")
    now = time.time()
    for grant in held:
        print(f"• {grant.describe(now)} ({grant.place})")
    return EXIT_OK


async def _revoke(args: argparse.Namespace, target: str) -> int:
    from bridge.commands import listings
    from bridge.door.model import Actor
    from bridge.requests.grants import Grants

    async with opened(target) as store:
        grants = Grants(store, _no_chat)
        grant = next((g for g in await grants.everywhere() if g.id == args.grant), None)
        if grant is not None:
            user = getpass.getuser()
            await grants.revoke(grant, Actor("operator", user, user))
    if grant is None:
        print(f"No grant {args.grant!r} holds now; see `grants`.", file=sys.stderr)
        return EXIT_NOT_FOUND
    if args.json:
        _print_json({"revoked": listings.grant_json(grant)})
    else:
        print(f"Revoked {grant.id}: {grant.what()} ({grant.place}) asks again.")
    return EXIT_OK


async def _usage(args: argparse.Namespace, target: str) -> int:
    from bridge.commands import listings
    from bridge.config.file import budgets_config
    from bridge.config.team import BudgetLimits
    from bridge.requests.budgets import Budgets, standing_line

    limits = budgets_config(args.config) if args.config else BudgetLimits()
    async with opened(target) as store:
        budgets = Budgets(limits, store)
        standings = await budgets.everyone_today()
    if args.json:
        _print_json([listings.standing_json(s) for s in standings])
        return EXIT_OK
    if not standings:
        print("Nobody has used the model today (UTC).")
        return EXIT_OK
    print("Model use today (UTC):")
    for standing in standings:
        print(standing_line(standing))
    print(f"Budgets reset {budgets.resets()}.")
    return EXIT_OK


async def _accounts(args: argparse.Namespace, target: str) -> int:
    from bridge.auth.accounts import every_account
    from bridge.config.file import load

    if not args.config:
        print("accounts needs -c FILE: the config says which servers use each person's own account.", file=sys.stderr)
        return 2
    connected = await every_account(load(args.config))
    if args.json:
        _print_json([{"server": server, "person": person} for server, person in connected])
        return EXIT_OK
    if not connected:
        print("Nobody has connected their own account to a server.")
    for server, person in connected:
        print(f"• {person}: {server}")
    return EXIT_OK


async def _no_chat(conversation: ConversationKey, text: str) -> None:
    raise AssertionError("the operator's commands say nothing in chat")


_COMMANDS: dict[str, Callable[[argparse.Namespace, str], Awaitable[int]]] = {
    "pending": _pending, "grants": _grants, "revoke": _revoke, "accounts": _accounts, "usage": _usage}

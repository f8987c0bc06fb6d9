"""Parts are wired in their constructors: no object assigns an attribute of another after it is built.

A part gets what it needs as constructor arguments (the part, or the small protocol it uses); nothing reaches into a
collaborator to set a callback or an option on it later (`broker.on_parked = ...`, `host.pool.auth = ...`), which hid
who depends on whom and made the order of the composition root matter. Checked over the source: an assignment to an
attribute of an attribute (`a.b.c = ...`, `self.a.b = ...`), or, in an `__init__`, to an attribute of one of its
parameters. Mutable records changed by the module that owns them (`waiter.final = ...`, `session.tools = ...`) are
not wiring and pass. What is left is the short list below, each with why.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

ALLOWED: dict[tuple[str, str], str] = {
    ("bridge/auth/accounts.py", "self.consent.admin"):
        "the accounts set their own consent part when the CLI names the config file",
    ("bridge/auth/accounts.py", "self.consent.redirect"):
        "the accounts set their own consent part when the sign-in redirect is routed on the HTTP server (built "
        "beside the host; tests route it on a running host)",
    ("bridge/auth/oauth.py", "self.context.client_info"): "the MCP SDK's OAuth context is set through its attributes",
    ("bridge/auth/oauth.py", "self.context.client_metadata.redirect_uris"): "the same SDK context",
    ("bridge/auth/oauth.py", "self._fixed_client.redirect_uris"): "the SDK's client information model",
    ("bridge/auth/oauth.py", "self._client.issuer"):
        "the SDK's ID-JAG provider keeps the authorization server on its client, set once it is discovered",
    ("adapters/matrix/client.py", "self._nio.access_token"): "matrix-nio's client is set through its attributes",
    ("adapters/matrix/client.py", "self._nio.user_id"): "matrix-nio's client",
    ("adapters/matrix/client.py", "self._nio.next_batch"): "matrix-nio's client",
    ("bridge/servers/sessions.py", "self._session.borrowed"): "a record: the borrow counter of the session lent",
    ("adapters/matrix/formflow.py", "card.form.pill"): "a record: a card's form state, owned by the form flow",
    ("adapters/matrix/formflow.py", "card.form.reask"): "a record: a card's form state, owned by the form flow",
    ("adapters/matrix/sync.py", "self.client.next_batch"): "a record: where the next sync starts",
    ("adapters/matrix/sync.py", "self.connection.failing"): "a record: the connection state readiness reads",
}


def wiring_after_construction(source: str) -> list[tuple[int, str]]:
    """(line, target) of each assignment that sets an attribute of another object."""
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, function: ast.FunctionDef | ast.AsyncFunctionDef | None) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = node
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            for one in target.elts if isinstance(target, ast.Tuple | ast.List) else [target]:
                if isinstance(one, ast.Attribute) and _onto_another(one, function):
                    found.append((one.lineno, ast.unparse(one)))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(ast.parse(source), None)
    return found


def _onto_another(target: ast.Attribute, function: ast.FunctionDef | ast.AsyncFunctionDef | None) -> bool:
    base = target.value
    if not isinstance(base, ast.Name):
        return True  # an attribute of an attribute: a collaborator's (or its part's)
    if base.id in ("self", "cls") or function is None or function.name != "__init__":
        return False
    arguments = function.args
    return base.id in {a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)}


def test_no_part_is_wired_after_construction() -> None:
    found = [f"{path}:{line}: {target} = ..."
             for path in sorted(p.relative_to(ROOT).as_posix()
                                for top in ("bridge", "adapters") for p in (ROOT / top).rglob("*.py"))
             for line, target in wiring_after_construction((ROOT / path).read_text("utf-8"))
             if (path, target) not in ALLOWED]
    assert found == []


def test_the_check_sees_late_wiring() -> None:
    source = '''
class Rounds:
    def __init__(self, broker):
        self.parked = {}
        broker.on_parked = self._answered

def terminal(host, record):
    host.calls.restart_hint = False
    record.driving = True
'''
    assert wiring_after_construction(source) == [(5, "broker.on_parked"), (8, "host.calls.restart_hint")]


def test_every_allowed_assignment_is_still_there() -> None:
    present = {(path, target) for path, _ in ALLOWED
               for _, target in wiring_after_construction((ROOT / path).read_text("utf-8"))}
    assert set(ALLOWED) <= present

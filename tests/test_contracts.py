"""The import contracts in pyproject.toml hold what they say.

The adapters' contract is an allow-list written as a `forbidden` contract: every module of the core is forbidden to
adapters except the few named in ALLOWED. Two things keep it honest: the forbidden list covers every module of the
core that is not allowed (so a new module starts closed), and `lint-imports` really fails when an adapter imports one.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ALLOWED = {
    "bridge.door.ports", "bridge.door.model", "bridge.errors", "bridge.config.file", "bridge.door.forms",
    "bridge.text.plain",
    "bridge.text.presentation", "bridge.text.durations", "bridge.text.questions", "bridge.safety.sanitize",
    "bridge.safety.browser_url", "bridge.safety.ratelimit", "bridge.web.guard", "bridge.observe.hooks",
}
"""What adapters may import of the core (the list pyproject.toml's contract states in words)."""
ADAPTERS_CONTRACT = "Adapters import from an allow-list"


def _contracts() -> list[dict[str, object]]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    contracts: list[dict[str, object]] = data["tool"]["importlinter"]["contracts"]
    return contracts


def _forbidden() -> list[str]:
    [contract] = [c for c in _contracts() if str(c["name"]).startswith(ADAPTERS_CONTRACT)]
    modules = contract["forbidden_modules"]
    assert isinstance(modules, list)
    return [str(m) for m in modules]


def _core_modules() -> set[str]:
    """Every module of the core, packages named by their `__init__` (the root package and `__main__` aside)."""
    found = set()
    for path in (ROOT / "bridge").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__main__":
            continue
        found.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found - {"bridge"}


def _covered(module: str, forbidden: list[str]) -> bool:
    return any(module == f or module.startswith(f + ".") for f in forbidden)


def test_the_adapters_contract_forbids_every_core_module_it_does_not_allow() -> None:
    forbidden = _forbidden()
    modules = _core_modules()
    # A package the allow-list reaches into is allowed as a package (its __init__ holds only a docstring, or, for
    # forms, the face adapters use); its modules are each forbidden or allowed.
    opened = {m.rsplit(".", 1)[0] for m in ALLOWED if m.count(".") > 1}
    open_faces = {p for p in opened if p in modules}
    loose = sorted(m for m in modules - ALLOWED - open_faces if not _covered(m, forbidden))
    assert loose == [], f"core modules adapters may import without being on the allow-list: {loose}"
    assert not [m for m in ALLOWED if _covered(m, forbidden)], "an allowed module is also forbidden"
    assert modules >= ALLOWED, f"allowed modules that do not exist: {sorted(ALLOWED - modules)}"
    for face in open_faces - {"bridge.door.forms"}:
        init = ROOT / "bridge" / face.split(".")[1] / "__init__.py"
        assert "import" not in init.read_text("utf-8"), f"{face}'s __init__ would let adapters reach past the list"


def test_an_adapter_importing_a_forbidden_core_module_breaks_the_contract(tmp_path: Path) -> None:
    lint = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    copy = tmp_path / "tree"
    for part in ("bridge", "adapters"):
        shutil.copytree(ROOT / part, copy / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run([lint, "--config", str(copy / "pyproject.toml"), "--no-cache"], cwd=copy,
                              capture_output=True, text=True, timeout=600, env={"PYTHONPATH": str(copy), "PATH": ""})

    kept = run()
    assert kept.returncode == 0, kept.stdout + kept.stderr
    # A module the core grew after the list was written: it is closed to adapters without anyone naming it.
    (copy / "bridge" / "cards" / "scratch_new.py").write_text('"""A new core module."""\n', "utf-8")
    (copy / "adapters" / "console" / "scratch.py").write_text(
        '"""An adapter module that reaches past the door."""\n\nimport bridge.cards.scratch_new  # noqa: F401\n',
        "utf-8")
    broken = run()
    assert broken.returncode != 0
    assert "adapters.console.scratch -> bridge.cards.scratch_new" in broken.stdout, broken.stdout

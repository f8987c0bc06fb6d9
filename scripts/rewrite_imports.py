#!/usr/bin/env python3
"""Rewrite references to the flat `bridge.<module>` paths into their packages (issue 22's moves).

Run from a checkout's root:  python scripts/rewrite_imports.py [--moves moves.tsv] [--check] [--no-ruff] [paths...]

The mapping is moves.tsv at the checkout's root (old dotted module <TAB> new dotted module). What is rewritten, in every
tracked or new file named *.py, *.pyi, *.toml, *.md, *.rst, *.txt, *.yaml, *.yml, *.json, *.sh, *.cfg, *.ini,
Dockerfile*, and everything under deploy/ and docs/:

- `from bridge import x, y as z`: each moved name becomes `from bridge.pkg import x` (or `import new as x`
  when the module was renamed), names that did not move stay;
- `from bridge.x import ...`, `import bridge.x`, dotted names `bridge.x.Name` in code and strings (monkeypatch
  targets, logger names, `-m bridge.x`, `bridge.cli:main`), and file paths `bridge/x.py`.

Some new packages carry the name of an old module (`bridge.config` was config.py and is now the package whose
loading module is `bridge.config.file`). For those a reference is rewritten only where it plainly means the old
module: an import of names that are not submodules of the new package, `bridge.config.<attribute>`, or
`bridge.config:attribute`. A bare mention (`bridge.config` in prose or in a contract) names the package and is left
alone, and so is `-m bridge.cli` (the package has a `__main__`). That keeps the rewrite idempotent: a second run
changes nothing.

Logger names that are channels rather than module names ("bridge.audit", "bridge.audit.checkpoint") are kept.
Afterwards `ruff check --select I --fix` sorts the imports of the Python files it changed (skip with --no-ruff).
--check changes nothing and exits 1 when something would be rewritten (listing the files).
"""

from __future__ import annotations

import argparse
import io
import os
import re
import shutil
import subprocess
import sys
import tokenize
import unicodedata
from pathlib import Path

SUFFIXES = {".py", ".pyi", ".toml", ".md", ".rst", ".txt", ".yaml", ".yml", ".json", ".sh", ".cfg", ".ini"}
ALWAYS_DIRS = ("deploy/", "docs/")
SKIP_PARTS = {"node_modules", ".cache", ".venv", ".git", "__pycache__", ".mypy_cache", ".ruff_cache"}
# Whole quoted strings that look like module paths but are channel names: the log lines they name stay the same.
KEEP_LITERALS = ('"bridge.audit"', '"bridge.audit.checkpoint"', "'bridge.audit'", "'bridge.audit.checkpoint'")
# Packages runnable with `python -m` under their own name (they have a __main__.py).
RUNNABLE = {"bridge.cli"}
# Exact replacements of code that names a moved file by pieces rather than by a dotted path.
LITERAL = {
    'resources.files("bridge").joinpath("config.schema.json")':
        'resources.files("bridge.config").joinpath("schema.json")',
    'bridge/config.schema.json': 'bridge/config/schema.json',
    # forms.py became the package's face (it only ever handed the form model and schema building on).
    'bridge/forms.py': 'bridge/forms/__init__.py',
}
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
WIDTH = 120  # ruff's line-length
BEFORE = r"(?<![\w.\-/])"


def load_moves(path: Path) -> dict[str, str]:
    moves: dict[str, str] = {}
    for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        old, new = (part.strip() for part in line.split("\t"))
        if old in moves:
            sys.exit(f"{path}:{number}: {old} is mapped twice")
        if old != new:
            moves[old] = new
    return moves


class Rewriter:
    def __init__(self, moves: dict[str, str]) -> None:
        self.moves = moves
        new_modules = set(moves.values())
        # Every package the moves make, and the submodules each one holds.
        self.children: dict[str, set[str]] = {}
        for module in new_modules:
            parts = module.split(".")
            for i in range(2, len(parts)):
                self.children.setdefault(".".join(parts[:i]), set()).add(parts[i])
        # Old modules whose name is now a package: a bare mention means the package.
        self.collided = {old for old in moves if old in self.children}
        olds = sorted(moves, key=len, reverse=True)
        alt = "|".join(re.escape(o) for o in olds)
        self.dotted = re.compile(BEFORE + rf"({alt})(?![\w])((?:\.{IDENT})?)(:?)")
        self.from_bridge = re.compile(r"^([ \t]*)from bridge import (\(([^)]*)\)|[^\n#]*[^\s#])([ \t]*#[^\n]*)?$",
                                      re.MULTILINE)
        self.from_module = re.compile(rf"^([ \t]*)from ({alt}) import (\([^)]*\)|[^\n#]*[^\s#])", re.MULTILINE)
        self.paths = {f"bridge/{old.split('.', 1)[1]}.py": self.path_of(new) for old, new in moves.items()}
        path_alt = "|".join(re.escape(p) for p in sorted(self.paths, key=len, reverse=True))
        self.path_re = re.compile(r"(?<![\w.\-])(?<!tests/)(" + path_alt + r")(?![\w])")

    def path_of(self, module: str) -> str:
        return module.replace(".", "/") + ".py"

    # -- `from bridge import a, b as c`
    def _from_bridge(self, match: re.Match[str]) -> str:
        indent, body, inner, comment = match.group(1), match.group(2), match.group(3), match.group(4) or ""
        names = [n.strip() for n in (inner if inner is not None else body).replace("\n", " ").split(",") if n.strip()]
        stay: list[str] = []
        moved: dict[str, list[str]] = {}
        for item in names:
            name, _, alias = (part.strip() for part in item.partition(" as "))
            old = f"bridge.{name}"
            if old not in self.moves:
                stay.append(item)
                continue
            package, _, leaf = self.moves[old].rpartition(".")
            bound = alias or name
            moved.setdefault(package, []).append(leaf if leaf == bound else f"{leaf} as {bound}")
        if not moved:
            return match.group(0)
        lines = []
        if stay:
            lines.append(f"{indent}from bridge import {', '.join(stay)}")
        for package in sorted(moved):
            lines.append(f"{indent}from {package} import {', '.join(moved[package])}")
        lines[0] += comment
        return "\n".join(lines)

    # -- `from bridge.x import ...`: for a collided name only when the names are not the package's submodules
    def _from_module(self, match: re.Match[str]) -> str:
        indent, module, names = match.group(1), match.group(2), match.group(3)
        if module in self.collided:
            listed = [n.strip().partition(" as ")[0].strip() for n in names.strip("()").replace("\n", " ").split(",")]
            listed = [n for n in listed if n]
            inside = [n for n in listed if n in self.children[module]]
            if inside and len(inside) == len(listed):
                return match.group(0)
            if inside:
                raise SystemExit(f"cannot rewrite a mixed import: {match.group(0)!r}")
        return f"{indent}from {self.moves[module]} import {names}"

    def _dotted(self, match: re.Match[str]) -> str:
        old, attr, colon = match.group(1), match.group(2), match.group(3)
        text = match.string
        start, end = match.start(), match.end()
        quoted = text[start - 1:start] in "\"'" and text[end:end + 1] == text[start - 1:start] and start > 0
        if quoted and text[start - 1:end + 1] in KEEP_LITERALS:
            return match.group(0)
        if old in self.collided:
            leaf = attr[1:]
            if leaf and leaf in self.children[old]:
                return match.group(0)  # already the new package's submodule
            if not leaf and not colon:
                preceding = text[max(0, start - 40):start]
                # `import bridge.config` means the old module; any other bare mention names the package.
                if not re.search(r"(?:^|[\s;\"'])import\s+(?:[\w.]+\s*,\s*)*$", preceding):
                    return match.group(0)
        if old in RUNNABLE and not attr and not colon:
            preceding = text[max(0, start - 12):start]
            if re.search(r"-m\s+$", preceding) or quoted:
                return match.group(0)
        return self.moves[old] + attr + colon

    def rewrite(self, text: str) -> str:
        for before, after in LITERAL.items():
            text = text.replace(before, after)
        text = self.from_bridge.sub(self._from_bridge, text)
        text = self.from_module.sub(self._from_module, text)
        text = self._sub_dotted(text)
        text = self.path_re.sub(lambda m: self.paths[m.group(1)], text)
        return text

    def _sub_dotted(self, text: str) -> str:
        # Imports rewritten by _from_module are new names already; what is left are dotted mentions.
        return self.dotted.sub(self._dotted, text)


def prose_spans(text: str) -> list[tuple[int, int, int, int]]:
    """Where the comments and triple-quoted strings of Python source are: (row, col) start and end, 1-based rows."""
    spans = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT or (token.type == tokenize.STRING and token.string.lstrip("rRbBuUfF")
                                                  .startswith(('"""', "'''"))):
                spans.append((*token.start, *token.end))
    except (tokenize.TokenError, SyntaxError):
        return []
    return spans


def width(line: str) -> int:
    """A line's width as ruff counts it: wide characters (emoji, CJK) take two columns."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)


def wrap_long(old: str, new: str) -> tuple[str, list[int]]:
    """Lines the rewrite made longer than WIDTH: prose (a comment or docstring) is wrapped at a space, its overflow
    carried onto the next line of the same prose when it fits there; code is left and reported (row numbers)."""
    before = set(old.splitlines())
    lines = new.splitlines(keepends=True)
    spans = prose_spans(new)
    left: list[int] = []
    row = 0
    while row < len(lines):
        line = lines[row].rstrip("\n")
        if width(line) <= WIDTH or line in before:
            row += 1
            continue
        number = row + 1
        cut = line.rfind(" ", 0, WIDTH + 1 - (width(line) - len(line)))
        inside = [s for s in spans if (s[0], s[1]) <= (number, cut) and (number, cut) < (s[2], s[3])]
        if cut <= len(line) - len(line.lstrip()) or not inside:
            if not line.lstrip().startswith(("from ", "import ")):  # ruff's isort wraps those
                left.append(number)
            row += 1
            continue
        comment = inside[0][0] == number and line[inside[0][1]:].startswith("#")
        head, tail = line[:cut].rstrip(), line[cut + 1:]
        indent = line[: len(line) - len(line.lstrip())]
        if comment:
            indent = line[: inside[0][1]]
            indent = " " * (len(indent) - len(indent.lstrip())) if indent.strip() == "" else indent
        body = line[len(indent):].lstrip("# ") if comment else line.lstrip()
        lead = indent + ("# " if comment else "") + ("  " if body.startswith(("- ", "* ")) else "")
        following = lines[row + 1].rstrip("\n") if row + 1 < len(lines) else ""
        rest = following[len(lead):]
        same = (following.startswith(lead) and rest.strip() != "" and rest[:1] not in (" ", "-", "*", "|")
                and rest.strip() not in ('"""', "'''") and (comment or inside[0][2] > number))
        end = "\n"
        # Carry the overflow into the rest of the paragraph: the next line takes it, and is wrapped in its turn.
        lines[row:row + (2 if same else 1)] = [head + end, lead + tail + (" " + rest if same else "") + end]
        spans = prose_spans("".join(lines))
        row += 1
    return "".join(lines), left


def candidates(root: Path, given: list[str]) -> list[Path]:
    if given:
        listed = given
    else:
        done = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=root, check=True,
                              capture_output=True, text=True)
        listed = done.stdout.splitlines()
    picked = []
    for name in listed:
        path = Path(name)
        if SKIP_PARTS & set(path.parts) or path.is_symlink() or not (root / path).is_file():
            continue
        if path.name in {"moves.tsv", Path(__file__).name}:
            continue
        if path.suffix in SUFFIXES or path.name.startswith("Dockerfile") or name.startswith(ALWAYS_DIRS):
            picked.append(path)
    return picked


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", help="files to rewrite (default: every tracked or new file)")
    parser.add_argument("--moves", type=Path, default=Path(__file__).resolve().parents[1] / "moves.tsv")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a file would change")
    parser.add_argument("--no-ruff", action="store_true", help="do not sort the imports of changed Python files")
    args = parser.parse_args()
    root = Path.cwd()
    rewriter = Rewriter(load_moves(args.moves))
    changed: list[Path] = []
    for path in candidates(root, args.paths):
        try:
            text = (root / path).read_text("utf-8")
        except UnicodeDecodeError:
            continue
        new = rewriter.rewrite(text)
        if new != text and path.suffix in {".py", ".pyi"}:
            new, long_code = wrap_long(text, new)
            for number in long_code:
                print(f"{path}:{number}: longer than {WIDTH} characters after the rewrite; wrap it by hand")
        if new != text:
            changed.append(path)
            if not args.check:
                (root / path).write_text(new, "utf-8")
    for path in changed:
        print(("would rewrite " if args.check else "rewrote ") + str(path))
    if args.check:
        return 1 if changed else 0
    python = [p for p in changed if p.suffix in {".py", ".pyi"}]
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if python and not args.no_ruff and os.path.exists(ruff):
        subprocess.run([ruff, "check", "--quiet", "--select", "I", "--fix", *map(str, python)], cwd=root, check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())

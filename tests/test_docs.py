"""The documentation holds: the README is a short front door whose every command runs, every link in it and in docs/
resolves, the docs index lists every page, and the configuration reference is the one generated from the schema."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from bridge.config.file import load
from tests.harness.hosts import patient

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
GENERATOR = ROOT / "scripts/gen_config_doc.py"
README_LIMIT = 12 * 1024
# Values for the variables the README's configs name: any text will do, check-config never contacts a platform.
CHAT_ENV = {"SLACK_BOT_TOKEN": "xoxb-000-000-test", "SLACK_APP_TOKEN": "xapp-000-test",
            "MATRIX_BOT_PASSWORD": "not-a-real-password"}


def markdown_pages() -> list[Path]:
    return [README, ROOT / "CONTRIBUTING.md", *sorted(DOCS.glob("*.md"))]


def without_code(text: str) -> str:
    """Markdown with fenced blocks and inline code removed (links inside them are examples, not links)."""
    text = re.sub(r"^ *```.*?^ *```", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def fenced(text: str, language: str) -> list[str]:
    return list(re.findall(rf"^ *```{language}\n(.*?)^ *```", text, flags=re.M | re.S))


def shell_lines(text: str) -> list[str]:
    """Each command of the README's `sh` blocks, without its comment."""
    lines = []
    for block in fenced(text, "sh"):
        for line in block.splitlines():
            command = re.sub(r"\s+#\s.*$", "", line.strip())
            if command and not command.startswith("#"):
                lines.append(command)
    return lines


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out: set[str] = set()
    text = re.sub(r"^ *```.*?^ *```", "", page.read_text("utf-8"), flags=re.M | re.S)
    for heading in re.findall(r"^#{1,6} (.+)$", text, flags=re.M):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    return out


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_config_doc", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(argv: list[str], cwd: Path, env: dict[str, str], stdin: str | None = None,
        seconds: float = 60) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, cwd=cwd, env=env, input=stdin if stdin is not None else "", capture_output=True,
                          text=True, timeout=patient(seconds), check=False)
    assert done.returncode == 0, f"{argv} exited {done.returncode}:\n{(done.stdout + done.stderr)[-4000:]}"
    return done


def bridge_env(home: Path) -> dict[str, str]:
    """This checkout's bridge first on the import path, and this interpreter's `python` first on PATH."""
    return {**os.environ, **CHAT_ENV, "HOME": str(home), "XDG_STATE_HOME": str(home / "state"),
            "PYTHONPATH": str(ROOT), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


def as_bridge(command: str) -> str:
    """A README command with `mcp-chat-bridge` run from this checkout (the same entry point the script calls)."""
    return re.sub(r"^mcp-chat-bridge\b", f"{sys.executable} -m bridge.cli", command)


# --- the README -----------------------------------------------------------------------------------------------------


def test_the_readme_is_a_short_front_door() -> None:
    size = len(README.read_bytes())
    assert size <= README_LIMIT, f"README.md is {size} bytes; move detail into docs/ (limit {README_LIMIT})"


def test_every_command_the_readme_shows_is_one_this_file_checks() -> None:
    known = ("bash scripts/dev.sh demo", "bash scripts/dev.sh test", "git clone ", "cd ~/src/mcp-chat-bridge && ",
             "pip install ", "mcp-chat-bridge ")
    unknown = [line for line in shell_lines(README.read_text("utf-8")) if not line.startswith(known)]
    assert unknown == [], "teach tests/test_docs.py how to run these README commands"


def test_the_quickstart_demo_runs(tmp_path: Path) -> None:
    """`bash scripts/dev.sh demo`, run as shown, in a copy of the scripts whose environment is already set up (this
    interpreter's), so it goes straight to the demo; a scripted line gets its answer and end of input ends it."""
    assert "bash scripts/dev.sh demo" in shell_lines(README.read_text("utf-8"))
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts/dev.sh", repo / "scripts/dev.sh")
    shutil.copy(ROOT / "pyproject.toml", repo / "pyproject.toml")
    venv_bin = repo / ".venv/bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").symlink_to(sys.executable)
    (venv_bin / "mcp-chat-bridge").symlink_to(Path(sys.executable).parent / "mcp-chat-bridge")
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()[:16]
    (repo / ".venv/.installed-core").write_text(digest + "\n")
    done = run(["bash", "scripts/dev.sh", "demo"], repo, bridge_env(tmp_path),
               stdin='!mcp call demo echo {"message": "hello from the README"}\n')
    assert "hello from the README" in done.stdout


def test_the_quickstart_test_command_is_a_valid_script() -> None:
    """`bash scripts/dev.sh test` is the suite itself, so it is not run from inside it: the script parses and has
    the `test` entry the README names."""
    assert "bash scripts/dev.sh test" in shell_lines(README.read_text("utf-8"))
    run(["bash", "-n", str(ROOT / "scripts/dev.sh")], ROOT, dict(os.environ))
    assert re.search(r"^  test\)$", (ROOT / "scripts/dev.sh").read_text("utf-8"), flags=re.M)


def test_the_command_line_block_runs_against_the_readme_config(tmp_path: Path) -> None:
    """Every `mcp-chat-bridge` line, run as shown in a folder holding the README's config as bridge.yaml (its demo
    server over stdio); `run` serves the console until end of input, so it runs too."""
    text = README.read_text("utf-8")
    config = fenced(text, "yaml")[0]
    work = tmp_path / "work"
    work.mkdir()
    (work / "bridge.yaml").write_text(config)
    claude = tmp_path / ".config/Claude/claude_desktop_config.json"
    claude.parent.mkdir(parents=True)
    claude.write_text(json.dumps({"mcpServers": {"files": {
        "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv"],
        "env": {"API_TOKEN": "s3cret-value-123"}}}}))
    env = bridge_env(tmp_path)
    commands = [line for line in shell_lines(text) if line.startswith("mcp-chat-bridge ")]
    assert {c.split()[1] for c in commands} >= {"check-config", "run", "tools", "call", "import-servers", "audit"}
    outputs = {}
    for command in commands:
        outputs[command.split()[1]] = run(["bash", "-c", as_bridge(command)], work, env).stdout
    assert "plan_trip" in outputs["tools"] and outputs["call"].strip() == "hi"
    imported = (work / "bridge.yaml").read_text("utf-8")  # `import-servers --into` adds to the config in place
    assert "files:" in imported and "${API_TOKEN}" in imported and "s3cret" not in imported
    assert outputs["audit"].startswith("OK")


def test_every_config_the_readme_shows_passes_check_config(tmp_path: Path) -> None:
    configs = fenced(README.read_text("utf-8"), "yaml")
    assert len(configs) >= 3  # the demo's, Slack's, Matrix's
    for number, config in enumerate(configs):
        path = tmp_path / f"config-{number}.yaml"
        path.write_text(textwrap.dedent(config))
        run([sys.executable, "-m", "bridge.cli", "check-config", str(path)], tmp_path, bridge_env(tmp_path))


def test_every_command_named_in_the_readme_text_parses(tmp_path: Path) -> None:
    """Commands named in the text (`mcp-chat-bridge run -c bridge.yaml` in the Slack steps, say) serve until stopped
    or need an account: their subcommand's `--help` succeeds."""
    text = README.read_text("utf-8")
    inline = set(re.findall(r"`(mcp-chat-bridge [a-z-]+)[^`]*`", re.sub(r"^ *```.*?^ *```", "", text,
                                                                      flags=re.M | re.S)))
    assert "mcp-chat-bridge run" in inline
    for command in sorted(inline):
        run(["bash", "-c", as_bridge(command) + " --help"], tmp_path, bridge_env(tmp_path))


def test_every_extra_is_listed_under_installing() -> None:
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["optional-dependencies"])
    installing = README.read_text("utf-8").split("## Installing", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `([a-z]+)` \|", installing, flags=re.M))
    assert extras - {"core", "dev"} == listed  # core is empty (the demo's); dev is the test suite's
    assert "postgres" in listed and "not on PyPI" in installing


@pytest.mark.timeout(patient(600))
def test_the_install_commands_run(tmp_path: Path) -> None:
    """The Installing block, run as shown with REPO_URL set to this repository and HOME to a fresh folder: a clone,
    a virtual environment with the extras, then the clone again as a `git+file://` requirement."""
    lines = [line for line in shell_lines(README.read_text("utf-8"))
             if line.startswith(("git clone ", "cd ~/src/mcp-chat-bridge && ", "pip install "))]
    assert len(lines) == 3 and "git+file://" in lines[2]
    home = tmp_path / "home"
    home.mkdir()
    clone = home / "src/mcp-chat-bridge"
    env = {**os.environ, "HOME": str(home), "REPO_URL": str(ROOT), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    run(["bash", "-euc", "\n".join(lines[:2])], home, env, seconds=600)
    python = clone / ".venv/bin/python"
    where = run([str(python), "-c", "import bridge, slack_bolt, nio, openai; print(bridge.__file__)"], home,
                env).stdout
    assert str(clone / ".venv") in where  # installed, not imported from the clone's folder
    assert run([str(clone / ".venv/bin/mcp-chat-bridge"), "--version"], home, env).stdout.startswith(
        "mcp-chat-bridge ")

    # The pip requirement is the other way in: run it with a fresh environment's pip first on PATH.
    other = tmp_path / "other"
    run([sys.executable, "-m", "venv", str(other)], home, env)
    env["PATH"] = f"{other / 'bin'}{os.pathsep}{os.environ['PATH']}"
    run(["bash", "-euc", lines[2]], home, env, seconds=600)
    origin = run([str(other / "bin/python"), "-c", "import psycopg, importlib.metadata as m; "
                  "print(m.distribution('mcp-chat-bridge').read_text('direct_url.json'))"], home, env).stdout
    assert json.loads(origin)["url"] == f"file://localhost{clone}" and "vcs_info" in json.loads(origin)


# --- links and the docs index ---------------------------------------------------------------------------------------


def test_every_relative_link_resolves() -> None:
    broken = []
    for page in markdown_pages():
        text = without_code(page.read_text("utf-8"))
        targets = re.findall(r"\]\(([^)\s]+)\)", text) + re.findall(r'(?:src|href)="([^"]+)"', text)
        for target in targets:
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in anchors(file):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert broken == []


def test_the_docs_index_links_every_doc() -> None:
    index = DOCS / "README.md"
    linked = {Path(t.partition("#")[0]).name for t in re.findall(r"\]\(([^)\s#]+)", without_code(
        index.read_text("utf-8")))}
    pages = {p.name for p in DOCS.glob("*.md")} - {"README.md"}
    assert pages - linked == set()
    readme = without_code(README.read_text("utf-8"))
    assert "](docs/README.md)" in readme and "](CONTRIBUTING.md)" in readme


# --- the configuration reference ------------------------------------------------------------------------------------


def test_the_configuration_doc_is_the_generated_one() -> None:
    """docs/configuration.md is what scripts/gen_config_doc.py makes of the schema today (run it after editing the
    schema)."""
    run([sys.executable, str(GENERATOR), "--check"], ROOT, dict(os.environ))


def test_every_config_key_has_a_description() -> None:
    gen = generator()
    schema = json.loads(gen.SCHEMA.read_text("utf-8"))
    rows = gen.rows(schema, schema["$defs"], "")
    assert len(rows) > 100
    assert [key for key, _kind, _default, text in rows if not text.strip()] == []


def test_the_configuration_doc_keeps_what_the_readme_reference_said() -> None:
    """Facts the README's old reference table carried, which now live in the schema's descriptions."""
    page = (DOCS / "configuration.md").read_text("utf-8")
    for fact in ("one synced commit per decision", "random key per run", "oldest connection still waiting",
                 "150 MB answer", "An entry that can never match", "refused with error -32600",
                 "the least recently used idle one is closed", "per_user servers", "audit --verify -c reads it"):
        assert fact in page, fact


def test_the_shipped_example_config_is_valid() -> None:
    config = load(ROOT / "deploy/config.example.yaml", env={})
    assert set(config.servers) == {"everything", "remote"}


def test_the_readme_configs_are_yaml_mappings() -> None:
    for config in fenced(README.read_text("utf-8"), "yaml"):
        assert isinstance(yaml.safe_load(config), dict)

"""The package as a user gets it: a wheel built the way a release would be, installed in a fresh virtual environment
(no checkout on the path), running `--version` and `check-config` on the shipped example."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(*argv: str | Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=900, check=False, cwd=cwd,
                          env=env)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return done


@pytest.mark.timeout(1200)
def test_a_built_wheel_installs_and_runs_outside_the_checkout(tmp_path: Path) -> None:
    run(sys.executable, "-m", "build", "--wheel", "--outdir", tmp_path / "dist", ROOT, cwd=ROOT)
    [wheel] = (tmp_path / "dist").glob("mcp_chat_bridge-0.1.0-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "bridge/config/schema.json" in names and "adapters/console/adapter.py" in names
    assert not [n for n in names if n.startswith(("tests/", "bench/"))]

    run(sys.executable, "-m", "venv", tmp_path / "venv", cwd=tmp_path)
    python = tmp_path / "venv/bin/python"
    run(python, "-m", "pip", "install", "--quiet", wheel, cwd=tmp_path)
    # Run from an empty folder, so nothing of the checkout can be imported by accident.
    empty = tmp_path / "elsewhere"
    empty.mkdir()
    where = run(python, "-c", "import bridge; print(bridge.__file__)", cwd=empty).stdout
    assert str(tmp_path / "venv") in where
    cli = tmp_path / "venv/bin/mcp-chat-bridge"
    assert run(cli, "--version", cwd=empty).stdout.strip() == "mcp-chat-bridge 0.1.0"
    # The example keeps OAuth tokens encrypted: like `run`, check-config wants the key's variable set.
    key = dict(os.environ, BRIDGE_TOKEN_KEY=base64.b64encode(os.urandom(32)).decode())
    checked = run(cli, "check-config", ROOT / "deploy/config.example.yaml", cwd=empty, env=key).stdout
    assert checked.strip().endswith("OK (2 servers, chat: console)")

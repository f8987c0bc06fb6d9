"""The ext-apps host SDK the app page loads is built reproducibly from the pinned npm package: rebuilding it gives
the same bytes, its licences ship beside it, and the page's own script imports nothing from the network."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WEB = ROOT / "bridge/web/apps/web"


def test_rebuilding_the_app_bridge_bundle_gives_the_same_bytes(tmp_path: Path) -> None:
    if not (ROOT / "tests/npm/node_modules/.bin/esbuild").exists():
        pytest.fail("tests/npm is not installed: run `bash scripts/dev.sh test` (it runs npm ci in tests/npm)")
    subprocess.run(["bash", str(ROOT / "scripts/build_app_bridge.sh"), str(tmp_path)], check=True, timeout=120)
    assert (tmp_path / "app-bridge.js").read_bytes() == (WEB / "app-bridge.js").read_bytes()
    assert (tmp_path / "LICENSES.txt").read_bytes() == (WEB / "LICENSES.txt").read_bytes()


def test_the_bundle_names_its_version_and_every_bundled_package_has_its_licence() -> None:
    bundle = (WEB / "app-bridge.js").read_text("utf-8")
    assert bundle.startswith("// @modelcontextprotocol/ext-apps 2.0.4 AppBridge")
    licences = (WEB / "LICENSES.txt").read_text("utf-8")
    for package in ("@modelcontextprotocol/ext-apps 2.0.4 (MIT)", "@modelcontextprotocol/client", "zod"):
        assert package in licences
    assert re.search(r"^export\{.*AppBridge.*\};?\s*$", bundle.splitlines()[-1]) or "AppBridge" in bundle[-300:]


def test_the_pages_scripts_import_only_each_other() -> None:
    imports = re.findall(r"""^\s*import\b[^'"]*['"]([^'"]+)['"]""", (WEB / "host.js").read_text("utf-8"), re.M)
    assert imports == ["./app-bridge.js"]
    assert not re.search(r"""\bimport\s*\(|from\s*['"](?!\./)""", (WEB / "app-bridge.js").read_text("utf-8"))

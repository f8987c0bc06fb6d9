"""Pure text rendering for the terminal. Server text is untrusted: everything printed goes through the bridge's one
cleaner (`bridge.safety.sanitize.clean`: control characters, ANSI escapes that could rewrite the screen or fake a
prompt, bidi controls and invisible characters removed)."""

from __future__ import annotations

import time

from bridge.door.model import AppOffer, Interaction, Kind, Outcome, StatusView
from bridge.safety.sanitize import clean, visible
from bridge.text.durations import time_left
from bridge.text.plain import card_title, link_warning, secret_warning
from bridge.text.presentation import describe_outcome, describe_progress
from bridge.text.questions import Dialog, Question, option_lines

BAR = 20

__all__ = ["card_header", "clean", "finished", "question", "status", "summary"]


def card_header(interaction: Interaction, now: float | None = None) -> list[str]:
    left = time_left(interaction.expires_at - (time.time() if now is None else now))
    lines = [f"┌─ {clean(card_title(interaction))}  [id {interaction.id}, expires in {left}]"]
    for line in clean(interaction.message).splitlines() or [""]:
        lines.append(f"│ {line}")
    if interaction.kind is Kind.URL:
        # Shown character by character: an invisible character in a link is a warning sign, not something to hide.
        lines.append(f"│ URL:  {visible(interaction.url)}")
    for detail in interaction.details:
        body = clean(detail.text).splitlines() or [""]
        lines.append(f"│ {clean(detail.label)}: {body[0]}")
        lines.extend(f"│   {extra}" for extra in body[1:])
    for warning in (link_warning(interaction.url) if interaction.kind is Kind.URL else "", secret_warning(interaction)):
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


def app_offer(offer: AppOffer, url: str) -> str:
    """The line that opens a tool result's app: the link is the person's own, for one browser."""
    return (f"[app] {clean(offer.server.text())}.{clean(offer.tool)} has an app. Open it in your browser (your own "
            f"link, for one browser): {url}")


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

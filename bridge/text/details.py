"""`show <id>`: everything a waiting request shows, untruncated: the server's message, the URL of a link request with
its host as checked, every detail, and each field of a form with its type, range, default and options.

Pure; the text is plain and untrusted in parts (the adapter escapes and cleans it for its platform).
"""

from __future__ import annotations

import time

from bridge.door.forms import Field
from bridge.door.model import Interaction, Kind
from bridge.safety.browser_url import check_host
from bridge.safety.sanitize import visible
from bridge.text.durations import time_left
from bridge.text.plain import card_title, secret_warning
from bridge.text.questions import option_lines


def interaction_text(interaction: Interaction, now: float | None = None) -> str:
    i = interaction
    left = time_left(i.expires_at - (time.time() if now is None else now))
    parts = [f"{card_title(i)} [id {i.id}, expires in {left}]", i.message or "(no message)"]
    if i.kind is Kind.URL:
        parts.append(f"URL: {visible(i.url)}\nHost: {check_host(i.url).text()}")
    parts.extend(f"{d.label}:\n{d.text}" for d in i.details if not (i.kind is Kind.URL and d.label == "Host"))
    if i.form.fields:
        parts.append("Fields:\n" + "\n".join(_field(f) for f in i.form.fields))
    warning = secret_warning(i)
    if warning:
        parts.append(warning)
    return "\n\n".join(parts)


def _field(f: Field) -> str:
    lines = [f"• {f.title}" + (f" ({f.name})" if f.name != f.title else "") + f": {f.hint()}"
             + (", required" if f.required else "")]
    if f.description:
        lines.append(f"  {f.description}")
    lines.extend(f"    {line}" for line in option_lines(f.options))
    return "\n".join(lines)

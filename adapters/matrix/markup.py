"""Text for Matrix events: a plain body and its HTML kept together, untrusted text made inert, sizes in bytes. Pure.

Server text is untrusted. Every piece of it passes `bridge.safety.sanitize.clean` (no control, bidi or invisible
characters), then `defang`, which breaks `@room` and `matrix.to` visibly so that clients still matching legacy push
rules or pillifying permalinks cannot be steered by a server, and for the HTML `html.escape`. URLs are shown with
`bridge.safety.sanitize.visible`, so a hidden character in a link is shown as its code point rather than dropped.

Sizes are what the homeserver counts: event content as matrix-nio serialises it (`json.dumps`, ASCII escapes),
which is also what gets encrypted in an E2EE room. `Text.cost` is the bytes its body and HTML add to that, so parts
can be given budgets that add up; everything here is linear in its input (a 30 000-option list is built once and
cut, never re-concatenated).
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from bridge.safety.sanitize import clean, visible

_DEFANG = re.compile(r"@room|matrix\.to", re.IGNORECASE)
_JSON = json.JSONEncoder(ensure_ascii=True)


def defang(text: str) -> str:
    """Untrusted text made inert for plain bodies and HTML alike: no room pings, no permalink pills. Any case
    (`@Room`, `Matrix.TO`): push rules and clients match these case-insensitively. The change is visible (`@ room`,
    `matrix[.]to`) rather than an invisible joiner, so that no event carries zero-width characters."""
    return _DEFANG.sub(lambda m: "@ " + m.group()[1:] if m.group().startswith("@")
                       else m.group()[:6] + "[.]" + m.group()[7:], text)


def esc(text: str) -> str:
    """Untrusted text as HTML: cleaned, escaped, defanged, line breaks kept."""
    return html.escape(defang(clean(text))).replace("\n", "<br>")


def jlen(text: str) -> int:
    """Bytes a string takes inside event JSON as nio sends it (without the quotes)."""
    return len(_JSON.encode(text)) - 2


@dataclass(frozen=True, slots=True)
class Text:
    """A message as plain body and HTML body, kept together so they never disagree."""

    body: str
    html: str

    def __add__(self, other: Text) -> Text:
        return Text(self.body + other.body, self.html + other.html)

    @property
    def cost(self) -> int:
        return jlen(self.body) + jlen(self.html)

    def __bool__(self) -> bool:
        return bool(self.body or self.html)


EMPTY = Text("", "")
GAP = Text("", "")
"""An empty line between parts (`join_lines` drops other empty texts)."""


def plain(text: str) -> Text:
    text = clean(text)
    return Text(defang(text), html.escape(defang(text)).replace("\n", "<br>"))


def bold(text: str) -> Text:
    inner = plain(text)
    return Text(inner.body, f"<b>{inner.html}</b>")


def code(text: str) -> Text:
    """A URL or other literal: hidden characters shown as `[U+XXXX]`; defanged in the plain body (push rules read
    it), kept intact in the HTML `<code>` (escaped only; clients neither pillify nor ping there), so that a copied
    link works."""
    shown = visible(text)
    return Text(defang(shown), f"<code>{html.escape(shown)}</code>")


def line_break() -> Text:
    return Text("\n", "<br>")


def concat(parts: Iterable[Text]) -> Text:
    """Texts one after another, joined once (linear however many)."""
    items = list(parts)
    return Text("".join(p.body for p in items), "".join(p.html for p in items))


def join_lines(parts: Iterable[Text]) -> Text:
    """Non-empty texts on lines of their own, joined once (linear however many)."""
    items = [p for p in parts if p or p is GAP]
    return Text("\n".join(p.body for p in items), "<br>".join(p.html for p in items))


@dataclass(frozen=True, slots=True)
class Mention:
    user_id: str
    name: str

    def html(self) -> str:
        # The one link we write: to a person we chose, with their escaped name.
        return f'<a href="https://matrix.to/#/{html.escape(self.user_id)}">{esc(self.name)}</a>'

    def text(self) -> str:
        return defang(clean(self.name))

    def as_text(self) -> Text:
        return Text(self.text(), self.html())


def short(text: str, chars: int = 200) -> str:
    """Raw text cut to `chars` characters (for a value inside a sentence that must keep its end)."""
    return text if len(text) <= chars else text[:chars].rstrip() + more_note(len(text) - chars)


def more_note(n: int) -> str:
    return f"… [{n} more characters]"


def fit(text: str, limit: int, style: Callable[[str], Text] = plain) -> Text:
    """`style(text)`, shortened (with a note saying by how much) so that it costs at most `limit` bytes.

    `bridge.safety.sanitize.fit_bytes` does the same for one escaped string; here one raw text becomes two (body and
    HTML) that must be cut at the same place. Each character costs at least two bytes (one in each), so at most
    `limit // 2` characters can fit: the binary search runs over that prefix, whatever the length of `text`."""
    if 2 * len(text) <= 4 * limit:  # else it cannot fit, cleaned or not: skip styling all of it
        whole = style(text)
        if whole.cost <= limit:
            return whole
    lo, hi = 0, min(len(text), max(0, limit // 2))
    best = style(more_note(len(text)))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        candidate = style(text[:mid].rstrip() + more_note(len(text) - mid))
        if candidate.cost <= limit:
            lo, best = mid, candidate
        else:
            hi = mid - 1
    if lo == 0 and best.cost > limit:
        return EMPTY
    return best


def fit_items(items: Iterable[Text], limit: int, more: Callable[[int], Text], total: int) -> list[Text]:
    """As many of `items` as fit in `limit` bytes (with `more(n)` saying how many were left out), taking them one
    at a time: linear, so a choice of 30 000 options costs what the shown ones cost."""
    out: list[Text] = []
    used = 0
    reserve = more(total).cost + 8
    for n, item in enumerate(items):
        if used + item.cost + 8 > limit - reserve:
            out.append(more(total - n))
            return out
        out.append(item)
        used += item.cost + 8
    return out


def content_size(content: object) -> int:
    """Bytes of event content as nio serialises it."""
    return len(json.dumps(content, separators=(",", ":")))

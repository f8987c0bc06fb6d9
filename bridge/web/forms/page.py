"""The web form's pages: plain server-rendered HTML with no JavaScript, drawn by Jinja templates with autoescaping.

Everything a server sent (its title, the message, field titles, descriptions and options) and everything a person
typed is text that the templates escape; nothing is marked safe but the bridge's own style sheet. That style sheet is
inlined and allowed by its hash, so the Content-Security-Policy can forbid everything else: no scripts at all, no
images or fonts, no framing, forms posting only back here.
"""

from __future__ import annotations

import base64
import hashlib
import time
from collections.abc import Sequence
from importlib.resources import files

import jinja2
from markupsafe import Markup

from bridge.door.model import Actor, Interaction
from bridge.text.durations import in_words
from bridge.text.plain import card_title, secret_warning, shorten
from bridge.web.forms.fields import FieldView

MAX_MESSAGE = 4000
MAX_DETAIL = 4000

CSS = (files("bridge.web.forms") / "form.css").read_text("utf-8").strip()
_STYLE_HASH = base64.b64encode(hashlib.sha256(CSS.encode("utf-8")).digest()).decode("ascii")

CSP = ("default-src 'none'; "
       f"style-src 'sha256-{_STYLE_HASH}'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    # Same-origin (not no-referrer) so the browser sends a real Origin with the form post, which the route checks;
    # the page links nowhere, so the token in its address cannot leak through a referrer either way.
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}

_ENV = jinja2.Environment(
    # The page's skeleton (`page.html`) is the one app pages use too.
    loader=jinja2.ChoiceLoader([jinja2.PackageLoader("bridge.web.forms", "templates"),
                                jinja2.PackageLoader("bridge.web", "templates")]),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def form_page(interaction: Interaction, actor: Actor, action: str, fields: Sequence[FieldView], *,
              problem: str = "", now: float | None = None, expires_at: float) -> str:
    """The form for one interaction, as `actor` answers it, posting to `action`."""
    left = max(0.0, expires_at - (time.time() if now is None else now))
    return _ENV.get_template("form.html").render(
        css=Markup(CSS),
        page_title=f"{interaction.server.name}: answer a request",
        server=interaction.server.text(),
        title=card_title(interaction),
        message=shorten(interaction.message, MAX_MESSAGE),
        details=[{"label": d.label, "text": shorten(d.text, MAX_DETAIL)} for d in interaction.details],
        warning=secret_warning(interaction),
        problem=problem,
        action=action,
        fields=fields,
        accept_label=interaction.accept_label,
        decline_label=interaction.decline_label,
        person=actor.label(),
        ends_in=in_words(left),
    )


def notice_page(heading: str, *lines: str, ok: bool = False) -> str:
    """A page with a heading and a few plain sentences: thanks, or why a link cannot be used."""
    return _ENV.get_template("notice.html").render(css=Markup(CSS), page_title=heading, heading=heading,
                                                   lines=lines, ok=ok)

"""The sandbox's Content-Security-Policy, built from the resource's `_meta.ui.csp` and nothing more.

With no declaration an app reaches no network at all: its own inline scripts and styles, data: and blob: images and
media run, and nothing is fetched. Each declared list opens only its directives (`connectDomains` the connections,
`resourceDomains` scripts, styles, images, fonts and media, `frameDomains` frames, `baseUriDomains` the base URI).
There is no `'self'` anywhere: the sandbox's own origin is the bridge, which an app has no business calling. A source
that could break out of its directive (`;`, quotes, spaces, commas, control characters) or widen it to everything
(`*`, a bare scheme) is dropped: the policy is the server's declaration, but never more than origins.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_SOURCE = re.compile(r"^(https?|wss?)://(\*\.)?[A-Za-z0-9.-]+(:[0-9]{1,5}|:\*)?(/[A-Za-z0-9._~/%-]*)?$")


def sources(declared: Any) -> list[str]:
    """The usable origins of one declared list (at most 64)."""
    if not isinstance(declared, list):
        return []
    return [s for s in declared if isinstance(s, str) and _SOURCE.match(s)][:64]


def policy(csp: Mapping[str, Any] | None, host_origin: str) -> str:
    """The policy of the sandbox page (inherited by the app's frame inside it); framed only by the bridge's page."""
    csp = csp or {}
    resources = " ".join(sources(csp.get("resourceDomains")))
    connect = " ".join(sources(csp.get("connectDomains"))) or "'none'"
    frames = " ".join(sources(csp.get("frameDomains"))) or "'none'"
    base = " ".join(sources(csp.get("baseUriDomains"))) or "'none'"

    def with_resources(*fixed: str) -> str:
        return " ".join([*fixed, resources]).strip()

    inline = "'unsafe-inline'"

    return "; ".join([
        "default-src 'none'",
        f"script-src {with_resources(inline)}",
        f"style-src {with_resources(inline)}",
        f"img-src {with_resources('data:', 'blob:')}",
        f"font-src {with_resources('data:')}",
        f"media-src {with_resources('data:', 'blob:')}",
        f"connect-src {connect}",
        f"frame-src {frames}",
        f"base-uri {base}",
        "form-action 'none'",
        "object-src 'none'",
        f"frame-ancestors {host_origin}",
    ])

"""The app page and the sandbox page: HTML drawn by Jinja templates with autoescaping, and their headers.

The app page (the bridge's origin) runs only the bridge's own scripts (`web/host.js` and the bundled ext-apps host
SDK), frames only the sandbox origin, and talks only to its own origin. The sandbox page (the second origin) holds the
relay and the app's frame; its policy is the resource's (`bridge.web.apps.csp`), and it may be framed only by the
bridge.
"""

from __future__ import annotations

from importlib.resources import files

import jinja2

# The page's skeleton (`page.html`) is the one web forms use too.
_LOADER = jinja2.ChoiceLoader([jinja2.PackageLoader("bridge.web.apps", "templates"),
                               jinja2.PackageLoader("bridge.web", "templates")])
_ENV = jinja2.Environment(loader=_LOADER, autoescape=True,
                          undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)

COMMON = {"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"}


def page_headers(sandbox_origin: str) -> dict[str, str]:
    csp = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
           f"frame-src {sandbox_origin}; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
    # The page's address holds the link's token: no referrer carries it anywhere.
    return {**COMMON, "Content-Security-Policy": csp, "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer"}


def sandbox_headers(policy: str) -> dict[str, str]:
    return {**COMMON, "Content-Security-Policy": policy, "Referrer-Policy": "no-referrer"}


def app_page(server: str, title: str, person: str, ends_in: str) -> str:
    return _ENV.get_template("app.html").render(page_title=f"{server}: {title}", server=server, title=title,
                                                person=person, ends_in=ends_in)


def sandbox_page(host_origin: str) -> str:
    return _ENV.get_template("sandbox.html").render(host_origin=host_origin)


def notice(heading: str, *lines: str, css: str = "../app-static/app.css") -> str:
    """A page with a heading and a few plain sentences: why a link cannot be used."""
    return _ENV.get_template("notice.html").render(page_title=heading, heading=heading, lines=lines, css=css)


_WEB = files("bridge.web.apps") / "web"
STATIC = {
    "host.js": ("text/javascript; charset=utf-8", (_WEB / "host.js").read_bytes()),
    "app-bridge.js": ("text/javascript; charset=utf-8", (_WEB / "app-bridge.js").read_bytes()),
    "app.css": ("text/css; charset=utf-8", (_WEB / "app.css").read_bytes()),
    "LICENSES.txt": ("text/plain; charset=utf-8", (_WEB / "LICENSES.txt").read_bytes()),
}
"""The page's own files, served from the package: the page needs no other network."""

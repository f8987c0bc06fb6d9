"""Web forms: a one-time link from a chat card to a plain HTML form a person can finish on a phone.

`web_forms(config.http, server, host)` registers the routes on the bridge's one HTTP server and returns a `WebForms`
whose `link_for(interaction, actor)` the core calls to offer "Fill in on the web" (None when links are off, or the
person may not answer). See `links` (the tokens), `fields` (inputs and submissions), `page` (the HTML) and `routes`.
"""

from bridge.web.forms.links import FormLinks, LinkClaims, MemorySpentLinks, Refusal, SpentLinks
from bridge.web.forms.routes import DecisionDoor, WebForms, web_forms

__all__ = ["DecisionDoor", "FormLinks", "LinkClaims", "MemorySpentLinks", "Refusal", "SpentLinks", "WebForms",
           "web_forms"]

"""What tools and resources say about apps, the sandbox's policy, and app links: pure parts, no network."""

from __future__ import annotations

from mcp.types import TextResourceContents, Tool

from bridge.config.file import Config, HttpConfig, ServerConfig
from bridge.door.model import Actor
from bridge.servers import apps_extension
from bridge.web.apps import csp, meta
from bridge.web.apps.links import AppClaims, AppLinks, Browsers, Refusal

ADA = Actor("slack", "U1", "ada")
BOB = Actor("slack", "U2", "bob")


def tool(meta_: dict[str, object] | None) -> Tool:
    return Tool(name="t", input_schema={"type": "object"}, _meta=meta_)


def test_a_tools_app_and_who_may_call_it() -> None:
    assert meta.resource_uri(tool({"ui": {"resourceUri": "ui://a/b.html"}})) == "ui://a/b.html"
    assert meta.resource_uri(tool({"ui/resourceUri": "ui://old"})) == "ui://old"
    assert meta.resource_uri(tool({"ui": {"resourceUri": "https://x"}})) is None
    assert meta.resource_uri(tool(None)) is None
    app_only = tool({"ui": {"visibility": ["app"]}})
    assert not meta.for_model(app_only) and meta.for_app(app_only)
    assert meta.for_model(tool(None)) and meta.for_app(tool(None))
    model_only = tool({"ui": {"visibility": ["model"]}})
    assert meta.for_model(model_only) and not meta.for_app(model_only)
    assert meta.for_model(tool({"ui": {"visibility": "app"}}))  # malformed: the default, not a hidden tool


def test_the_sandbox_policy_is_the_declared_origins_and_nothing_more() -> None:
    none = csp.policy({}, "https://bridge.example")
    assert "connect-src 'none'" in none and "'self'" not in none and "frame-src 'none'" in none
    assert "frame-ancestors https://bridge.example" in none
    declared = {"connectDomains": ["https://api.example.com", "*", "https://x.com; script-src *", "'unsafe-eval'",
                                   "data:", "https://*.cdn.example"],
                "resourceDomains": ["https://cdn.example"]}
    policy = csp.policy(declared, "https://bridge.example")
    assert "connect-src https://api.example.com https://*.cdn.example;" in policy
    assert "script-src 'unsafe-inline' https://cdn.example;" in policy
    assert "unsafe-eval" not in policy and " * " not in policy and "data: https" not in policy.split("img-src")[0]
    resource = TextResourceContents(uri="ui://a", mime_type="text/html;profile=mcp-app", text="<p>",
                                    _meta={"ui": {"csp": declared}})
    assert meta.resource_ui(resource)["csp"] == declared


def test_a_link_is_the_persons_and_works_in_the_first_browser_only() -> None:
    links = AppLinks(lifetime=60)
    token = links.issue("view1", ADA, ends_at=10**10)
    claims = links.check(token)
    assert isinstance(claims, AppClaims) and claims.actor == ADA and claims.view_id == "view1"
    assert links.check(token[:-2] + "xx") is Refusal.INVALID
    assert links.check(links.sign(AppClaims("view1", ADA, "n", 5.0))) is Refusal.EXPIRED
    browsers = Browsers()
    secret = browsers.bind(claims, None)
    assert isinstance(secret, str)
    assert browsers.bind(claims, secret) is True and browsers.holds(claims, secret)
    assert browsers.bind(claims, None) is False and browsers.bind(claims, "guess") is False
    assert links.sandbox_view(links.sandbox_token("view1")) == "view1"
    assert links.sandbox_view(token) is None  # a link is not a sandbox address, nor the other way round
    assert links.check(links.sandbox_token("view1")) is Refusal.INVALID


def test_apps_are_offered_where_the_bridge_can_show_them() -> None:
    plain = ServerConfig(name="s", command="x")
    assert not apps_extension.offered(Config(servers={"s": plain}), plain)
    web = Config(servers={"s": plain}, http=HttpConfig(listen="127.0.0.1:8780", public_url="http://localhost:8780"))
    assert apps_extension.sandbox_url(web.http) == "http://127.0.0.1:8780"
    assert apps_extension.offered(web, plain)
    assert not apps_extension.offered(web, ServerConfig(name="s", command="x", apps=False))
    public = HttpConfig(listen=":8780", public_url="https://bridge.example")
    assert apps_extension.sandbox_url(public) == ""
    assert not apps_extension.possible(Config(http=public))
    with_sandbox = HttpConfig(listen=":8780", public_url="https://bridge.example",
                              app_sandbox_url="https://apps.bridge-sandbox.example/")
    assert apps_extension.sandbox_url(with_sandbox) == "https://apps.bridge-sandbox.example"

"""Where a link goes, read the way a browser reads it (the WHATWG URL Standard), and every way its written form can
mislead the person reading it."""

from __future__ import annotations

import pytest

from bridge.safety.browser_url import check_host, origin
from bridge.text.plain import url_host

BROWSER_READS = [
    # (written, the host a browser opens, the normalized href, a phrase the warning must hold)
    ("https://evil.example\\@good.example/login", "evil.example", "https://evil.example/@good.example/login",
     "not good.example as written"),
    ("https://evil.example:443\\@good.example/", "evil.example", "https://evil.example/@good.example/",
     "not good.example as written"),
    ("https://evil.example\\good.example/", "evil.example", "https://evil.example/good.example/", "backslash"),
    ("https://good.example@evil.example/", "evil.example", "https://good.example@evil.example/",
     "user name or password"),
    ("https://user:pw@good.example/", "good.example", "https://user:pw@good.example/", "user name or password"),
    ("https://bank.example\u200b.evil.example/", "bank.example.evil.example", "https://bank.example.evil.example/",
     "not bank.example[U+200B].evil.example as written"),
    ("https://ex\u00adample.com/", "example.com", "https://example.com/", "not ex[U+00AD]ample.com as written"),
    ("https://ex\tam\nple.com/", "example.com", "https://example.com/", "spaces, control or invisible"),
    ("https://example.com/a\tb", "example.com", "https://example.com/ab", "spaces, control or invisible"),
    ("https://%65vil.com/", "evil.com", "https://evil.com/", "not %65vil.com as written"),
    ("http://0x7f.1/", "127.0.0.1", "http://127.0.0.1/", "not 0x7f.1 as written"),
    ("http://2130706433/", "127.0.0.1", "http://127.0.0.1/", "not 2130706433 as written"),
    ("https://\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45.com/", "example.com", "https://example.com/",
     "as written"),  # full-width letters
    ("https:///path-only", "path-only", "https://path-only/", "reads as having none"),
    ("https:evil.example/", "evil.example", "https://evil.example/", "reads as having none"),
    ("https://\u0430pple.com/login", "xn--pple-43d.com", "https://xn--pple-43d.com/login", "mixes scripts"),
]


@pytest.mark.parametrize(("url", "opened", "href", "why"), BROWSER_READS)
def test_the_host_is_the_one_a_browser_opens_and_a_misleading_form_is_flagged(url: str, opened: str, href: str,
                                                                               why: str) -> None:
    check = check_host(url)
    assert (check.ascii, check.href) == (opened, href)
    assert check.suspicious and why in check.warning
    assert check.text().startswith(check.host) and opened in check.text()


@pytest.mark.parametrize(("url", "host", "href"), [
    ("https://example.org:8443/a?b", "example.org", "https://example.org:8443/a?b"),
    ("HTTPS://EXAMPLE.com", "example.com", "https://example.com/"),
    ("https://example.com:443/x#y", "example.com", "https://example.com/x#y"),
    ("http://127.0.0.1:8080/", "127.0.0.1", "http://127.0.0.1:8080/"),
    ("http://[::1]:8080/", "[::1]", "http://[::1]:8080/"),
    ("https://example.com/caf\u00e9", "example.com", "https://example.com/caf%C3%A9"),
])
def test_a_plain_link_is_not_flagged_and_its_href_is_normalized(url: str, host: str, href: str) -> None:
    check = check_host(url)
    assert (check.host, check.ascii, check.href, check.warning, check.text()) == (host, host, href, "", host)
    assert check.web


def test_a_cyrillic_look_alike_is_flagged_with_its_punycode() -> None:
    check = check_host("https://\u0430pple.com/login")
    assert check.suspicious and check.ascii == "xn--pple-43d.com"
    assert check.text() == "\u0430pple.com (really xn--pple-43d.com: mixes scripts, check it carefully)"


def test_punycode_written_by_the_server_is_decoded_and_flagged() -> None:
    check = check_host("https://xn--pple-43d.com")
    assert check.host == "\u0430pple.com" and check.suspicious
    assert "as written" not in check.warning  # punycode is how the name is written, not a disguise


def test_an_all_cyrillic_name_is_flagged_as_internationalised() -> None:
    assert check_host("https://\u043f\u0440\u0438\u043c\u0435\u0440.\u0440\u0444").warning == \
        "an internationalised name, check it carefully"
    assert check_host("https://B\u00dcCHER.example/").text() == \
        "b\u00fccher.example (really xn--bcher-kva.example: an internationalised name, check it carefully)"


@pytest.mark.parametrize("url", ["not a url", "https://", "http://[::1", "https://a\ud800b.example/",
                                 "https://a\x00b.example/", "https://exa mple.com/"])
def test_broken_urls_are_flagged_with_no_href(url: str) -> None:
    check = check_host(url)
    assert check.suspicious and check.href == "" and not check.web
    assert check.text() == "not a valid web address"


@pytest.mark.parametrize("url", ["mailto:someone@example.com", "javascript:alert(1)", "data:text/html,hi"])
def test_hostless_links_say_so_and_are_not_web_links(url: str) -> None:
    check = check_host(url)
    assert check.text() == "the link has no host" and not check.web


def test_a_url_card_s_host_detail_names_the_browser_s_host() -> None:
    assert url_host("https://\u0430pple.com/login") == \
        "\u0430pple.com (really xn--pple-43d.com: mixes scripts, check it carefully)"
    assert url_host("https://example.org/x") == "example.org"
    assert url_host("https://evil.example\\@good.example/login") == (
        "evil.example (a browser opens this host, not good.example as written; the link holds a backslash, which a "
        "browser reads as /)")


def test_a_web_origin_is_the_one_a_browser_sends() -> None:
    assert origin("HTTPS://Bridge.Example:443/forms/") == "https://bridge.example"
    assert origin("http://127.0.0.1:8080/x") == "http://127.0.0.1:8080"
    assert origin("not a url") == ""


def test_a_huge_url_is_read_in_linear_time() -> None:
    check = check_host("https://example.com/" + "\\@a" * 300_000)
    assert check.ascii == "example.com" and "backslash" in check.warning

"""The one text cleaner: control, bidi and invisible characters; look-alike hosts; sizes in encoded bytes."""

from __future__ import annotations

import html

import pytest

from bridge.sanitize import check_host, clean, fit_bytes, has_hidden, utf8_len, visible


@pytest.mark.parametrize("hostile", [
    "\x1b[2J\x1b[H", "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\", "a\u202eb", "a\u200bb", "a\u061cb",
    "a\u2060b", "a\ufeffb", "a\u00adb", "a\u2066b\u2069", "a\x85b", "a\u2028b",
])
def test_clean_removes_every_hiding_character(hostile: str) -> None:
    out = clean(hostile)
    assert "\x1b" not in out and not any(ord(c) in range(0x80, 0xA0) for c in out)
    assert not has_hidden(out.replace(" ", "").replace("\n", ""))


def test_clean_keeps_text_newlines_and_emoji_sequences() -> None:
    family = "\U0001F469\u200d\U0001F469\u200d\U0001F467"
    assert clean("line 1\r\nline 2\tend " + family) == "line 1\nline 2\tend " + family


def test_visible_shows_code_points() -> None:
    assert visible("https://a\u202eb.example/ x") == "https://a[U+202E]b.example/[U+0020]x"


def test_cyrillic_lookalike_is_flagged_with_its_punycode() -> None:
    check = check_host("https://\u0430pple.com/login")
    assert check.suspicious and check.ascii == "xn--pple-43d.com"
    assert check.text() == "\u0430pple.com (really xn--pple-43d.com: mixes scripts, check it carefully)"


def test_punycode_written_by_the_server_is_decoded_and_flagged() -> None:
    check = check_host("https://xn--pple-43d.com")
    assert check.host == "\u0430pple.com" and check.suspicious


def test_mixed_scripts_say_so() -> None:
    assert "mixes scripts" in check_host("https://p\u0430ypal.com").warning


def test_plain_hosts_are_not_flagged() -> None:
    check = check_host("https://example.org:8443/a?b")
    assert (check.host, check.suspicious, check.text()) == ("example.org", False, "example.org")


@pytest.mark.parametrize("url", ["not a url", "https://", "http://[::1"])
def test_hostless_or_broken_urls(url: str) -> None:
    assert check_host(url).suspicious


def test_fit_bytes_counts_after_escaping() -> None:
    text = "&" * 10_000
    out = fit_bytes(text, 1000, html.escape)
    assert utf8_len(out) <= 1000 and out.startswith("&amp;") and "more characters" in out
    assert fit_bytes("short", 100, html.escape) == "short"


def test_fit_bytes_on_huge_multibyte_text() -> None:
    text = "\U0001F600" * 2_000_000
    out = fit_bytes(text, 65_536, html.escape)
    assert 65_000 < utf8_len(out) <= 65_536 and out.endswith("more characters]")


def test_an_all_cyrillic_name_is_flagged_as_internationalised() -> None:
    assert check_host("https://\u043f\u0440\u0438\u043c\u0435\u0440.\u0440\u0444").warning == \
        "an internationalised name, check it carefully"


def test_a_url_card_s_host_detail_flags_a_look_alike() -> None:
    from bridge.text import url_host

    assert url_host("https://\u0430pple.com/login") == \
        "\u0430pple.com (really xn--pple-43d.com: mixes scripts, check it carefully)"
    assert url_host("https://example.org/x") == "example.org"

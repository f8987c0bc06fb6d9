"""The one text cleaner: control, bidi and invisible characters, stray zero-width joiners; sizes in encoded bytes."""

from __future__ import annotations

import html

import pytest

from bridge.safety.sanitize import clean, fit_bytes, has_hidden, utf8_len, visible


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


@pytest.mark.parametrize("sequence", [
    "\U0001F468\u200d\U0001F469\u200d\U0001F467",  # family: man, woman, girl
    "\U0001F3F3\ufe0f\u200d\U0001F308",  # rainbow flag: white flag, emoji presentation, rainbow
    "\U0001F469\U0001F3FD\u200d\U0001F4BB",  # woman technologist, medium skin tone
    "\U0001F3F4\u200d\u2620\ufe0f",  # pirate flag
])
def test_clean_keeps_a_joiner_between_two_emoji(sequence: str) -> None:
    assert clean(f"ok {sequence}!") == f"ok {sequence}!"


@pytest.mark.parametrize(("text", "cleaned"), [
    ("pay\u200dpal", "paypal"), ("\u200d", ""), ("a\u200d\U0001F468", "a\U0001F468"),
    ("\U0001F468\u200d", "\U0001F468"),
    ("\U0001F468\u200d\u200b\U0001F469", "\U0001F468\U0001F469"), ("\u0430\u200d\u0431 \u200d\u200d", "\u0430\u0431 "),
])
def test_clean_drops_a_joiner_that_joins_no_two_emoji(text: str, cleaned: str) -> None:
    assert clean(text) == cleaned


def test_clean_of_many_joiners_is_linear() -> None:
    text = ("\U0001F468\u200d" + "a\u200d") * 200_000
    assert clean(text) == ("\U0001F468" + "a") * 200_000


def test_visible_shows_code_points() -> None:
    assert visible("https://a\u202eb.example/ x") == "https://a[U+202E]b.example/[U+0020]x"


def test_fit_bytes_counts_after_escaping() -> None:
    text = "&" * 10_000
    out = fit_bytes(text, 1000, html.escape)
    assert utf8_len(out) <= 1000 and out.startswith("&amp;") and "more characters" in out
    assert fit_bytes("short", 100, html.escape) == "short"


def test_fit_bytes_on_huge_multibyte_text() -> None:
    text = "\U0001F600" * 2_000_000
    out = fit_bytes(text, 65_536, html.escape)
    assert 65_000 < utf8_len(out) <= 65_536 and out.endswith("more characters]")

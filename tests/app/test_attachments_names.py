"""Attachment names: the person's spelling kept, paths and hidden characters gone."""

from __future__ import annotations

import pytest

from agent_app.attachments.names import MAX_NAME_LENGTH, name_extension, sanitize_name


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("Report (final) v2.pdf", "Report (final) v2.pdf"),
        ("Grüße aus Köln.txt", "Grüße aus Köln.txt"),
        ("../../etc/passwd", "passwd"),
        ("C:\\Users\\me\\Desktop\\photo.png", "photo.png"),
        ("/var/tmp/a.csv", "a.csv"),
        ("evil\u202egnp.exe", "evilgnp.exe"),  # a right-to-left override hides .exe
        ("bell\x07and\x00nul.txt", "bellandnul.txt"),
        ("zero\u200bwidth.md", "zerowidth.md"),
        ("line\nbreak\ttab.txt", "line break tab.txt"),
        ("  many    spaces .txt ", "many spaces.txt"),
        (".hidden", "hidden"),
        ("...dots.txt", "dots.txt"),
        ("trailing. . .", "trailing"),
        ("", "attachment"),
        (None, "attachment"),
        ("../", "attachment"),
        ("\x00\x01.png", "png"),  # a hidden file: the leading dot goes
        ("e\u0301.txt", "\u00e9.txt"),  # decomposed é is composed (NFC)
    ],
)
def test_names_are_sanitised(raw, clean):
    assert sanitize_name(raw) == clean


def test_a_long_name_is_cut_in_its_stem_and_keeps_its_extension():
    name = sanitize_name("a" * 500 + ".markdown")
    assert len(name) == MAX_NAME_LENGTH
    assert name.endswith("a.markdown")
    assert len(sanitize_name("b" * 40 + ".txt", max_length=20)) == 20


def test_an_overlong_suffix_is_not_an_extension():
    assert name_extension("archive.tar") == ".tar"
    assert name_extension("notes.verylongsuffix") == ""
    assert name_extension(".png") == ""
    assert name_extension("photo.PNG") == ".PNG"


def test_a_cap_too_small_for_a_name_is_a_programming_error():
    with pytest.raises(ValueError, match="max_length"):
        sanitize_name("a.txt", max_length=5)

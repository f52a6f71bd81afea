"""What an upload must be to be attached (agent_app.attachments.validation and .sniffing).

Every file here is real: images written by Pillow, PDFs built byte by byte, so each check
meets the bytes a browser would send.
"""

from __future__ import annotations

import io
import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest
from pypdf import PdfReader, PdfWriter

from agent_app.attachments import (
    DEFAULT_TYPES,
    REFUSAL_CODES,
    AttachmentRefused,
    allowed_types,
    check_attachment,
    check_size,
)
from agent_app.attachments.validation import size_text
from tests.app.test_attachments_files import image_bytes, pdf_bytes, png_declaring


def refusal(data: bytes, name: str, **limits) -> AttachmentRefused:
    with pytest.raises(AttachmentRefused) as caught:
        check_attachment(data, name, **limits)
    assert caught.value.code in REFUSAL_CODES
    assert caught.value.message == str(caught.value)
    return caught.value


@pytest.mark.parametrize(
    ("fmt", "name", "media_type"),
    [
        ("PNG", "chart.png", "image/png"),
        ("JPEG", "photo.JPG", "image/jpeg"),
        ("JPEG", "photo.jpeg", "image/jpeg"),
        ("GIF", "anim.gif", "image/gif"),
        ("WEBP", "pic.webp", "image/webp"),
    ],
)
def test_images_are_sniffed_and_measured(fmt, name, media_type):
    data = image_bytes(fmt, (40, 30))
    checked = check_attachment(data, name)
    assert (checked.name, checked.media_type, checked.size) == (name, media_type, len(data))
    assert (checked.width, checked.height) == (40, 30)


def test_an_image_without_an_extension_is_what_its_bytes_are():
    checked = check_attachment(image_bytes("PNG"), "image")
    assert checked.media_type == "image/png"


@pytest.mark.parametrize(
    ("name", "body", "media_type"),
    [
        ("notes.txt", "plain words\n", "text/plain"),
        ("README.md", "# Title\n\n*emphasis*\n", "text/markdown"),
        ("table.csv", "a,b\n1,2\n", "text/csv"),
        ("data.json", '{"a": [1, 2]}', "application/json"),
        ("script.py", "print('hi')\n", "text/plain"),
        ("no-extension", "just text", "text/plain"),
        ("größe.txt", "Grüße, ☃ and 汉字", "text/plain"),
    ],
)
def test_text_types_are_utf8_told_apart_by_extension(name, body, media_type):
    checked = check_attachment(body.encode(), name)
    assert checked.media_type == media_type
    assert checked.width is None


def test_a_byte_order_mark_is_still_text():
    assert check_attachment(b"\xef\xbb\xbf{}", "x.json").media_type == "application/json"


def test_a_txt_file_of_json_stays_plain_text():
    assert check_attachment(json.dumps({"a": 1}).encode(), "a.txt").media_type == "text/plain"


def test_json_that_does_not_parse_is_a_bad_file():
    error = refusal(b'{"a": ', "data.json")
    assert error.code == "bad_file"
    assert "not valid JSON" in error.message


def test_html_named_png_is_a_type_mismatch():
    html = b"<!doctype html><html><script>alert(document.cookie)</script></html>"
    error = refusal(html, "cute-cat.png")
    assert error.code == "type_mismatch"
    assert "cute-cat.png" in error.message and "PNG" in error.message


def test_a_binary_type_behind_another_extension_is_a_type_mismatch():
    assert refusal(image_bytes("PNG"), "photo.jpg").code == "type_mismatch"
    assert refusal(pdf_bytes(["x"]), "report.txt").code == "type_mismatch"
    assert refusal(image_bytes("JPEG"), "tool.exe").code == "type_mismatch"


@pytest.mark.parametrize(
    "data",
    [
        b"PK\x03\x04" + b"\x00" * 40,  # a zip archive
        b"MZ\x90\x00\x03\x00\x00\x00",  # a Windows executable
        b"text with a \x00 NUL",
        b"\xff\xfe\x00\x00 not utf-8 \xc3\x28",
        b"BM" + b"\x00" * 60,  # a BMP image: an image, but not one on the list
    ],
)
def test_bytes_of_no_allowed_type_are_unsupported(data):
    assert refusal(data, "file.bin").code == "unsupported_type"


def test_a_known_type_left_off_the_allowed_list_is_unsupported():
    error = refusal(pdf_bytes(["x"]), "a.pdf", types=["image/png", "text/plain"])
    assert error.code == "unsupported_type"
    assert "PDF" in error.message
    assert check_attachment(b"hello", "a.txt", types=["text/plain"]).media_type == "text/plain"


def test_the_allowed_list_names_only_known_types():
    assert allowed_types(DEFAULT_TYPES) == DEFAULT_TYPES
    assert allowed_types([]) == frozenset()
    with pytest.raises(ValueError, match="image/bmp"):
        allowed_types(["image/png", "image/bmp"])
    with pytest.raises(ValueError, match="list"):
        allowed_types("image/png")


def test_an_oversize_file_is_too_large():
    data = b"x" * 2048
    error = refusal(data, "big.txt", max_bytes=2047)
    assert error.code == "too_large"
    assert "2 KB" in error.message
    assert check_attachment(data, "big.txt", max_bytes=2048).size == 2048


def test_a_declared_size_is_refused_before_the_bytes_are_read():
    with pytest.raises(AttachmentRefused) as caught:
        check_size(11 * 1024 * 1024, name="movie.txt")
    assert caught.value.code == "too_large"
    assert "11 MB" in caught.value.message and "10 MB" in caught.value.message


def test_an_empty_file_is_refused():
    assert refusal(b"", "empty.txt").code == "empty"


def test_a_pixel_bomb_is_refused_from_its_header_without_decoding():
    bomb = png_declaring(100_000, 100_000)
    assert len(bomb) < 200
    error = refusal(bomb, "bomb.png")
    # Its pixel data is one row: a decode would have made it a bad_file, not too large.
    assert error.code == "image_too_large"
    assert "megapixels" in error.message


def test_declared_dimensions_above_the_pixel_limit_are_refused():
    error = refusal(png_declaring(8000, 7000), "wide.png")
    assert error.code == "image_too_large"
    assert "8000 x 7000" in error.message and "50 megapixels" in error.message


def test_a_real_image_above_a_configured_pixel_limit_is_refused():
    data = image_bytes("JPEG", (400, 300))
    assert refusal(data, "p.jpg", max_pixels=100_000).code == "image_too_large"
    assert check_attachment(data, "p.jpg", max_pixels=120_000).width == 400


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "GIF", "WEBP"])
def test_a_truncated_image_is_a_bad_file(fmt):
    data = image_bytes(fmt, (300, 200), color=None)
    error = refusal(data[: len(data) // 2], f"cut.{fmt.lower()}")
    assert error.code == "bad_file"
    assert "damaged or incomplete" in error.message


def test_an_image_with_a_corrupt_chunk_is_a_bad_file():
    data = bytearray(image_bytes("PNG", (64, 64)))
    data[40] ^= 0xFF  # inside IDAT: its checksum no longer matches
    assert refusal(bytes(data), "flipped.png").code == "bad_file"


def test_an_image_signature_on_garbage_is_a_bad_file():
    assert refusal(b"\x89PNG\r\n\x1a\n" + b"garbage" * 10, "fake.png").code == "bad_file"


def test_a_pdf_is_checked_by_opening_it():
    data = pdf_bytes(["one", "two"])
    checked = check_attachment(data, "report.pdf")
    assert (checked.media_type, checked.size) == ("application/pdf", len(data))


def test_a_broken_pdf_is_a_bad_file():
    assert refusal(b"%PDF-1.4\nthis is not a pdf at all\n", "broken.pdf").code == "bad_file"


def test_a_password_protected_pdf_is_refused_with_its_reason():
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf_bytes(["secret"]))))
    writer.encrypt("hunter2")
    buffer = io.BytesIO()
    writer.write(buffer)
    error = refusal(buffer.getvalue(), "locked.pdf")
    assert error.code == "bad_file"
    assert "password" in error.message


def test_the_checked_name_is_the_sanitised_one():
    checked = check_attachment(b"hi", "../../etc/pass\x00wd.txt")
    assert checked.name == "passwd.txt"


def test_a_refusal_has_a_known_code_and_a_json_form():
    error = AttachmentRefused("too_large", "Too big.")
    assert error.as_dict() == {"code": "too_large", "message": "Too big."}
    with pytest.raises(ValueError, match="unknown refusal code"):
        AttachmentRefused("nope", "x")


@pytest.mark.parametrize("name", ["x.png", "x.jpeg", "x.gif", "x.webp", "x.pdf"])
def test_damaged_files_are_accepted_or_refused_never_an_unexpected_error(name):
    """Seeded corruption (bytes flipped, cut, inserted): every outcome is a clean one."""
    fmt = name.rsplit(".", 1)[1].upper()
    data = pdf_bytes(["hello", "world"]) if fmt == "PDF" else image_bytes(fmt, (50, 40), None)
    rng = random.Random(name)
    outcomes = set()
    for _ in range(60):
        damaged = bytearray(data)
        position = rng.randrange(8, len(damaged))
        kind = rng.randrange(3)
        if kind == 0:
            damaged[position] ^= rng.randrange(1, 256)
        elif kind == 1:
            del damaged[position:]
        else:
            damaged[position:position] = rng.randbytes(rng.randint(1, 40))
        try:
            check_attachment(bytes(damaged), name)
            outcomes.add("accepted")
        except AttachmentRefused as error:
            outcomes.add(error.code)
    assert "bad_file" in outcomes
    assert outcomes <= {"accepted"} | REFUSAL_CODES


#: Sizes around each change of unit and each rounding tie (a half KB, a twentieth of a MB).
SIZES = [0, 1, 512, 1023, 1024, 1535, 1536, 2560, 10_000, 1024 * 1024 - 513, 1024 * 1024 - 512]
SIZES += [1024 * 1024, 1310720, 1363148, 19.4 * 1024 * 1024, 10 * 1024 * 1024, 2**40 + 52429]


def test_sizes_are_written_as_the_page_writes_them():
    assert size_text(512) == "512 B"
    assert size_text(2560) == "3 KB"  # halves round up, as in the browser
    assert size_text(1310720) == "1.3 MB"
    assert size_text(10 * 1024 * 1024) == "10 MB"
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is needed to compare with the browser's sizeText (.ci/run installs it)")
    script = Path("agent_app/static/agent_app/upload_check.js").resolve().as_uri()
    sizes = [int(size) for size in SIZES]
    page = subprocess.run(
        [
            node,
            "--input-type=module",
            "-e",
            f"""
            const {{ sizeText }} = await import({json.dumps(script)});
            console.log(JSON.stringify({json.dumps(sizes)}.map(sizeText)));""",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert json.loads(page.stdout) == [size_text(size) for size in sizes]

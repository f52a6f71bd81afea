"""Real files for the attachment tests, generated here: images by Pillow, PDFs by hand.

The other ``test_attachments_*`` modules import these makers; the tests below check that
what they make is what it claims to be, read back by Pillow and pypdf.
"""

from __future__ import annotations

import io
import struct
import zlib

from PIL import Image
from pypdf import PdfReader


def image_bytes(fmt: str = "PNG", size: tuple[int, int] = (32, 24), color=(200, 30, 60)) -> bytes:
    """A real image of ``size`` in ``fmt`` (PNG, JPEG, GIF, WEBP), written by Pillow."""
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format=fmt)
    return buffer.getvalue()


def png_declaring(width: int, height: int) -> bytes:
    """A PNG whose header declares ``width`` x ``height`` but which has almost no pixel data.

    The shape of a decompression bomb: tiny on disk, enormous once decoded. Its one IDAT
    chunk holds a single compressed row, so decoding it would fail: a refusal for its size
    shows the header was read and nothing decoded.
    """

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit greyscale
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\x00" * 16))
        + chunk(b"IEND", b"")
    )


def pdf_bytes(pages: list[str]) -> bytes:
    """A minimal valid PDF with one line of Helvetica text on each page, offsets exact."""
    objects: list[bytes] = []
    kids = " ".join(f"{4 + 2 * index} 0 R" for index in range(len(pages)))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode())
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for index, text in enumerate(pages):
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream = f"BT /F1 12 Tf 72 720 Td ({escaped}) Tj ET".encode()
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            f"/Resources << /Font << /F1 3 0 R >> >> /Contents {5 + 2 * index} 0 R >>".encode()
        )
        objects.append(f"<< /Length {len(stream)} >>\nstream\n".encode() + stream + b"\nendstream")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\n".encode()
    out += f"startxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def test_the_images_are_real_images():
    for fmt in ("PNG", "JPEG", "GIF", "WEBP"):
        with Image.open(io.BytesIO(image_bytes(fmt, (7, 5)))) as image:
            image.load()
            assert (image.format, image.size) == (fmt, (7, 5))


def test_the_bomb_declares_its_size_in_a_valid_header():
    with Image.open(io.BytesIO(png_declaring(300, 200))) as image:
        assert (image.format, image.size) == ("PNG", (300, 200))


def test_the_pdf_is_read_by_pypdf_page_by_page():
    reader = PdfReader(io.BytesIO(pdf_bytes(["first (page)", "second"])))
    assert [page.extract_text() for page in reader.pages] == ["first (page)", "second"]

"""``pixels``: a PNG screenshot's pixels, decoded with the standard library (no imaging package needed)."""

from __future__ import annotations

import struct
import zlib

__all__ = ["pixels"]


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def pixels(png: bytes) -> tuple[int, int, list[tuple[int, ...]]]:
    """``(width, height, [(r, g, b), ...])`` of an 8-bit RGB or RGBA, non-interlaced PNG (Chromium's screenshots)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    at, idat = 8, b""
    width = height = channels = 0
    while at < len(png):
        (length,) = struct.unpack(">I", png[at : at + 4])
        kind, body = png[at + 4 : at + 8], png[at + 8 : at + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or color not in (2, 6) or interlace != 0:
                raise ValueError("only 8-bit RGB(A), non-interlaced PNGs are decoded here")
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        at += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytearray] = []
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for x in range(stride):
            left = line[x - channels] if x >= channels else 0
            up = previous[x]
            corner = previous[x - channels] if x >= channels else 0
            line[x] = (line[x] + (0, left, up, (left + up) // 2, _paeth(left, up, corner))[kind]) & 0xFF
        rows.append(line)
        previous = line
    found = [tuple(row[x : x + 3]) for row in rows for x in range(0, stride, channels)]
    return width, height, found

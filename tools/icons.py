"""Draws the page's icons (server/web/icon-192.png and icon-512.png, for the web app
manifest): the red heart of server/web/icon.svg on the felt's green, with the standard
library only (a heart's implicit curve sampled 4x4 per pixel, written as a PNG by zlib).
Run `python -m tools.icons` after changing the drawing; the files are committed."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

WEB = Path(__file__).resolve().parent.parent / "server" / "web"
FELT = (0x1D, 0x5A, 0x3B)
HEART = (0xD8, 0x34, 0x2B)
SAMPLES = 4


def _in_heart(x: float, y: float) -> bool:
    """(x, y) in the unit box, the heart centred (the curve (x²+y²-1)³ = x²y³, scaled)."""
    u, v = (x - 0.5) * 2.9, (0.47 - y) * 2.9
    return (u * u + v * v - 1) ** 3 - u * u * v ** 3 <= 0


def _in_square(x: float, y: float, radius: float = 0.22) -> bool:
    """(x, y) in the unit square with rounded corners (a maskable icon keeps its middle)."""
    cx = min(max(x, radius), 1 - radius)
    cy = min(max(y, radius), 1 - radius)
    return (x - cx) ** 2 + (y - cy) ** 2 <= radius * radius


def icon(size: int) -> bytes:
    """The icon as a PNG of ``size`` x ``size`` pixels (RGBA)."""
    rows = bytearray()
    for row in range(size):
        rows.append(0)  # no filter
        for column in range(size):
            inside = heart = 0
            for i in range(SAMPLES):
                for j in range(SAMPLES):
                    x = (column + (i + 0.5) / SAMPLES) / size
                    y = (row + (j + 0.5) / SAMPLES) / size
                    if _in_square(x, y):
                        inside += 1
                        heart += _in_heart(x, y)
            n = SAMPLES * SAMPLES
            share = heart / inside if inside else 0.0
            colour = [round(f * (1 - share) + h * share) for f, h in zip(FELT, HEART, strict=True)]
            rows.extend([*colour, round(255 * inside / n)])

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", size, size, 8, 6, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(bytes(rows), 9)) + chunk(b"IEND", b""))


def main() -> None:
    for size in (192, 512):
        (WEB / f"icon-{size}.png").write_bytes(icon(size))


if __name__ == "__main__":
    main()

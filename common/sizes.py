"""Sizes as the site says them: one helper for every byte count shown (walk 38), in decimal units, as labelled
(16,926,308 bytes is 16.9 MB; Django's filesizeformat divides by 1024 and still says MB)."""

from __future__ import annotations

KB, MB, GB = 1000, 1000**2, 1000**3


def size_text(n: float) -> str:
    """A byte count as people read it: 999 bytes, 1.5 kB, 16.9 MB, 2 GB."""
    for unit, factor in (("GB", GB), ("MB", MB), ("kB", KB)):
        if n >= factor:
            value = round(n / factor, 1)
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n:.0f} bytes"

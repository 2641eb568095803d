"""What an environment holds, for the reproducibility record: a venv's installed distributions, or an image's id."""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path


def venv_lock(venv: Path) -> dict:
    """The venv's Python version and installed distributions (name -> version), read from its dist-info metadata
    without running its interpreter (a `pip freeze` equivalent that executes nothing of the environment)."""
    site_packages = [str(p) for p in sorted(venv.glob("lib/python*/site-packages"))]
    distributions = {}
    for dist in importlib.metadata.distributions(path=site_packages):
        name = dist.metadata["Name"]
        if name:
            distributions[re.sub(r"[-_.]+", "-", name).lower()] = dist.version
    return {"kind": "venv", "python": _venv_python(venv), "distributions": dict(sorted(distributions.items()))}


def _venv_python(venv: Path) -> str:
    config = venv / "pyvenv.cfg"
    if config.exists():
        for line in config.read_text().splitlines():
            key, _, value = line.partition("=")
            if key.strip() in ("version", "version_info"):
                return value.strip()
    return ""


def image_lock(image, *, tag: str) -> dict:
    """A Docker image by its content-addressed id (the digest of its configuration), plus the tag it ran under."""
    return {"kind": "image", "image": tag, "image_id": image.id}
